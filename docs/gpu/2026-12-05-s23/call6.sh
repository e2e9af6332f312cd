#!/usr/bin/env bash
# Session 23, device call 6 (carry .gpu/s23p, built by prepare-pq.sh): flash_fwd's prefetch_q (pq:
# each program prefetches into L2 the Q tile of the program num_sms() after it) and full_first (ff:
# a tile's full blocks before its partial ones), alone and together (pqff), against the default (t);
# S = 8192, B = 2, H = 16, D = 128 unless said:
# 1. ptxas -v of pqff (registers, spills, C75xx) and its SASS's prefetch count;
# (5., run second: the D = 64 gap is issue 8's largest)
# 2. GPU checks of pqff at odd shapes and GQA (bf16, D 64/128; with heads_minor at D 128);
# 3. timelines of pq and ff (sliding window, document, causal): "consumers start -> Q landed" and
#    iteration 0 against session 22's t (1,505-1,718 and 4,576-4,823 cycles);
# 4. t, pq, ff, pqff in turns, two rounds, five masks; then t and pqff at S = 32768 (causal,
#    sliding window) and D = 64 (H = 32); all (pqff, heads_minor, the TMA store) once;
# 5. consumer groups: GPU checks of g3 (D = 64, three groups on 192-row mask blocks) and g2 (D =
#    128, two groups), then t against g3, g3s3 (three buffers) and g2 at D = 64 (H = 32), none and
#    causal, two rounds, g3 with the TMA store once, and g2 at D = 128 (the PTX of all of them is in
#    step 1's ptxas -v).
# PART=a runs steps 1 and 5 (ptxas, consumer groups), PART=b the rest; unset, all.
set -u
D=$(pwd)/.gpu/s23p
(cd $D && for f in *.gz; do gunzip -kf $f; done && tar xzf ptx.tgz)
f=$D/fac
F='^(none|causal|sliding|document|prefix)'
declare -A C=([t]="" [pq]="--const prefetch_q=true" [ff]="--const full_first=true" [pqff]="--const prefetch_q=true --const full_first=true")
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
if [ "${PART:-all}" != b ]; then
echo "== ptxas -v (pqff, g3, g3s3, g2)"
for p in $D/ptx/*.ptx; do
  echo "$(basename $p .ptx): $($ptxas -arch=sm_90a -v $p -o /tmp/pq.cubin 2>&1 | grep -E "registers|spill|C75|arning|rror" | sed -E 's/ptxas (info|warning) *: //' | tr '\n' ' ' | cut -c1-160)"
  echo "  SASS prefetch-like: $(cuobjdump --dump-sass /tmp/pq.cubin 2>/dev/null | grep -cE 'CCTL|PREFETCH|LDG.*PF')"
done
G="--const BLOCK_M=64 --const BLOCK_N=128 --const num_warps=4 --const SPARSE_K=128 --const warp_specialize=true --const overlap=true --const lazy_rescale=true --const fold_scale=true"
G3="$G --const consumer_groups=3 --const SPARSE_Q=192"
G2="$G --const consumer_groups=2 --const SPARSE_Q=128"
echo "== consumer groups checks"
for m in causal "sliding_window(20, 3)" document none; do
  $f run --device cuda --bundle $D/g3-check.bundle $G3 --mask "$m" --random-aux --doc-len 300 \
    --seqlen-q 1537 --seqlen-k 1000 --dim 64 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-90
  echo "rc=${PIPESTATUS[0]} g3 $m D=64"
  $f run --device cuda --bundle $D/g2-check.bundle $G2 --mask "$m" --random-aux --doc-len 300 \
    --seqlen-q 1537 --seqlen-k 1000 --dim 128 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-90
  echo "rc=${PIPESTATUS[0]} g2 $m D=128"
done
$f run --device cuda --bundle $D/g3-check.bundle $G3 --mask causal --scale -0.2 \
  --seqlen-q 700 --seqlen-k 900 --dim 64 --heads 2 --batch 1 --dtype f16 2>&1 | tail -1 | cut -c1-90
echo "rc=${PIPESTATUS[0]} g3 f16 causal D=64 scale -0.2"
for r in 1 2; do
  echo "== r$r t D=64"; $f bench --bundle $D/t-d64.bundle --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
  echo "== r$r g3 D=64"; $f bench --bundle $D/g3-d64.bundle $G3 --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
  echo "== r$r g3s3 D=64"; $f bench --bundle $D/g3s3-d64.bundle $G3 --const num_stages=3 --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
  echo "== r$r g2 D=64"; $f bench --bundle $D/g2.bundle $G2 --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
done
echo "== g3tms D=64"; FAC_TMA_STORE=1 $f bench --bundle $D/g3tms-d64.bundle $G3 --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
echo "== g2 D=128"; $f bench --bundle $D/g2.bundle $G2 --dim 128 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
fi
if [ "${PART:-all}" != a ]; then
echo "== pqff checks"
for m in causal "sliding_window(20, 3)" document none; do for h in 64 128; do
  $f run --device cuda --bundle $D/pqff-check.bundle ${C[pqff]} --mask "$m" --random-aux --doc-len 300 \
    --seqlen-q 1537 --seqlen-k 1000 --dim $h --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-90
  echo "rc=${PIPESTATUS[0]} pqff $m D=$h"
done; done
for m in causal "sliding_window(20, 3)" document; do
  $f run --device cuda --bundle $D/pqffhm-check.bundle ${C[pqff]} --const heads_minor=true --mask "$m" --random-aux --doc-len 300 \
    --seqlen-q 1537 --seqlen-k 1000 --dim 128 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-90
  echo "rc=${PIPESTATUS[0]} pqff+hm $m D=128"
done
for v in pq ff; do for m in "sliding_window(1023, 0)" document causal; do n=$(echo "$m" | tr -c 'a-z0-9\n' '_' | cut -c1-14)
  $f run --device cuda --bundle $D/stamp-$v.bundle ${C[$v]} --mask "$m" --random-aux --no-check --lse-out $OUT/lse-$v-$n.npy \
    --seqlen-q 8192 --seqlen-k 8192 --batch 2 --heads 16 --dim 128 --dtype bf16 2>&1 | tail -1 | cut -c1-100
  echo "rc=${PIPESTATUS[0]} timeline $v $m"
done; done
for r in 1 2; do for v in t pq ff pqff; do
  echo "== r$r $v D=128"; $f bench --bundle $D/$v-d128.bundle ${C[$v]} --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-80
done; done
for v in t pqff; do
  echo "== $v S=32768"; $f bench --bundle $D/$v-d128.bundle ${C[$v]} --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 \
    --mask causal --mask "sliding_window(1023, 0)" 2>&1 | grep -E "$F|rror" | cut -c1-100
  echo "== $v D=64"; $f bench --bundle $D/$v-d64.bundle ${C[$v]} --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
done
echo "== all D=128 (prefetch_q, full_first, heads_minor, TMA store)"
FAC_TMA_STORE=1 $f bench --bundle $D/all-d128.bundle ${C[pqff]} --const heads_minor=true --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-80
fi
