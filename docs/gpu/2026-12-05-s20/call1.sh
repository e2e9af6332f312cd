#!/usr/bin/env bash
# Session 20, device call 1 (carry .gpu/s20): ptxas -v of the new schedules (lazy rescale and the
# folded scale: no spills, no C75xx, which would say the rescale's branch broke the wgmma
# pipeline); their correctness on the GPU at odd shapes; round 1 of S = 8192, D = 128.
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
D=$(pwd)/.gpu/s20
(cd $D && tar xzf ptx.tgz && for f in *.bundle.gz; do gunzip -kf $f; done); for f in $D/sweep/*.gz; do gunzip -kf $f; done
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
echo "== ptxas -v (sweep none/causal, lf and plf3 every mask)"
for p in $D/sweep/*.ptx $D/ptx/*.ptx; do
  echo "$(basename $p .ptx): $($ptxas -arch=sm_90a -v $p -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning" | sed -E 's/ptxas (info|warning) *: //' | tr '\n' ' ' | cut -c1-220)"
done > $OUT/ptxas.txt
grep -E "C75|arning" $OUT/ptxas.txt | head; grep -v " 0 bytes spill stores, 0 bytes spill loads" $OUT/ptxas.txt | grep spill | head
grep -E "^(base|lf|lazy|fold)-d128-none|^(pers3|plf3)-d128-none" $OUT/ptxas.txt | cut -c1-160
echo "== checks (odd shapes, GQA)"
LF="--const lazy_rescale=true --const fold_scale=true"
for v in lf plf3; do c=$LF; [ $v = plf3 ] && c="$LF --const persistent=true"
  for m in causal "sliding_window(20, 3)" document none; do for h in 64 128; do
    $D/sweep/fac run --device cuda --bundle $D/$v-check.bundle $c --mask "$m" --random-aux --doc-len 300 \
      --seqlen-q 1537 --seqlen-k 1000 --dim $h --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-100
    echo "rc=${PIPESTATUS[0]} $v $m D=$h"
  done; done
  $D/sweep/fac run --device cuda --bundle $D/$v-check.bundle $c --mask causal --scale -0.2 --seqlen-q 700 --seqlen-k 900 \
    --dim 128 --heads 2 --batch 1 --dtype f16 2>&1 | tail -1 | cut -c1-100; echo "rc=${PIPESTATUS[0]} $v causal scale -0.2 f16"
done
F='^(none|causal|sliding|document|prefix)'
for v in base lf pers3 plf3; do
  c=""; case $v in lf) c=$LF;; pers3) c="--const persistent=true";; plf3) c="$LF --const persistent=true";; esac
  echo "== r1 $v S=8192"; $D/sweep/fac bench --bundle $D/sweep/$v-d128.bundle $c --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-80
done
