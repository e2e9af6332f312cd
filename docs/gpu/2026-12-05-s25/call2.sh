#!/usr/bin/env bash
# Session 25, device call 2 (carry .gpu/s25, built by prepare.sh): exp2_poly. ptxas -v of the
# causal D = 64 and sliding-window D = 128 kernels at each setting; D = 64 (H = 32, S = 8192)
# none, causal, prefix-LM on the consumer groups with exp2_poly 0..4, two rounds in turns; D = 128
# (S = 8192) none, causal, sliding window, document with exp2_poly 0 and 2, two rounds; then
# decode_bench.py (FlexAttention and SDPA at D = 64) in the same call.
set -u
exec > >(tee $OUT/call2.txt) 2>&1
D=$(pwd)/.gpu/s25; f=$D/fac
(cd $D && for x in *.gz; do gunzip -kf $x; done)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
for p in $D/ptx/*.ptx; do
  echo "$(basename $p .ptx): $($ptxas -arch=sm_90a -v $p -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning|rror" | sed -E 's/ptxas (info|warning) *: //' | tr '\n' ' ' | cut -c1-160)" &
done > $OUT/ptxas-exp2.txt; wait; sort $OUT/ptxas-exp2.txt
F='^(none|causal|sliding|document|prefix)'
for r in 1 2; do for n in 0 1 2 3 4; do
  echo "== r$r D=64 exp2_poly=$n"; timeout 60 $f bench --bundle $D/e$n.bundle --const exp2_poly=$n --dim 64 --heads 32 --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
done; done
for r in 1 2; do for n in 0 2; do
  echo "== r$r D=128 exp2_poly=$n"; timeout 60 $f bench --bundle $D/h$n.bundle --const exp2_poly=$n --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
done; done
for n in 2 4; do for m in causal "prefix_lm(1024)"; do
  timeout 60 $f run --device cuda --bundle $D/e$n.bundle --const exp2_poly=$n --mask "$m" --seqlen-q 1537 --seqlen-k 1000 --dim 64 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-90
  echo "rc=${PIPESTATUS[0]} e$n $m"
done; done
(timeout 150 python3 $D/decode_bench.py > $OUT/decode.txt 2>&1; echo "decode rc=$?")
grep -E 'd64' $OUT/decode.txt | cut -c1-160
