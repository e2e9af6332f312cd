#!/usr/bin/env bash
# Prepared in session 27 for the next session's first device call (call1.sh): the sm_90a suite
# and benchmark bundles (scripts/gpu-prepare), and sliding window / document on 64×64 tiles of one
# warpgroup (no producer), small enough for two CTAs a multiprocessor (82 KB of shared memory at
# two K/V buffers, 115 KB at three; at most 128 threads × 255 registers), over 64-wide mask
# blocks, with the tuned set's softmax arguments and head order (docs/decisions.md, session 27).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
export CGO_ENABLED=0 FAC_LLC=$(scripts/ensure-llc)
d=.gpu/s28
GPU_DIR=$d scripts/gpu-prepare --arch sm_90a
C=(--const BLOCK_M=64 --const BLOCK_N=64 --const num_warps=4 --const overlap=true --const lazy_rescale=true
   --const fold_scale=true --const heads_minor=true --const heads_group=16)
for s in 2 3; do
  $d/fac build --mask "sliding_window(1023, 0)" --mask document --mask "sliding_window(20, 3)" --dtype bf16 --dim 128 \
    --arch sm_90a --block 64 --num-splits 1 --pack-gqa off "${C[@]}" --const num_stages=$s -o $d/m64s$s.bundle
done
gzip -f $d/m64s*.bundle
du -sh $d
