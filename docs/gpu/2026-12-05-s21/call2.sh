#!/usr/bin/env bash
# Session 21, device call 2 (carry .gpu/s21): the mask's compares as words (bm, prepare-bm.sh, built
# from branch s21-bitmask) against the default (t): ptxas -v and SASS counts (R2P, LOP3 with a
# predicate, ISETP, FSEL) of sliding window, document and causal; GPU checks of bm
# at odd shapes (forward and backward); two rounds of the five anchors at S = 8192 in turns (forward
# and backward), D = 64 none / causal, S = 32768; then call 1 (D = 64 schedules, timelines), one round.
set -u
D=$(pwd)/.gpu/s21; B=$D/bm
(cd $B && for f in *.gz; do gunzip -kf $f; done)
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | tail -1)
echo "== ptxas -v, SASS counts (R2P, LOP3 to a predicate, ISETP, FSEL)"
for p in $B/*.ptx; do n=$(basename $p .ptx)
  echo "$n: $($ptxas -arch=sm_90a -v $p -o $OUT/$n.cubin 2>&1 | grep -E "registers|spill|C75|arning" | sed -E 's/ptxas (info|warning) *: //' | tr '\n' ' ' | cut -c1-160)"
  $cuobjdump --dump-sass $OUT/$n.cubin > $OUT/$n.sass 2>&1
  echo "   R2P $(grep -c 'R2P' $OUT/$n.sass) LOP3-P $(grep -cE 'LOP3\.LUT P[0-6]' $OUT/$n.sass) ISETP $(grep -c 'ISETP' $OUT/$n.sass) FSEL $(grep -c 'FSEL' $OUT/$n.sass) total $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' $OUT/$n.sass)"
done
rm -f $OUT/*.cubin; gzip $OUT/*.sass
echo "== bm checks (odd shapes, GQA)"
for m in causal "sliding_window(20, 3)" "sliding_window(1023, 0)" document none "prefix_lm(100)"; do for h in 64 128; do
  $B/fac run --device cuda --bundle $B/check.bundle --mask "$m" --random-aux --doc-len 300 --backward \
    --seqlen-q 1537 --seqlen-k 1000 --dim $h --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-100
  echo "rc=${PIPESTATUS[0]} bm $m D=$h"
done; done
F='^(none|causal|sliding|document|prefix)'
for r in 1 2; do
  echo "== r$r t D=128"; $D/sweep/fac bench --bundle $B/t-d128.bundle --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-80
  echo "== r$r bm D=128"; $B/fac bench --bundle $B/bm-d128.bundle --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-80
done
for r in 1 2; do
  echo "== r$r t backward"; $D/sweep/fac bench --bundle $B/t-bwd.bundle --backward --seqlen 8192 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror" | cut -c1-80
  echo "== r$r bm backward"; $B/fac bench --bundle $B/bm-bwd.bundle --backward --seqlen 8192 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror" | cut -c1-80
done
echo "== bm D=64"; $B/fac bench --bundle $B/bm-d64.bundle --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
echo "== bm S=32768 B=1"; $B/fac bench --bundle $B/bm-d128.bundle --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 \
  --mask causal --mask "sliding_window(1023, 0)" 2>&1 | grep -E "$F|rror" | cut -c1-100
ROUNDS=1 OUT=$OUT bash docs/gpu/2026-12-05-s21/call1.sh 2>&1 | grep -v "^check passed"
