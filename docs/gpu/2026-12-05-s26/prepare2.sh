#!/usr/bin/env bash
# Session 26, after call 2: heads_group on the grid's third axis (no division in the kernel) and in
# the heads_minor set (16), into DIR (default .gpu/s26b): the bench bundle of the new defaults,
# sliding window 1024 and document with heads_group 0 (g0) and without heads_minor (hmoff) to
# compare, and the D = 128 sliding-window and document kernels of every stdlib score in bf16 and
# f16 for GPU checks at odd shapes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s26b}
source scripts/gpu-env $d
bench=(--mask none --mask causal --mask "sliding_window(1023, 0)" --mask document --mask "prefix_lm(1024)")
m=(--mask "sliding_window(1023, 0)" --mask document)
$d/fac build "${bench[@]}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/bench.bundle &
$d/fac build "${m[@]}" --const heads_group=0 --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/g0.bundle &
wait
$d/fac build "${m[@]}" --const heads_minor=false --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/hmoff.bundle &
$d/fac build --mask "sliding_window(20, 3)" --mask "sliding_window(1023, 0)" --mask document --score identity --score "softcap(2.5)" --score alibi \
  --dtype bf16,f16 --dim 128 --arch sm_90a --cache-dir - -o $d/check.bundle &
wait
gzip -f $d/*.bundle
du -sh $d
