#!/usr/bin/env bash
# Session 19, device call 2 (carry .gpu/s19): S = 2048 and issue 11's long context (S = 32768,
# B = 1, H = 16, beside FlexAttention there) on the default and the persistent schedule; D = 64 on
# 256-row tiles with four consumer warpgroups (checks, then timed beside the tuned tiles).
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
D=$(pwd)/.gpu/s19
(cd $D && tar xzf ptx.tgz && gunzip -kf pers-check.bundle.gz d64w16.bundle.gz d64b256.bundle.gz); for f in $D/sweep/*.gz; do gunzip -kf $f; done
F='^(none|causal|sliding|document|prefix)'
for v in base pers3; do c=""; [ $v = pers3 ] && c="--const persistent=true"
  echo "== $v S=2048"; $D/sweep/fac bench --bundle $D/sweep/$v-d128.bundle $c --seqlen 2048 --mask none --mask "sliding_window(1023, 0)" 2>&1 | grep -E "$F|rror" | cut -c1-80
  echo "== $v S=32768 B=1"; $D/sweep/fac bench --bundle $D/sweep/$v-d128.bundle $c --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 \
    --mask causal --mask "sliding_window(1023, 0)" 2>&1 | grep -E "$F|rror" | cut -c1-100
done
echo "== D = 64, H = 32, S = 8192: 256-row tiles on four consumer warpgroups (w16) against the tuned tiles"
W16="--const BLOCK_M=256 --const BLOCK_N=64 --const num_warps=16 --const overlap=true --const warp_specialize=true"
for m in causal none; do
  timeout 120 $D/sweep/fac run --device cuda --bundle $D/d64w16.bundle $W16 --block 256 --mask $m --seqlen-q 1537 --seqlen-k 1000 \
    --dim 64 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-120; echo "rc=${PIPESTATUS[0]} w16 $m"
done
for r in 1 2; do
  echo "== r$r base d64 (block 128)"; $D/sweep/fac bench --bundle $D/sweep/base-d64.bundle --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
  echo "== r$r base d64 (block 256)"; $D/sweep/fac bench --bundle $D/d64b256.bundle --block 256 --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
  echo "== r$r w16 d64 (block 256)"; timeout 120 $D/sweep/fac bench --bundle $D/d64w16.bundle $W16 --block 256 --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
done
echo "== flex long (S = 32768, B = 1, H = 16)"
timeout 240 python3 docs/gpu/2026-12-04-s18/flex_long.py 32768 2>&1 | grep -E '^\{|rror' | tail -4
