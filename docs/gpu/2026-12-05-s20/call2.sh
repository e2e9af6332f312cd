#!/usr/bin/env bash
# Session 20, device call 2 (carry .gpu/s20): round 2 of S = 8192, D = 128 in the reverse order,
# lazy and fold alone (whose share of lf's change is which), FlexAttention in the same call; the
# backward with fold_scale (checks at odd shapes, then two rounds against the default).
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
D=$(pwd)/.gpu/s20
(cd $D && for f in *.bundle.gz; do gunzip -kf $f; done); for f in $D/sweep/*.gz; do gunzip -kf $f; done
LF="--const lazy_rescale=true --const fold_scale=true"
F='^(none|causal|sliding|document|prefix)'
for v in plf3 pers3 lf base lazy fold; do
  c=""; case $v in lf) c=$LF;; pers3) c="--const persistent=true";; plf3) c="$LF --const persistent=true";;
    lazy) c="--const lazy_rescale=true";; fold) c="--const fold_scale=true";; esac
  echo "== r2 $v S=8192"; $D/sweep/fac bench --bundle $D/sweep/$v-d128.bundle $c --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-80
done
echo "== flex"
timeout 200 python3 $D/sweep/flex_bench.py flex 2>&1 | grep -E '^\{|rror' | tail -12
for m in causal document; do
  $D/sweep/fac run --device cuda --bundle $D/bwdfold.bundle --backward --const fold_scale=true --mask $m --random-aux --doc-len 300 \
    --seqlen-q 1537 --seqlen-k 1000 --dim 128 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-100
  echo "rc=${PIPESTATUS[0]} bwdfold $m"
done
for r in 1 2; do for v in bwd bwdfold; do c=""; [ $v = bwdfold ] && c="--const fold_scale=true"
  echo "== r$r $v S=8192"; $D/sweep/fac bench --bundle $D/$v.bundle $c --backward --seqlen 8192 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror" | cut -c1-80
done; done
