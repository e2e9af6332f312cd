#!/usr/bin/env bash
# Session 22: timeline bundles (ptxstamp) of the D = 64 forward, default (t) and pingpong (pp), none
# and causal, bf16, sm_90a, into DIR (default .gpu/s22d). Theory says pingpong should pay most at
# D = 64 (the softmax is as long as at D = 128, the GEMMs half as long), yet it measured 3% slower
# (session 21): the timelines say where its iterations go.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s22d}
export CGO_ENABLED=0
FAC_LLC=$(scripts/ensure-llc); export FAC_LLC
mkdir -p $d
go build -ldflags="-s -w" -o $d/fac ./cmd/fac
$d/fac build --mask none --mask causal --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/t.bundle
$d/fac build --mask none --mask causal --const pingpong=true --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/pp.bundle
for v in t pp; do go run ./internal/tools/ptxstamp patch $d/$v.bundle $d/stamp-$v.bundle; rm $d/$v.bundle; done
gzip -f $d/*.bundle
du -sh $d
