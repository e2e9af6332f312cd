#!/usr/bin/env bash
# Session 31: builds .gpu/s33 for call80.sh, the GPU acceptance suite with the sm_80 path forced
# (FAC_ARCH=sm_80) on the final build: fac, the test binary, and the sm_80 test bundles as
# scripts/gpu-prepare makes them (the sm_90a ones were checked in callB.sh from .gpu/s32).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export CGO_ENABLED=0 FAC_LLC=$(scripts/ensure-llc)
d=.gpu/s33
mkdir -p $d
go build -ldflags="-s -w" -o $d/fac ./cmd/fac
go test -c -tags gpu -ldflags="-s -w" -o $d/tests.test ./tests
masks=(--mask none --mask causal --mask causal_bottom_right --mask "sliding_window(20, 3)" --mask "prefix_lm(40)"
       --mask document --mask "chunked(16)")
scores=(--score identity --score "softcap(2.5)" --score alibi)
$d/fac build --backward "${masks[@]}" "${scores[@]}" --dtype bf16,f16 --dim 64,128 --arch sm_80 -o $d/test-sm_80.bundle &
$d/fac build --backward --mask "sliding_window(20, 3)" --score "softcap(2.5)" --const DETERMINISTIC=true --const AUX_GRAD=false \
  --dtype bf16 --dim 64 --arch sm_80 -o $d/test-det-sm_80.bundle &
FAC_WRITE_PATTERN_BUNDLE=$(pwd)/$d/test-patterns.bundle FAC_PATTERN_ARCHS=sm_80 \
  go test ./tests -run TestWritePatternBundle -count=1 >/dev/null &
wait
gzip -f $d/*.bundle
du -sh $d
