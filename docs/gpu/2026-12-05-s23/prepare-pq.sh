#!/usr/bin/env bash
# Session 23: the builds of call6.sh, into DIR (default .gpu/s23p), from the tree: fac; forward
# bench bundles, D = 128 (five masks) and D = 64 (none, causal), of the default (t), of
# prefetch_q=true (pq: each program prefetches into L2 the Q tile of the program num_sms() after
# it), of full_first=true (ff: a tile's full blocks before its partial ones) and of both (pqff);
# both with heads_minor and the TMA store as well (all); a check bundle of pqff (four masks, bf16,
# D 64/128, with and without heads_minor); the PTX of pqff for ptxas -v; timeline bundles
# (ptxstamp) of pq and ff.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s23p}
export CGO_ENABLED=0
FAC_LLC=$(scripts/ensure-llc); export FAC_LLC
mkdir -p $d/ptx
go build -ldflags="-s -w" -o $d/fac ./cmd/fac
bm=(--mask none --mask causal --mask "sliding_window(1023, 0)" --mask document --mask "prefix_lm(1024)")
declare -A C=([t]="" [pq]="--const prefetch_q=true" [ff]="--const full_first=true" [pqff]="--const prefetch_q=true --const full_first=true")
for v in t pq ff pqff; do
  $d/fac build "${bm[@]}" ${C[$v]} --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/$v-d128.bundle
done
for v in t pqff; do
  $d/fac build --mask none --mask causal ${C[$v]} --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/$v-d64.bundle
done
FAC_TMA_STORE=1 $d/fac build "${bm[@]}" ${C[pqff]} --const heads_minor=true --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/all-d128.bundle
cm=(--mask causal --mask "sliding_window(20, 3)" --mask document --mask none)
$d/fac build "${cm[@]}" ${C[pqff]} --dtype bf16 --dim 64,128 --arch sm_90a --cache-dir - -o $d/pqff-check.bundle
$d/fac build "${cm[@]}" ${C[pqff]} --const heads_minor=true --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/pqffhm-check.bundle
for m in causal "sliding_window(1023, 0)" document none; do
  n=$(echo "pqff_${m}_d128" | tr -c 'a-z0-9_\n' '_')
  $d/fac compile --cache-dir - --mask "$m" --const DTYPE=bf16 --const HEAD_DIM=128 ${C[pqff]} --arch sm_90a --emit ptx -o $d/ptx/$n.ptx
done
for v in pq ff; do
  $d/fac build --mask "sliding_window(1023, 0)" --mask document --mask causal ${C[$v]} --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/$v.bundle
  go run ./internal/tools/ptxstamp patch $d/$v.bundle $d/stamp-$v.bundle && rm $d/$v.bundle
done
(cd $d && tar czf ptx.tgz ptx && rm -rf ptx && gzip -f *.bundle)
du -sh $d
