#!/usr/bin/env bash
# Session 18: the builds the calls carried, made here: fac, the GPU test binary, the acceptance
# suite's bundles for ARCHS (default sm_90a and sm_80), the bench bundles and the PTX of the 84
# forward kernels (7 masks × 3 scores × bf16/f16 × D 64/128) for ptxas -v, into DIR (default
# .gpu/s18/v: calls 2 and 3, HEAD 3d0e17e's kernels; .gpu/s18/f with ARCHS=sm_90a: call 4).
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s18/v}
export CGO_ENABLED=0
FAC_LLC=$(scripts/ensure-llc); export FAC_LLC
mkdir -p $d/ptx
go build -ldflags="-s -w" -o $d/fac ./cmd/fac
go test -c -tags gpu -ldflags="-s -w" -o $d/tests.test ./tests
masks=(none causal causal_bottom_right "sliding_window(20, 3)" "prefix_lm(40)" document "chunked(16)")
scores=(identity "softcap(2.5)" alibi)
mflags=(); for m in "${masks[@]}"; do mflags+=(--mask "$m"); done
sflags=(); for s in "${scores[@]}"; do sflags+=(--score "$s"); done
for arch in ${ARCHS:-sm_90a sm_80}; do
  $d/fac build --backward "${mflags[@]}" "${sflags[@]}" --dtype bf16,f16 --dim 64,128 --arch $arch -o $d/test-$arch.bundle
  $d/fac build --backward --mask "sliding_window(20, 3)" --score "softcap(2.5)" --const DETERMINISTIC=true --const AUX_GRAD=false \
    --dtype bf16 --dim 64 --arch $arch -o $d/test-det-$arch.bundle
done
FAC_WRITE_PATTERN_BUNDLE=$(pwd)/$d/test-patterns.bundle FAC_PATTERN_ARCHS=$(echo ${ARCHS:-sm_90a sm_80} | tr " " ,) go test ./tests -run TestWritePatternBundle -count=1 >/dev/null
bench=(--mask none --mask causal --mask "sliding_window(1023, 0)" --mask document --mask "prefix_lm(1024)")
$d/fac build --backward "${bench[@]}" --dtype bf16 --dim 128 --arch sm_90a -o $d/bench.bundle
$d/fac build --mask none --mask causal --mask document --dtype bf16 --dim 64 --arch sm_90a -o $d/d64.bundle
for m in "${masks[@]}"; do for s in "${scores[@]}"; do for t in bf16 f16; do for h in 64 128; do
  n=$(echo "fwd_${m}_${s}_${t}_d$h" | tr -c 'a-z0-9_\n' '_')
  $d/fac compile --cache-dir - --mask "$m" --score "$s" --const DTYPE=$t --const HEAD_DIM=$h --arch sm_90a --emit ptx -o $d/ptx/$n.ptx
done; done; done; done
(cd $d && tar czf ptx.tgz ptx && rm -rf ptx && gzip -f *.bundle)
cp ../shared/bench/flex_bench.py $d/
du -sh $d
