#!/usr/bin/env bash
# Session 22: the builds of call 4, into DIR (default .gpu/s22m), run from the tree (branch
# s22-tmastore, merged: FAC_TMA_STORE=1, the epilogue's O through a TMA store). fac; the forward and backward
# bench bundles with (tms) and without (t) the TMA store, D = 128 (five masks) and D = 64 (none,
# causal); the forward with heads_minor (hm, D = 128; hmtms with the TMA store too); a check bundle of tms (six masks, bf16/f16, D 64/128, forward and backward); the PTX of
# tms for ptxas -v; timeline bundles (ptxstamp) of tms. Then a slim copy of the GPU suite's sm_90a
# files from SUITE (default .gpu/s22v) into $DIR-suite, so that the carry stays under 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s22m}; suite=${SUITE:-.gpu/s22v}
export CGO_ENABLED=0
FAC_LLC=$(scripts/ensure-llc); export FAC_LLC
mkdir -p $d/ptx
go build -ldflags="-s -w" -o $d/fac ./cmd/fac
bm=(--mask none --mask causal --mask "sliding_window(1023, 0)" --mask document --mask "prefix_lm(1024)")
for v in t tms; do
  e=""; [ $v = tms ] && e=1
  FAC_TMA_STORE=$e $d/fac build --backward "${bm[@]}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/$v-d128.bundle
  FAC_TMA_STORE=$e $d/fac build --mask none --mask causal --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/$v-d64.bundle
done
# FlashAttention-3's shape of it: persistent, two K/V buffers, O by TMA store from its own staging
# tile (197,632 bytes), so that the next tile's Q and first K/V load during the epilogue.
FAC_TMA_STORE=1 $d/fac build "${bm[@]}" --const persistent=true --const num_stages=2 --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/p2tms-d128.bundle
# flash_fwd's heads_minor (the grid ordered q tile first across heads: longest first under causal).
$d/fac build "${bm[@]}" --const heads_minor=true --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/hm-d128.bundle
FAC_TMA_STORE=1 $d/fac build "${bm[@]}" --const heads_minor=true --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/hmtms-d128.bundle
$d/fac build --mask causal --mask "sliding_window(20, 3)" --mask document --const heads_minor=true --dtype bf16 --dim 128 \
  --arch sm_90a --cache-dir - -o $d/hm-check.bundle
cm=(--mask causal --mask "sliding_window(20, 3)" --mask "sliding_window(1023, 0)" --mask document --mask none --mask "prefix_lm(100)")
FAC_TMA_STORE=1 $d/fac build --backward "${cm[@]}" --dtype bf16,f16 --dim 64,128 --arch sm_90a --cache-dir - -o $d/tms-check.bundle
# The deterministic backward's dQ kernel (flash_bwd_dq) takes the TMA store too.
FAC_TMA_STORE=1 $d/fac build --backward --mask "sliding_window(20, 3)" --const DETERMINISTIC=true --const AUX_GRAD=false \
  --dtype bf16 --dim 64,128 --arch sm_90a --cache-dir - -o $d/tms-det.bundle
for m in causal "sliding_window(1023, 0)" document none; do for h in 64 128; do
  n=$(echo "tms_${m}_d$h" | tr -c 'a-z0-9_\n' '_')
  FAC_TMA_STORE=1 $d/fac compile --cache-dir - --mask "$m" --const DTYPE=bf16 --const HEAD_DIM=$h --arch sm_90a --emit ptx -o $d/ptx/$n.ptx
done; done
FAC_TMA_STORE=1 $d/fac compile --cache-dir - --kernel flash_bwd --mask causal --const DTYPE=bf16 --const HEAD_DIM=128 --arch sm_90a --emit ptx -o $d/ptx/tms_bwd_causal_d128.ptx
FAC_TMA_STORE=1 $d/fac build --mask "sliding_window(1023, 0)" --mask document --mask causal --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/tms.bundle
go run ./internal/tools/ptxstamp patch $d/tms.bundle $d/stamp-tms.bundle && rm $d/tms.bundle
(cd $d && tar czf ptx.tgz ptx && rm -rf ptx && gzip -f *.bundle)
mkdir -p $d-suite && cp $suite/tests.test $suite/test-sm_90a.bundle.gz $suite/test-det-sm_90a.bundle.gz $suite/test-patterns.bundle.gz $d-suite/
du -sh $d $d-suite
