#!/usr/bin/env bash
# Session 18, device call 5: call 4's `fac run` checks of document on the span path again (call
# 4's output kept only its tail), into $OUT/run-call5.txt.
set -u
N=$(pwd)/.gpu/s18/f
(cd $N && gunzip -kf bench.bundle.gz)
for sq in 1537 1000; do sk=$sq; [ $sq = 1000 ] && sk=4097
  echo "== document ${sq}x${sk}, forward and backward"
  $N/fac run --device cuda --bundle $N/bench.bundle --mask document --random-aux --doc-len 300 --seqlen-q $sq --seqlen-k $sk \
    --dim 128 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 --backward 2>&1 | cut -c1-160
  echo "rc=${PIPESTATUS[0]}"
done > $OUT/run-call5.txt 2>&1
cat $OUT/run-call5.txt
