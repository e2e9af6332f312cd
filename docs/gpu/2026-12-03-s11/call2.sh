#!/bin/bash
# Session 11, call 2: the warp-specialized forward loaded from PTX (setmaxnreg honoured), beside the default.
D=.gpu/s11a
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
for f in $D/ptx/ws*.ptx; do
  r=$($ptxas -arch=sm_90a -v "$f" -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning|rror" | tr '\n' ' ')
  echo "$(basename $f .ptx): $r" | sed -E 's/ptxas info *: //g'
done
for b in ws:"--const warp_specialize=true" wspp:"--const warp_specialize=true --const pingpong=true"; do
  name=${b%%:*}; c=${b#*:}
  for args in "--mask causal" "--mask document --random-aux --seqlen-q 3000 --seqlen-k 3000" "--mask sliding_window(1023,0) --seqlen-q 333 --seqlen-k 1000" \
              "--mask none --seqlen-q 1000 --seqlen-k 777"; do
    timeout 60 $D/fac run --device cuda --bundle $D/$name.bundle $c --dtype bf16 --dim 128 --batch 2 --heads 4 --kv-heads 2 \
      --seqlen-q 1000 --seqlen-k 1000 $args 2>&1 | tail -1
    [ "${PIPESTATUS[0]}" = 0 ] || echo "SMOKE FAILED: $name $args"
  done
done
for s in 8192 2048; do
  for b in base: ws:"--const warp_specialize=true" wspp:"--const warp_specialize=true --const pingpong=true"; do
    name=${b%%:*}; c=${b#*:}
    echo "== $name S=$s"
    timeout 120 $D/fac bench --bundle $D/$name.bundle $c --seqlen $s 2>&1 | grep -v "^device\|^no llc"
  done
done
for b in d64: d64ws:"--const warp_specialize=true"; do
  name=${b%%:*}; c=${b#*:}
  echo "== $name D=64 H=32 S=8192"
  timeout 120 $D/fac bench --bundle $D/$name.bundle $c --seqlen 8192 --dim 64 --heads 32 --mask none --mask causal 2>&1 | grep -v "^device\|^no llc"
done
