#!/usr/bin/env bash
# Session 23: the builds of call6.sh, into DIR (default .gpu/s23p), from the tree: fac; forward
# bench bundles, D = 128 (five masks) and D = 64 (none, causal), of the default (t), of
# prefetch_q=true (pq: each program prefetches into L2 the Q tile of the program num_sms() after
# it), of full_first=true (ff: a tile's full blocks before its partial ones) and of both (pqff);
# both with heads_minor and the TMA store as well (all); a check bundle of pqff (four masks, bf16,
# D 64/128, with and without heads_minor); the PTX of pqff for ptxas -v; timeline bundles
# (ptxstamp) of pq and ff. Consumer groups (flash_fwd's consumer_groups, with 64-row tiles of one
# warpgroup): three at D = 64 on 192-row mask blocks (g3, two and three K/V buffers), two at D =
# 64 and 128 (g2), g3 with the TMA store (g3tms), their check bundles and PTX.
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
G="--const BLOCK_M=64 --const BLOCK_N=128 --const num_warps=4 --const SPARSE_K=128 --const warp_specialize=true --const overlap=true --const lazy_rescale=true --const fold_scale=true"
G3="$G --const consumer_groups=3 --const SPARSE_Q=192"
G2="$G --const consumer_groups=2 --const SPARSE_Q=128"
$d/fac build --mask none --mask causal $G3 --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/g3-d64.bundle
$d/fac build --mask none --mask causal $G3 --const num_stages=3 --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/g3s3-d64.bundle
FAC_TMA_STORE=1 $d/fac build --mask none --mask causal $G3 --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/g3tms-d64.bundle
$d/fac build --mask none --mask causal $G2 --dtype bf16 --dim 64,128 --arch sm_90a --cache-dir - -o $d/g2.bundle
$d/fac build "${cm[@]}" $G3 --dtype bf16,f16 --dim 64 --arch sm_90a --cache-dir - -o $d/g3-check.bundle
$d/fac build "${cm[@]}" $G2 --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/g2-check.bundle
for m in causal none; do
  $d/fac compile --cache-dir - --mask $m --const DTYPE=bf16 --const HEAD_DIM=64 $G3 --arch sm_90a --emit ptx -o $d/ptx/g3_${m}_d64.ptx
  $d/fac compile --cache-dir - --mask $m --const DTYPE=bf16 --const HEAD_DIM=64 $G3 --const num_stages=3 --arch sm_90a --emit ptx -o $d/ptx/g3s3_${m}_d64.ptx
  for h in 64 128; do
    $d/fac compile --cache-dir - --mask $m --const DTYPE=bf16 --const HEAD_DIM=$h $G2 --arch sm_90a --emit ptx -o $d/ptx/g2_${m}_d$h.ptx
  done
done
(cd $d && tar czf ptx.tgz ptx && rm -rf ptx && gzip -f *.bundle)
du -sh $d
