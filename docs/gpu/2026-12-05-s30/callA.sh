#!/usr/bin/env bash
# Session 30's sweep (carry .gpu/s31), one call: session 29's call 1 and call 2 merged so they fit
# one device call. Against the defaults, in turns, two rounds (round 1, GPU checks, round 2):
#   sliding window 1024 + document at D = 128: n64s4, n64s6 (64-key blocks), swpp (pingpong),
#     c2o, c2n, c1o (FAC_CTAS_PER_SM=2, no producer, 2 buffers; c1o the one-CTA control);
#   D = 64 causal + none: g3n64s4, g3n64s8 (64-key blocks), g3hm4/8/16 (heads-minor groups).
# The ptxas probes (guarded.py, c2* registers) run first. flex_bench.py is left for the call that
# times the final defaults (issue 8's table).
set -u
exec > >(tee "$OUT/callA.txt") 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
D=$(pwd)/.gpu/s31; f=$D/fac; F='^(none|causal|prefix|sliding|document)'
(cd $D && for x in *.bundle.gz; do gunzip -kf $x; done)
sw=$D/ptx/flash_fwd_d128_sliding_window_identity.ptx; gunzip -kf $sw.gz
python3 docs/gpu/2026-12-05-s29/next/guarded.py $sw /tmp/sw
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
for v in $sw /tmp/sw-pv.ptx /tmp/sw-qk.ptx; do
  echo "== ptxas $(basename $v)"; $ptxas -arch=sm_90a -v $v -o /tmp/probe.cubin 2>&1 | grep -E "registers|spill|C75|arning|rror" | head -8
done
for v in c2o c2n c1o; do
  echo "== ptxas $v"; $ptxas -arch=sm_90a -c -v $D/ptx2/$v.ptx -o /tmp/probe.cubin 2>&1 | grep -E "registers|spill|C75|arning|rror" | head -8
done
SW="sliding_window(1023, 0)"
SWD=(--seqlen 8192 --mask "$SW" --mask document)
D64="--dim 64 --heads 32 --seqlen 8192 --mask causal --mask none"
W="--const BLOCK_M=128 --const BLOCK_N=64 --const num_warps=8 --const overlap=true --const lazy_rescale=true --const fold_scale=true --const warp_specialize=true --const heads_minor=true --const heads_group=16 --const SPARSE_Q=128 --const SPARSE_K=64"
G64="--const BLOCK_M=64 --const BLOCK_N=64 --const num_warps=4 --const consumer_groups=3 --const SPARSE_Q=192 --const SPARSE_K=64 --const warp_specialize=true --const overlap=true --const tma_store=true --const lazy_rescale=true --const fold_scale=true"
GHM="--const BLOCK_M=64 --const BLOCK_N=128 --const num_warps=4 --const consumer_groups=3 --const SPARSE_Q=192 --const SPARSE_K=128 --const num_stages=4 --const warp_specialize=true --const overlap=true --const tma_store=true --const lazy_rescale=true --const fold_scale=true --const heads_minor=true"
C="--const BLOCK_M=128 --const BLOCK_N=64 --const num_warps=8 --const warp_specialize=false --const num_stages=2 --const lazy_rescale=true --const fold_scale=true --const heads_minor=true --const heads_group=16 --const SPARSE_Q=128 --const SPARSE_K=64"
b() { local name=$1; shift; echo "== $name"; timeout 60 "$@" 2>&1 | grep -E "$F|rror"; }
round() {
  local r=$1
  b "r$r default D=64" $f bench --bundle $D/bench-d64-sm_90a.bundle $D64
  for g in 4 8 16; do b "r$r g3hm$g" $f bench --bundle $D/g3hm$g.bundle $GHM --const heads_group=$g $D64; done
  for s in 4 8; do b "r$r g3n64s$s" $f bench --bundle $D/g3n64s$s.bundle $G64 --const num_stages=$s $D64; done
  b "r$r default D=128" $f bench --bundle $D/bench-sm_90a.bundle "${SWD[@]}"
  for s in 4 6; do b "r$r n64s$s" $f bench --bundle $D/n64s$s.bundle $W --const num_stages=$s "${SWD[@]}"; done
  b "r$r swpp" $f bench --bundle $D/swpp.bundle --const pingpong=true "${SWD[@]}"
  for v in c2o c2n c1o; do
    o=true; [ $v = c2n ] && o=false; n=2; [ $v = c1o ] && n=
    echo "== r$r $v"; FAC_CTAS_PER_SM=$n timeout 60 $f bench --bundle $D/$v.bundle $C --const overlap=$o "${SWD[@]}" 2>&1 | grep -E "$F|rror"
  done
}
ck() { echo "-- $*" | cut -c1-160; timeout 60 "$@" 2>&1 | tail -1; }
X128=(--dtype bf16 --dim 128 --batch 3 --heads 12 --kv-heads 4 --seqlen-q 1537 --seqlen-k 1000 --random-aux --doc-len 300)
X64=(--dtype bf16 --dim 64 --batch 3 --heads 12 --kv-heads 4 --seqlen-q 1537 --seqlen-k 1000)
checks() {
  for g in 4 8 16; do for m in causal none; do ck $f run --device cuda --bundle $D/g3hm$g.bundle $GHM --const heads_group=$g --mask $m "${X64[@]}"; done; done
  for s in 4 8; do for m in causal none; do ck $f run --device cuda --bundle $D/g3n64s$s.bundle $G64 --const num_stages=$s --mask $m "${X64[@]}"; done; done
  for m in "sliding_window(20, 3)" "$SW" document; do
    for s in 4 6; do ck $f run --device cuda --bundle $D/n64s$s.bundle $W --const num_stages=$s --mask "$m" "${X128[@]}"; done
    ck $f run --device cuda --bundle $D/swpp.bundle --const pingpong=true --mask "$m" "${X128[@]}"
  done
  for v in c2o c2n; do o=true; [ $v = c2n ] && o=false
    for m in "sliding_window(20, 3)" document; do FAC_CTAS_PER_SM=2 ck $f run --device cuda --bundle $D/$v.bundle $C --const overlap=$o --mask "$m" "${X128[@]}"; done
  done
}
SECONDS=0
round 1; echo "## t=$SECONDS"
checks; echo "## t=$SECONDS"
round 2; echo "## t=$SECONDS"
