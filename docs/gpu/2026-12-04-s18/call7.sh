#!/usr/bin/env bash
# Session 18, device call 7: issue 11's long-context shape again (call 1 gave causal 619.5 /
# 614.0, call 6 675.7): the final build's none, causal and sliding window at S = 32768 (B = 1,
# H = 16), FlexAttention's causal and sliding window, then fac again.
set -u
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
N=$(pwd)/.gpu/s18/lc # the final build's fac and bench bundle (from .gpu/s18/f)
(cd $N && gunzip -kf bench.bundle.gz)
L() { $N/fac bench --bundle $N/bench.bundle --seqlen 32768 --batch 1 --heads 16 --warmup 5 --reps 10 \
  --mask causal --mask "sliding_window(1023, 0)" --mask none 2>&1 | grep -E "^(none|causal|sliding)|rror" | cut -c1-100; }
echo "== fac"; L
echo "== flex"; timeout 150 python3 docs/gpu/2026-12-04-s18/flex_long.py 32768 2>&1 | grep -E '^\{|rror' | tail -4
echo "== fac again"; L
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
