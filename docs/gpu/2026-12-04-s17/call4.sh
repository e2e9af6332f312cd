#!/usr/bin/env bash
# Session 17, device call 4: a share of the softmax's exp2 on the FP32 pipe (a degree-3
# polynomial, FAC_EXP2_EMU=k of every 8 registers; e2 = 25%, e4 = 50%) against the mask-range
# build (B): ptxas -v, forward at D = 128 and D = 64 in turns, fac run checks.
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
B=.gpu/ab/cbdb2e0; E2=.gpu/ab/e2; E4=.gpu/ab/e4
for d in $B $E2 $E4; do for f in $d/*.bundle.gz; do gunzip -kf $f; done; done
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
for p in $E2/ptx/*.ptx $E4/ptx/*.ptx; do
  echo "$p: $($ptxas -arch=sm_90a -v $p -o /tmp/x.cubin 2>&1 | grep -E 'registers|spill|C75|rror' | tr '\n' ' ' | cut -c1-160)"
done
F='^(none|causal|sliding|document|prefix)'
Bn() { echo "== $1"; shift; "$@" 2>&1 | grep -E "$F|rror" | cut -c1-80; }
for r in 1 2; do for d in $B $E2 $E4; do
  Bn "r$r $(basename $d) D=128" $d/fac bench --seqlen 8192 --bundle $d/bench.bundle
  Bn "r$r $(basename $d) D=64" $d/fac bench --seqlen 8192 --dim 64 --heads 32 --batch 2 --mask none --mask causal --bundle $d/d64.bundle
done; done
chk() { timeout 90 "$@" 2>&1 | tail -1 | cut -c1-120; echo "  rc=${PIPESTATUS[0]}: ${*: -12}"; }
for d in $E2 $E4; do for s in "1000 1537" "4097 333"; do set -- $s
  chk $d/fac run --device cuda --bundle $d/bench.bundle --mask document --random-aux --doc-len 300 --batch 1 --heads 4 --seqlen-q $1 --seqlen-k $2 --dim 128 --dtype bf16
  chk $d/fac run --device cuda --bundle $d/bench.bundle --mask causal --batch 1 --heads 4 --seqlen-q $1 --seqlen-k $2 --dim 128 --dtype bf16
  chk $d/fac run --device cuda --bundle $d/d64.bundle --mask none --batch 1 --heads 4 --seqlen-q $1 --seqlen-k $2 --dim 64 --dtype bf16
done; done
