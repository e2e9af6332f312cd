#!/usr/bin/env bash
# Session 23: the builds of call6.sh, into DIR (default .gpu/s23p), from the tree: fac; forward
# bench bundles of the default (t) and of prefetch_q=true (pq: each program prefetches into L2
# the Q tile of the program num_sms() after it), D = 128 (five masks) and D = 64 (none, causal);
# pq with heads_minor and the TMA store as well (pqall); a check bundle of pq (four masks, bf16,
# D 64/128, with and without heads_minor); the PTX of pq for ptxas -v; timeline bundles
# (ptxstamp) of pq.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s23p}
export CGO_ENABLED=0
FAC_LLC=$(scripts/ensure-llc); export FAC_LLC
mkdir -p $d/ptx
go build -ldflags="-s -w" -o $d/fac ./cmd/fac
bm=(--mask none --mask causal --mask "sliding_window(1023, 0)" --mask document --mask "prefix_lm(1024)")
PQ="--const prefetch_q=true"
$d/fac build "${bm[@]}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/t-d128.bundle
$d/fac build "${bm[@]}" $PQ --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/pq-d128.bundle
$d/fac build --mask none --mask causal --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/t-d64.bundle
$d/fac build --mask none --mask causal $PQ --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/pq-d64.bundle
FAC_TMA_STORE=1 $d/fac build "${bm[@]}" $PQ --const heads_minor=true --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/pqall-d128.bundle
cm=(--mask causal --mask "sliding_window(20, 3)" --mask document --mask none)
$d/fac build "${cm[@]}" $PQ --dtype bf16 --dim 64,128 --arch sm_90a --cache-dir - -o $d/pq-check.bundle
$d/fac build "${cm[@]}" $PQ --const heads_minor=true --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/pqhm-check.bundle
for m in causal "sliding_window(1023, 0)" document none; do
  n=$(echo "pq_${m}_d128" | tr -c 'a-z0-9_\n' '_')
  $d/fac compile --cache-dir - --mask "$m" --const DTYPE=bf16 --const HEAD_DIM=128 $PQ --arch sm_90a --emit ptx -o $d/ptx/$n.ptx
done
$d/fac build --mask "sliding_window(1023, 0)" --mask document --mask causal $PQ --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/pq.bundle
go run ./internal/tools/ptxstamp patch $d/pq.bundle $d/stamp-pq.bundle && rm $d/pq.bundle
(cd $d && tar czf ptx.tgz ptx && rm -rf ptx && gzip -f *.bundle)
du -sh $d
