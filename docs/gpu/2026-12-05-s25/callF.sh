#!/usr/bin/env bash
# Session 25's plan for a later session (carry .gpu/s25f, built by prepareF.sh): sliding window
# 1024 and document at D = 128, S = 8192, H = 16 with B = 16 (many heads) and B = 2 (the
# benchmark's shape), and sliding window at S = 32768, B = 1: heads_minor with heads_group 0, 16,
# 32 against heads-major, two rounds in turns; GPU checks of g16 and g32 at odd shapes with B·H
# not a multiple of the group.
set -u
exec > >(tee $OUT/callF.txt) 2>&1
D=$(pwd)/.gpu/s25f; f=$D/fac
(cd $D && for x in *.gz; do gunzip -kf $x; done)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
F='^(none|causal|sliding|document|prefix)'
for r in 1 2; do for v in g0 g16 g32 hmoff; do
  case $v in g0) c="";; g16) c="--const heads_group=16";; g32) c="--const heads_group=32";; hmoff) c="--const heads_minor=false";; esac
  for bs in 16 2; do
    echo "== r$r $v B=$bs"; timeout 60 $f bench --bundle $D/$v.bundle $c --mask "sliding_window(1023, 0)" --mask document --seqlen 8192 --batch $bs 2>&1 | grep -E "$F|rror" | cut -c1-90
  done
  echo "== r$r $v S=32768"; timeout 60 $f bench --bundle $D/$v.bundle $c --mask "sliding_window(1023, 0)" --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror" | cut -c1-100
done; done
for v in g16 g32; do c="--const heads_group=${v#g}"
  for m in "sliding_window(1023, 0)" document; do
    timeout 30 $f run --device cuda --bundle $D/$v.bundle $c --mask "$m" --random-aux --doc-len 300 \
      --seqlen-q 1537 --seqlen-k 1000 --dim 128 --heads 12 --kv-heads 4 --batch 3 --dtype bf16 2>&1 | tail -1 | cut -c1-90
    echo "rc=${PIPESTATUS[0]} $v $m"
  done
done
