#!/usr/bin/env bash
# Session 24's plan for a later session (carry .gpu/s24x, built by prepare3.sh, and .gpu/s24b, built by
# prepare2.sh): sliding window 1024 at D = 128 against issue 8's 465 and issue 11's 478.5 (S = 32768):
# the default (heads_minor) against p2tms, p2tmshm and g2 in turns, two rounds, S = 8192 and 32768;
# GPU checks of each at odd shapes.
set -u
X=$(pwd)/.gpu/s24x; B=$(pwd)/.gpu/s24b; f=$X/fac
(cd $X && for x in *.gz; do gunzip -kf $x; done); (cd $B && for x in *.gz; do gunzip -kf $x; done)
F='^(none|causal|sliding|document|prefix)'
P2="--const persistent=true --const num_stages=2 --const tma_store=true"
G2="--const BLOCK_M=64 --const BLOCK_N=128 --const num_warps=4 --const consumer_groups=2 --const num_stages=2 --const warp_specialize=true --const overlap=true --const lazy_rescale=true --const fold_scale=true --const tma_store=true"
M=(--mask causal --mask "sliding_window(1023, 0)" --mask document)
for r in 1 2; do for v in t p2tms p2tmshm g2; do
  case $v in t) c=""; bb=$B/bench.bundle;; p2tms) c=$P2; bb=$X/p2tms.bundle;; p2tmshm) c="$P2 --const heads_minor=true"; bb=$X/p2tmshm.bundle;; g2) c=$G2; bb=$X/g2.bundle;; esac
  echo "== r$r $v S=8192"; $f bench --bundle $bb $c "${M[@]}" --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
  echo "== r$r $v S=32768"; $f bench --bundle $bb $c --mask "sliding_window(1023, 0)" --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror" | cut -c1-100
done; done
for v in p2tms p2tmshm g2; do
  case $v in p2tms) c=$P2;; p2tmshm) c="$P2 --const heads_minor=true";; g2) c=$G2;; esac
  for m in causal "sliding_window(1023, 0)" document; do
    $f run --device cuda --bundle $X/$v.bundle $c --mask "$m" --random-aux --doc-len 300 \
      --seqlen-q 1537 --seqlen-k 1000 --dim 128 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-90
    echo "rc=${PIPESTATUS[0]} $v $m"
  done
done
