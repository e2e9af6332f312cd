#!/usr/bin/env bash
# The next session's second device call (carry .gpu/s31, built by prepare.sh; call1 is
# `GPU_DIR=.gpu/s31 bash docs/gpu/2026-12-05-s28/next/call1.sh`), any card: causal-shaped masks
# launched heads-minor in groups of heads against the defaults (heads-major), in turns, two
# rounds: D = 64 causal (issue 8 asks 460) and none on the three consumer groups, D = 128 causal
# and prefix-LM on 128×128; pingpong on the tuned sliding window and document (swpp); then GPU
# checks of each variant at odd lengths with GQA. First a ptxas probe (guarded.py) for the half
# blocks session 29 sketched in docs/decisions.md. Then sliding window and document on two CTAs a
# multiprocessor (FAC_CTAS_PER_SM=2: c2o with overlap, c2n without; c1o one CTA): ptxas -v first,
# since two CTAs need 128 registers or fewer.
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
# Two CTAs a multiprocessor (c2o, c2n; c1o the one-CTA control): 128 registers at most, no spills?
for v in c2o c2n c1o; do
  echo "== ptxas $v"; $ptxas -arch=sm_90a -c -v $D/ptx2/$v.ptx -o /tmp/probe.cubin 2>&1 | grep -E "registers|spill|C75|arning|rror" | head -8
done
C="--const BLOCK_M=128 --const BLOCK_N=64 --const num_warps=8 --const warp_specialize=false --const num_stages=2 --const lazy_rescale=true --const fold_scale=true --const heads_minor=true --const heads_group=16 --const SPARSE_Q=128 --const SPARSE_K=64"
G="--const BLOCK_M=64 --const BLOCK_N=128 --const num_warps=4 --const consumer_groups=3 --const SPARSE_Q=192 --const SPARSE_K=128 --const num_stages=4 --const warp_specialize=true --const overlap=true --const tma_store=true --const lazy_rescale=true --const fold_scale=true --const heads_minor=true"
D64="--dim 64 --heads 32 --seqlen 8192 --mask causal --mask none"
D128=(--seqlen 8192 --mask causal --mask "prefix_lm(1024)")
SWD=(--seqlen 8192 --mask "sliding_window(1023, 0)" --mask document)
round() {
  local r=$1
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
  for v in c2o c2n c1o; do
    o=true; [ $v = c2n ] && o=false
    n=2; [ $v = c1o ] && n=
    echo "== r$r $v"; FAC_CTAS_PER_SM=$n timeout 60 $f bench --bundle $D/$v.bundle $C --const overlap=$o "${SWD[@]}" 2>&1 | grep -E "$F|rror"
  done
}
checks() {
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
for v in c2o c2n; do
  o=true; [ $v = c2n ] && o=false
  for m in "sliding_window(20, 3)" document; do
    FAC_CTAS_PER_SM=2 timeout 60 $f run --device cuda --bundle $D/$v.bundle $C --const overlap=$o --mask "$m" --random-aux --doc-len 300 \
      --dtype bf16 --dim 128 --batch 3 --heads 12 --kv-heads 4 --seqlen-q 1537 --seqlen-k 1000 2>&1 | tail -1
  done
done
}
# Round 1, the checks, round 2: a call cut short by its limit keeps the checks.
round 1
checks
round 2
