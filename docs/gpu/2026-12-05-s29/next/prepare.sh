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
# session 23). And pingpong on the tuned sliding window and document (swpp).
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
gzip -f $d/g3hm*.bundle $d/hm?.bundle $d/swpp.bundle
du -sh $d
