#!/bin/bash
# Session 11, call 1: ptxas of the warp-specialized forward, smoke checks, bench beside the default and FlexAttention.
D=.gpu/s11a
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
for f in $D/ptx/*.ptx; do
  r=$($ptxas -arch=sm_90a -c -v "$f" -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning|rror" | tr '\n' ' ')
  echo "$(basename $f .ptx): $r" | sed -E 's/ptxas info *: //g'
done
$ptxas -arch=sm_90a $D/ptx/ws_d128_causal_identity.ptx -o /tmp/ws.cubin && cuobjdump --dump-sass /tmp/ws.cubin > /tmp/ws.sass && \
  echo "ws sass: HGMMA $(grep -c HGMMA /tmp/ws.sass) UTMALDG $(grep -c UTMALDG /tmp/ws.sass) USETMAXREG $(grep -c USETMAXREG /tmp/ws.sass) STL $(grep -c STL /tmp/ws.sass)"
gzip -c /tmp/ws.sass > $OUT/ws_causal.sass.gz
for b in ws:"--const warp_specialize=true" wspp:"--const warp_specialize=true --const pingpong=true" ws3:"--const warp_specialize=true --const num_stages=3"; do
  name=${b%%:*}; c=${b#*:}
  for args in "--mask causal" "--mask document --random-aux --seqlen-q 3000 --seqlen-k 3000" "--mask sliding_window(1023,0) --seqlen-q 333 --seqlen-k 1000" \
              "--mask causal --seqlen-q 130 --seqlen-k 130" "--mask none --seqlen-q 1000 --seqlen-k 777" "--mask prefix_lm(1024) --seqlen-q 2000 --seqlen-k 2500"; do
    timeout 60 $D/fac run --device cuda --bundle $D/$name.bundle $c --dtype bf16 --dim 128 --batch 2 --heads 4 --kv-heads 2 \
      --seqlen-q 1000 --seqlen-k 1000 $args 2>&1 | tail -1
    [ "${PIPESTATUS[0]}" = 0 ] || echo "SMOKE FAILED: $name $args"
  done
done
for s in 8192 2048; do
  for b in base: ws:"--const warp_specialize=true" wspp:"--const warp_specialize=true --const pingpong=true" ws3:"--const warp_specialize=true --const num_stages=3"; do
    name=${b%%:*}; c=${b#*:}
    echo "== $name S=$s"
    timeout 120 $D/fac bench --bundle $D/$name.bundle $c --seqlen $s 2>&1 | grep -v "^device\|^no llc"
  done
done
PYTHONUNBUFFERED=1 timeout 200 python3 $D/flex_bench.py flex 2>&1 | tail -14
echo "== base S=8192 again"
timeout 120 $D/fac bench --bundle $D/base.bundle --seqlen 8192 2>&1 | grep -v "^device\|^no llc"
echo "== ws S=8192 again"
timeout 120 $D/fac bench --bundle $D/ws.bundle --const warp_specialize=true --seqlen 8192 2>&1 | grep -v "^device\|^no llc"
for b in d64: d64ws:"--const warp_specialize=true"; do
  name=${b%%:*}; c=${b#*:}
  echo "== $name D=64 H=32 S=8192"
  timeout 120 $D/fac bench --bundle $D/$name.bundle $c --seqlen 8192 --dim 64 --heads 32 --mask none --mask causal 2>&1 | grep -v "^device\|^no llc"
done
