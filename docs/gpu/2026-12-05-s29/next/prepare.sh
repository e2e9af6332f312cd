#!/usr/bin/env bash
# Prepared in session 29 (no device lent) for the next session's device calls. Builds .gpu/s31:
# session 28's plan (its prepare.sh: gpu-prepare for sm_90a and the 64-key-block bundles, which
# call1.sh times) on this build, plus the heads-minor launch order for causal-shaped masks
# (call2.sh): on D = 64's three consumer groups, which take heads_minor since session 29, and on
# D = 128's 128×128 set, in groups of 4, 8 (and 16 at D = 64) heads. A list-scheduling model
# (sched.py beside this script) puts the heads-major tail at 1.044 (D = 64 causal) and 1.053
# (D = 128 causal) of the mean program's work, and heads-minor groups of 4–16 heads at
# 1.003–1.011; small groups keep the heads running at once on a few heads' K and V (2 MB a head
# at D = 64, 4 MB at D = 128), which all-heads heads_minor lost at D = 128 (causal 3–10%,
# session 23). And pingpong on the tuned sliding window and document (swpp), and sliding window on
# two CTAs a multiprocessor (c2o, c2n; FAC_CTAS_PER_SM, session 29).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
export CGO_ENABLED=0 FAC_LLC=$(scripts/ensure-llc)
d=.gpu/s31
GPU_DIR=$d bash docs/gpu/2026-12-05-s28/next/prepare.sh
G=(--const BLOCK_M=64 --const BLOCK_N=128 --const num_warps=4 --const consumer_groups=3 --const SPARSE_Q=192
   --const SPARSE_K=128 --const num_stages=4 --const warp_specialize=true --const overlap=true --const tma_store=true
   --const lazy_rescale=true --const fold_scale=true --const heads_minor=true)
for g in 4 8 16; do
  $d/fac run --device cpu "${G[@]}" --const heads_group=$g --mask causal --dtype bf16 --dim 64 \
    --batch 2 --heads 6 --kv-heads 3 --seqlen-q 700 --seqlen-k 650 | tail -1
  $d/fac build --mask causal --mask none --dtype bf16 --dim 64 --arch sm_90a --num-splits 1 --pack-gqa off \
    "${G[@]}" --const heads_group=$g -o $d/g3hm$g.bundle
done
for g in 4 8; do
  $d/fac run --device cpu --const heads_minor=true --const heads_group=$g --mask "prefix_lm(100)" --dtype bf16 --dim 128 \
    --batch 2 --heads 6 --kv-heads 3 --seqlen-q 700 --seqlen-k 650 | tail -1
  $d/fac build --mask causal --mask "prefix_lm(1024)" --dtype bf16 --dim 128 --arch sm_90a --num-splits 1 --pack-gqa off \
    --const heads_minor=true --const heads_group=$g -o $d/hm$g.bundle
done
# Pingpong on the tuned sliding window and document (heads_minor, three buffers): last timed in
# session 18, before the softmax arguments, three buffers and heads_minor (sliding window 424.9 /
# 430.3 against 426.6 / 426.9 then).
$d/fac run --device cpu --const pingpong=true --mask "sliding_window(100, 0)" --dtype bf16 --dim 128 \
  --batch 2 --heads 6 --kv-heads 3 --seqlen-q 700 --seqlen-k 650 | tail -1
$d/fac build --mask "sliding_window(1023, 0)" --mask document --mask "sliding_window(20, 3)" --dtype bf16 --dim 128 \
  --arch sm_90a --num-splits 1 --pack-gqa off --const pingpong=true -o $d/swpp.bundle
# Two CTAs a multiprocessor (FAC_CTAS_PER_SM=2) for sliding window and document: 128-row tiles on
# 64-key blocks, no producer, two buffers (98,432 bytes of shared memory, so two fit), with and
# without overlap (c2o, c2n); c1o is c2o at one CTA (the control). ptxas must fit 128 registers.
C=(--const BLOCK_M=128 --const BLOCK_N=64 --const num_warps=8 --const warp_specialize=false --const num_stages=2
   --const lazy_rescale=true --const fold_scale=true --const heads_minor=true --const heads_group=16
   --const SPARSE_Q=128 --const SPARSE_K=64)
mkdir -p $d/ptx2
for v in c2o c2n c1o; do
  o=true; [ $v = c2n ] && o=false
  n=2; [ $v = c1o ] && n=
  FAC_CTAS_PER_SM=$n $d/fac run --device cpu "${C[@]}" --const overlap=$o --mask "sliding_window(100, 0)" --dtype bf16 \
    --dim 128 --batch 2 --heads 6 --kv-heads 3 --seqlen-q 700 --seqlen-k 650 | tail -1
  FAC_CTAS_PER_SM=$n $d/fac build --mask "sliding_window(1023, 0)" --mask document --mask "sliding_window(20, 3)" \
    --dtype bf16 --dim 128 --arch sm_90a --num-splits 1 --pack-gqa off "${C[@]}" --const overlap=$o -o $d/$v.bundle
  FAC_CTAS_PER_SM=$n $d/fac compile --arch sm_90a --mask "sliding_window(1023, 0)" --const HEAD_DIM=128 --const DTYPE=bf16 \
    "${C[@]}" --const overlap=$o -o $d/ptx2/$v.ptx
done
gzip -f $d/g3hm*.bundle $d/hm?.bundle $d/swpp.bundle $d/c2?.bundle $d/c1o.bundle
du -sh $d
