#!/usr/bin/env bash
# The next session's second device call (carry .gpu/s31, built by prepare.sh; call1 is
# `GPU_DIR=.gpu/s31 bash docs/gpu/2026-12-05-s28/next/call1.sh`), any card: causal-shaped masks
# launched heads-minor in groups of heads against the defaults (heads-major), in turns, two
# rounds: D = 64 causal (issue 8 asks 460) and none on the three consumer groups, D = 128 causal
# and prefix-LM on 128×128; pingpong on the tuned sliding window and document (swpp); then GPU
# checks of each variant at odd lengths with GQA. First a ptxas probe (guarded.py) for the half
# blocks session 29 sketched in docs/decisions.md.
set -u
exec > >(tee "$OUT/call2.txt") 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
D=$(pwd)/${GPU_DIR:-.gpu/s31}; f=$D/fac; F='^(none|causal|prefix|sliding|document)'
(cd $D && for x in *.bundle.gz; do gunzip -kf $x; done)
# The ptxas probe for half blocks (guarded.py): does a guard on wgmma serialize the pipeline?
sw=$D/ptx/flash_fwd_d128_sliding_window_identity.ptx; gunzip -kf $sw.gz
python3 docs/gpu/2026-12-05-s29/next/guarded.py $sw /tmp/sw
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
for v in $sw /tmp/sw-pv.ptx /tmp/sw-qk.ptx; do
  # Whole-program (no -c): the kernel has setmaxnreg (decisions, session 9).
  echo "== ptxas $(basename $v)"; $ptxas -arch=sm_90a -v $v -o /tmp/probe.cubin 2>&1 | grep -E "registers|spill|C75|arning|rror" | head -8
done
G="--const BLOCK_M=64 --const BLOCK_N=128 --const num_warps=4 --const consumer_groups=3 --const SPARSE_Q=192 --const SPARSE_K=128 --const num_stages=4 --const warp_specialize=true --const overlap=true --const tma_store=true --const lazy_rescale=true --const fold_scale=true --const heads_minor=true"
D64="--dim 64 --heads 32 --seqlen 8192 --mask causal --mask none"
D128=(--seqlen 8192 --mask causal --mask "prefix_lm(1024)")
SWD=(--seqlen 8192 --mask "sliding_window(1023, 0)" --mask document)
for r in 1 2; do
  echo "== r$r default D=64"; timeout 60 $f bench --bundle $D/bench-d64-sm_90a.bundle $D64 2>&1 | grep -E "$F|rror"
  for g in 4 8 16; do
    echo "== r$r g3hm$g"; timeout 60 $f bench --bundle $D/g3hm$g.bundle $G --const heads_group=$g $D64 2>&1 | grep -E "$F|rror"
  done
  echo "== r$r default D=128"; timeout 60 $f bench --bundle $D/bench-sm_90a.bundle "${D128[@]}" 2>&1 | grep -E "$F|rror"
  for g in 4 8; do
    echo "== r$r hm$g"; timeout 60 $f bench --bundle $D/hm$g.bundle --const heads_minor=true --const heads_group=$g "${D128[@]}" 2>&1 | grep -E "$F|rror"
  done
  echo "== r$r default sliding window"; timeout 60 $f bench --bundle $D/bench-sm_90a.bundle "${SWD[@]}" 2>&1 | grep -E "$F|rror"
  echo "== r$r swpp"; timeout 60 $f bench --bundle $D/swpp.bundle --const pingpong=true "${SWD[@]}" 2>&1 | grep -E "$F|rror"
done
for g in 4 16; do for m in causal none; do
  timeout 60 $f run --device cuda --bundle $D/g3hm$g.bundle $G --const heads_group=$g --mask "$m" \
    --dtype bf16 --dim 64 --batch 3 --heads 12 --kv-heads 4 --seqlen-q 1537 --seqlen-k 1000 2>&1 | tail -1
done; done
for g in 4 8; do for m in causal "prefix_lm(1024)"; do
  timeout 60 $f run --device cuda --bundle $D/hm$g.bundle --const heads_minor=true --const heads_group=$g --mask "$m" \
    --dtype bf16 --dim 128 --batch 3 --heads 12 --kv-heads 4 --seqlen-q 1537 --seqlen-k 1000 2>&1 | tail -1
done; done
for m in "sliding_window(20, 3)" document; do
  timeout 60 $f run --device cuda --bundle $D/swpp.bundle --const pingpong=true --mask "$m" --random-aux --doc-len 300 \
    --dtype bf16 --dim 128 --batch 3 --heads 12 --kv-heads 4 --seqlen-q 1537 --seqlen-k 1000 2>&1 | tail -1
done
