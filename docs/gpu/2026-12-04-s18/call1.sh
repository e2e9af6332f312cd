#!/usr/bin/env bash
# Session 18, device call 1: where HEAD (3d0e17e) stands at issue 11's long-context shape
# (B = 1, H = 16, S = 32768) beside FlexAttention there, and schedule variants of the tuned
# forward at S = 8192 (scripts/gpu-sweep prepare with GPU_DIR=.gpu/s18: base, pingpong,
# persistent at two stages, both).
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
D=$(pwd)/.gpu/s18/sweep
for f in $D/*.gz; do gunzip -kf $f; done
F='^(none|causal|sliding|document|prefix)'
echo "== long context, base"
$D/fac bench --bundle $D/base-d128.bundle --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 \
  --mask causal --mask "sliding_window(1023, 0)" 2>&1 | grep -E "$F|rror" | cut -c1-100
echo "== flex long"
timeout 240 python3 docs/gpu/2026-12-04-s18/flex_long.py 32768 2>&1 | grep -E '^\{|rror' | tail -4
for r in 1 2; do
  for v in base pp pers perspp; do
    c=""; case $v in pp) c="--const pingpong=true";; pers) c="--const persistent=true --const num_stages=2";;
      perspp) c="--const persistent=true --const num_stages=2 --const pingpong=true";; esac
    echo "== r$r $v"
    $D/fac bench --bundle $D/$v-d128.bundle $c --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-80
  done
done
echo "== long context, base (after)"
$D/fac bench --bundle $D/base-d128.bundle --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 \
  --mask causal --mask "sliding_window(1023, 0)" 2>&1 | grep -E "$F|rror" | cut -c1-100
