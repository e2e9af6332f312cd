#!/usr/bin/env bash
# Session 19, device call 1 (carry .gpu/s19): the persistent forward with the next tile's block
# counts read ahead (persistent-prefetch) at three K/V buffers (O stored from registers) and at
# two, against the default schedule; ptxas -v of the persistent kernels; correctness of the
# persistent kernels at odd shapes; FlexAttention in the same call.
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
D=$(pwd)/.gpu/s19
(cd $D && tar xzf ptx.tgz && gunzip -kf pers-check.bundle.gz d64w16.bundle.gz d64b256.bundle.gz); for f in $D/sweep/*.gz; do gunzip -kf $f; done
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
echo "== ptxas -v (persistent)"
for p in $D/ptx/*.ptx; do
  echo "$(basename $p .ptx): $($ptxas -arch=sm_90a -v $p -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning" | sed -E 's/ptxas (info|warning) *: //' | tr '\n' ' ' | cut -c1-200)"
done | tee $OUT/ptxas.txt | grep -E "spill stores|C75" | grep -v " 0 bytes spill stores, 0 bytes spill loads" | head -20
echo "== checks (persistent, odd shapes)"
for m in causal "sliding_window(20, 3)" document none; do for h in 64 128; do
  $D/sweep/fac run --device cuda --bundle $D/pers-check.bundle --const persistent=true --mask "$m" --random-aux --doc-len 300 \
    --seqlen-q 1537 --seqlen-k 1000 --dim $h --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-120
  echo "rc=${PIPESTATUS[0]} $m D=$h"
done; done
F='^(none|causal|sliding|document|prefix)'
for r in 1 2; do for v in base pers3 pers2; do
  c=""; case $v in pers3) c="--const persistent=true";; pers2) c="--const persistent=true --const num_stages=2";; esac
  echo "== r$r $v S=8192"; $D/sweep/fac bench --bundle $D/sweep/$v-d128.bundle $c --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-80
done; done
echo "== flex"
timeout 200 python3 $D/sweep/flex_bench.py flex 2>&1 | grep -E '^\{|rror' | tail -12
