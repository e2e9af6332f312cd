#!/usr/bin/env bash
# Session 27: what the device calls carry (no Go or llc there).
# .gpu/s26p: session 26's `GPU_DIR=.gpu/s26p scripts/gpu-prepare --arch sm_90a` (the same kernels
#   as this session's HEAD), for call 1.
# .gpu/s27-80: the sm_80 suite's bundles (call 2), s26p's fac and tests.test.
# .gpu/s27: the slim set for call 3, with this session's tests.test (TestGPUDecodeLongKV,
#   TestGPUVarlenLong).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export CGO_ENABLED=0 FAC_LLC=$(scripts/ensure-llc)
d=.gpu/s27-80; mkdir -p $d; cp .gpu/s26p/fac .gpu/s26p/tests.test $d/
masks=(--mask none --mask causal --mask causal_bottom_right --mask "sliding_window(20, 3)" --mask "prefix_lm(40)" --mask document --mask "chunked(16)")
scores=(--score identity --score "softcap(2.5)" --score alibi)
$d/fac build --backward "${masks[@]}" "${scores[@]}" --dtype bf16,f16 --dim 64,128 --arch sm_80 -o $d/test-sm_80.bundle
$d/fac build --backward --mask "sliding_window(20, 3)" --score "softcap(2.5)" --const DETERMINISTIC=true --const AUX_GRAD=false \
  --dtype bf16 --dim 64 --arch sm_80 -o $d/test-det-sm_80.bundle
FAC_WRITE_PATTERN_BUNDLE=$(pwd)/$d/test-patterns.bundle FAC_PATTERN_ARCHS=sm_80 go test ./tests -run TestWritePatternBundle -count=1 >/dev/null
gzip -f $d/*.bundle
d=.gpu/s27; mkdir -p $d
for f in fac test-sm_90a.bundle.gz test-det-sm_90a.bundle.gz test-patterns.bundle.gz bench-sm_90a.bundle.gz bench-d64-sm_90a.bundle.gz \
         bench-decode-n128.bundle.gz bench-decode-w8.bundle.gz bench-decode-window.bundle.gz decode_window.fa; do
  cp .gpu/s26p/$f $d/
done
cp ../shared/bench/flex_bench.py ../shared/bench/decode_bench.py $d/
go test -c -tags gpu -ldflags="-s -w" -o $d/tests.test ./tests
