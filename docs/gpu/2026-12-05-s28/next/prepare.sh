#!/usr/bin/env bash
# Prepared in session 28 for the next session's first device call (call1.sh): issue 8's two
# misses on finer key blocks. A 128-row tile meets a 1024-key window in 9 blocks of 128 keys
# for 8 blocks' worth of pairs; over 64-key blocks it meets 17 for 16, so the triangles cost
# 1/17 of the tile instead of 1/9 — if the 64-key GEMMs and the doubled per-block overhead
# cost less (docs/decisions.md, sessions 27–28). Likewise D = 64 causal's 192-row groups on
# 64-key blocks waste half as much on the diagonal. Builds .gpu/s30: gpu-prepare for sm_90a,
# and bundles of the tuned sets with BLOCK_N = SPARSE_K = 64 (CPU-checked by fac run here).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
export CGO_ENABLED=0 FAC_LLC=$(scripts/ensure-llc)
d=${GPU_DIR:-.gpu/s30}
GPU_DIR=$d scripts/gpu-prepare --arch sm_90a
W=(--const BLOCK_M=128 --const BLOCK_N=64 --const num_warps=8 --const overlap=true --const lazy_rescale=true
   --const fold_scale=true --const warp_specialize=true --const heads_minor=true --const heads_group=16
   --const SPARSE_Q=128 --const SPARSE_K=64)
for s in 4 6; do
  $d/fac run --device cpu "${W[@]}" --const num_stages=$s --mask "sliding_window(100, 0)" --dtype bf16 --dim 128 \
    --batch 1 --heads 2 --seqlen-q 700 --seqlen-k 650 | tail -1
  $d/fac build --mask "sliding_window(1023, 0)" --mask document --mask "sliding_window(20, 3)" --dtype bf16 --dim 128 \
    --arch sm_90a --num-splits 1 --pack-gqa off "${W[@]}" --const num_stages=$s -o $d/n64s$s.bundle
done
G=(--const BLOCK_M=64 --const BLOCK_N=64 --const num_warps=4 --const consumer_groups=3 --const SPARSE_Q=192
   --const SPARSE_K=64 --const warp_specialize=true --const overlap=true --const tma_store=true
   --const lazy_rescale=true --const fold_scale=true)
for s in 4 8; do
  $d/fac run --device cpu "${G[@]}" --const num_stages=$s --mask causal --dtype bf16 --dim 64 \
    --batch 1 --heads 2 --seqlen-q 700 --seqlen-k 650 | tail -1
  $d/fac build --mask causal --mask none --dtype bf16 --dim 64 --arch sm_90a --num-splits 1 --pack-gqa off \
    "${G[@]}" --const num_stages=$s -o $d/g3n64s$s.bundle
done
gzip -f $d/n64s*.bundle $d/g3n64s*.bundle
du -sh $d
