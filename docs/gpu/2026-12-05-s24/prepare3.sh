#!/usr/bin/env bash
# Session 24 (for a later session): sliding-window experiments at D = 128 into DIR (default .gpu/s24x):
# p2tms (persistent tile loop, two K/V buffers, the TMA store: the producer loads the next tile's Q
# and K/V while the consumers write O, FlashAttention-3's arrangement, never timed for sliding window
# with heads_minor's order), p2tmshm (the same with heads_minor), g2 (two consumer groups of 64 rows),
# each for sliding window 1024, document and causal at D = 128, bf16, and fac.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s24x}
source scripts/gpu-env $d
m=(--mask "sliding_window(1023, 0)" --mask document --mask causal)
b() { $d/fac build "${m[@]}" "${@:2}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/$1.bundle; }
P2=(--const persistent=true --const num_stages=2 --const tma_store=true)
b p2tms "${P2[@]}"
b p2tmshm "${P2[@]}" --const heads_minor=true
b g2 --const BLOCK_M=64 --const BLOCK_N=128 --const num_warps=4 --const consumer_groups=2 --const num_stages=2 \
  --const warp_specialize=true --const overlap=true --const lazy_rescale=true --const fold_scale=true --const tma_store=true
gzip -f $d/*.bundle
du -sh $d
