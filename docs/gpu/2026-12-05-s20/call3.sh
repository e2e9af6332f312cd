#!/usr/bin/env bash
# Session 20, device call 3 (carry .gpu/s20): D = 64 (H = 32, S = 8192: issue 8 wants none 500,
# causal 460) on the tuned tiles and on 256-row tiles, each with and without lf; S = 2048; issue
# 11's S = 32768 (B = 1, H = 16) beside FlexAttention there. V names the D = 128 schedule to time
# at S = 2048 and 32768 besides base (default plf3; pass the winner of calls 1–2).
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
D=$(pwd)/.gpu/s20; V=${V:-plf3}
(cd $D && for f in *.bundle.gz; do gunzip -kf $f; done); for f in $D/sweep/*.gz; do gunzip -kf $f; done
LF="--const lazy_rescale=true --const fold_scale=true"
consts() { case $1 in lf) echo "$LF";; pers3) echo "--const persistent=true";; plf3) echo "$LF --const persistent=true";;
  lazy) echo "--const lazy_rescale=true";; fold) echo "--const fold_scale=true";; esac; }
F='^(none|causal|sliding|document|prefix)'
W16="--const BLOCK_M=256 --const BLOCK_N=64 --const num_warps=16 --const overlap=true --const warp_specialize=true"
for m in causal none; do
  timeout 120 $D/sweep/fac run --device cuda --bundle $D/d64w16lf.bundle $W16 $LF --block 256 --mask $m --seqlen-q 1537 --seqlen-k 1000 \
    --dim 64 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-100; echo "rc=${PIPESTATUS[0]} w16lf $m"
done
for r in 1 2; do
  for v in base lf; do
    echo "== r$r $v d64"; $D/sweep/fac bench --bundle $D/sweep/$v-d64.bundle $(consts $v) --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
  done
  echo "== r$r w16 d64"; timeout 120 $D/sweep/fac bench --bundle $D/d64w16.bundle $W16 --block 256 --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
  echo "== r$r w16lf d64"; timeout 120 $D/sweep/fac bench --bundle $D/d64w16lf.bundle $W16 $LF --block 256 --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
done
for v in base $V; do
  echo "== $v S=2048"; $D/sweep/fac bench --bundle $D/sweep/$v-d128.bundle $(consts $v) --seqlen 2048 2>&1 | grep -E "$F|rror" | cut -c1-80
  echo "== $v S=32768 B=1"; $D/sweep/fac bench --bundle $D/sweep/$v-d128.bundle $(consts $v) --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 \
    --mask causal --mask "sliding_window(1023, 0)" 2>&1 | grep -E "$F|rror" | cut -c1-100
done
echo "== flex long (S = 32768, B = 1, H = 16)"
timeout 200 python3 docs/gpu/2026-12-04-s18/flex_long.py 32768 2>&1 | grep -E '^\{|rror' | tail -4
