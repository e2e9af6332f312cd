#!/usr/bin/env bash
# The next session's first device call (carry .gpu/s30, built by prepare.sh), any card:
# sliding window and document on 64-key blocks (n64s4, n64s6) and D = 64 causal on 64-key
# blocks (g3n64s4, g3n64s8) against the defaults, in turns, two rounds; GPU checks of each at
# odd lengths with GQA; flex_bench.py for the ratios. If a variant beats its default and passes,
# it is the candidate tuned set (sliding window asks ≥ 465 and 1.5× FlexAttention, D = 64
# causal ≥ 460).
set -u
exec > >(tee "$OUT/call1.txt") 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
D=$(pwd)/${GPU_DIR:-.gpu/s30}; f=$D/fac; F='^(none|causal|sliding|document)'
(cd $D && for x in *.bundle.gz; do gunzip -kf $x; done)
SW="sliding_window(1023, 0)"
W="--const BLOCK_M=128 --const BLOCK_N=64 --const num_warps=8 --const overlap=true --const lazy_rescale=true --const fold_scale=true --const warp_specialize=true --const heads_minor=true --const heads_group=16 --const SPARSE_Q=128 --const SPARSE_K=64"
G="--const BLOCK_M=64 --const BLOCK_N=64 --const num_warps=4 --const consumer_groups=3 --const SPARSE_Q=192 --const SPARSE_K=64 --const warp_specialize=true --const overlap=true --const tma_store=true --const lazy_rescale=true --const fold_scale=true"
for r in 1 2; do
  echo "== r$r default D=128"; timeout 60 $f bench --bundle $D/bench-sm_90a.bundle --mask "$SW" --mask document --seqlen 8192 2>&1 | grep -E "$F|rror"
  for s in 4 6; do
    echo "== r$r n64s$s"; timeout 60 $f bench --bundle $D/n64s$s.bundle $W --const num_stages=$s --mask "$SW" --mask document --seqlen 8192 2>&1 | grep -E "$F|rror"
  done
  echo "== r$r default D=64"; timeout 60 $f bench --bundle $D/bench-d64-sm_90a.bundle --dim 64 --heads 32 --seqlen 8192 --mask causal --mask none 2>&1 | grep -E "$F|rror"
  for s in 4 8; do
    echo "== r$r g3n64s$s"; timeout 60 $f bench --bundle $D/g3n64s$s.bundle $G --const num_stages=$s --dim 64 --heads 32 --seqlen 8192 --mask causal --mask none 2>&1 | grep -E "$F|rror"
  done
done
for s in 4 6; do for m in "sliding_window(20, 3)" "$SW" document; do
  timeout 60 $f run --device cuda --bundle $D/n64s$s.bundle $W --const num_stages=$s --mask "$m" --random-aux --doc-len 300 \
    --dtype bf16 --dim 128 --batch 3 --heads 12 --kv-heads 4 --seqlen-q 1537 --seqlen-k 1000 2>&1 | tail -1
done; done
for s in 4 8; do for m in causal none; do
  timeout 60 $f run --device cuda --bundle $D/g3n64s$s.bundle $G --const num_stages=$s --mask "$m" \
    --dtype bf16 --dim 64 --batch 3 --heads 12 --kv-heads 4 --seqlen-q 1537 --seqlen-k 1000 2>&1 | tail -1
done; done
PYTHONUNBUFFERED=1 timeout 120 python3 $D/flex_bench.py flex 2>&1 | grep "S=8192" | cut -c1-120
