#!/usr/bin/env bash
# Session 26, device call 2 (carry .gpu/s26 and .gpu/s25f): issue 11's long context on the current
# defaults (B = 1, H = 16, D = 128: S = 8192, 32768, 131072 causal and sliding window 1024; fac
# run's sampled check at 131072), then session 25's callF.sh (heads_group at B = 16 and B = 2).
set -u
source scripts/gpu-call-env call2.txt .gpu/s26
for s in 8192 32768 131072; do
  echo "== long S=$s"; timeout 90 $f bench --bundle $D/bench.bundle --seqlen $s --tokens $s --mask causal --mask "sliding_window(1023, 0)" \
    --warmup 2 --reps 5 2>&1 | grep -E "$F|rror" | cut -c1-100
done
echo "== long S=8192 B=16 (S = 131072's tiles)"; timeout 60 $f bench --bundle $D/bench.bundle --seqlen 8192 --tokens 131072 \
  --mask "sliding_window(1023, 0)" --warmup 2 --reps 5 2>&1 | grep -E "$F|rror" | cut -c1-100
for s in 8192 131072; do
  echo "== long S=$s FAC_BENCH_SYNC=1"; FAC_BENCH_SYNC=1 timeout 90 $f bench --bundle $D/bench.bundle --seqlen $s --tokens $s --mask "sliding_window(1023, 0)" \
    --warmup 2 --reps 5 2>&1 | grep -E "$F|rror" | cut -c1-100
done
for m in causal "sliding_window(1023, 0)"; do
  timeout 60 $f run --device cuda --bundle $D/bench.bundle --mask "$m" --dtype bf16 --batch 1 --heads 16 \
    --seqlen-q 131072 --seqlen-k 131072 --dim 128 2>&1 | tail -2 | cut -c1-120; echo "run131072 rc=${PIPESTATUS[0]} $m"
done
OUT=$OUT bash docs/gpu/2026-12-05-s25/callF.sh > /dev/null
