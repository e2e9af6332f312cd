#!/usr/bin/env bash
# Session 21, after prepare.sh (whose fac, in DIR/sweep, predates the change): the mask's compares
# as words (codegen/core/bit_mask.go; run it from a checkout of branch s21-bitmask), this tree's fac
# (bm) against the sweep's (t), in DIR/bm: the
# five anchors at D = 128 (both) and 64 (bm), and the PTX of three masks (both) for ptxas and SASS.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s21}
export CGO_ENABLED=0
FAC_LLC=$(scripts/ensure-llc); export FAC_LLC
f=$d/sweep/fac
masks=(none causal "sliding_window(1023, 0)" document "prefix_lm(1024)")
mflags=(); for m in "${masks[@]}"; do mflags+=(--mask "$m"); done
b=$d/bm; rm -rf $b; mkdir -p $b
go build -o $b/fac ./cmd/fac
for h in 128 64; do $b/fac build "${mflags[@]}" --dtype bf16 --dim $h --arch sm_90a --cache-dir - -o $b/bm-d$h.bundle; done
for m in "sliding_window(1023, 0)" document causal; do n=$(echo "$m" | tr -c 'a-z0-9\n' '_' | cut -c1-14)
  $b/fac compile --cache-dir - --mask "$m" --const DTYPE=bf16 --const HEAD_DIM=128 --arch sm_90a --emit ptx -o $b/bm-$n.ptx
  $f compile --cache-dir - --mask "$m" --const DTYPE=bf16 --const HEAD_DIM=128 --arch sm_90a --emit ptx -o $b/t-$n.ptx
done
$f build "${mflags[@]}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $b/t-d128.bundle
# The backward's masks take the same lowering (its select of P).
$f build --backward "${mflags[@]}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $b/t-bwd.bundle
$b/fac build --backward "${mflags[@]}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $b/bm-bwd.bundle
# GPU checks of bm at odd shapes (forward; the backward's masks take the same lowering).
$b/fac build --mask causal --mask "sliding_window(20, 3)" --mask "sliding_window(1023, 0)" --mask document --mask none \
  --mask "prefix_lm(100)" --dtype bf16,f16 --dim 64,128 --arch sm_90a --cache-dir - --backward -o $b/check.bundle
gzip -f $b/*.bundle $b/*.ptx
du -sh $b
