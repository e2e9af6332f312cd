#!/usr/bin/env bash
# Session 25, for a later session: heads_minor's order at many heads into DIR (default .gpu/s25f):
# fac and, at D = 128 bf16 sm_90a, sliding window 1024 and document with heads_minor and
# heads_group 0 (today's default), 16, 32, and without heads_minor (hmoff).
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s25f}
source scripts/gpu-env $d
m=(--mask "sliding_window(1023, 0)" --mask document)
b() { $d/fac build "${m[@]}" "${@:2}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/$1.bundle; }
b g0
b g16 --const heads_group=16
b g32 --const heads_group=32
b hmoff --const heads_minor=false
gzip -f $d/*.bundle
du -sh $d
