#!/usr/bin/env bash
# Session 21, device call 1 (carry .gpu/s21): the D = 64 schedules on top of the new default
# (ptxas -v, then two rounds of none / causal at S = 8192, H = 32), and in-kernel timelines of the
# new default at D = 128 (sliding window, document, causal; report with
#   go run ./internal/tools/ptxstamp report <files_at>/lse-*.npy).
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
D=$(pwd)/.gpu/s21
(cd $D && for f in *.bundle.gz; do gunzip -kf $f; done); for f in $D/sweep/*.gz; do gunzip -kf $f; done
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
for p in $D/sweep/*.ptx; do
  echo "$(basename $p .ptx): $($ptxas -arch=sm_90a -v $p -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning" | sed -E 's/ptxas (info|warning) *: //' | tr '\n' ' ' | cut -c1-200)"
done
F='^(none|causal|sliding|document|prefix)'
N256="--const BLOCK_M=128 --const BLOCK_N=256 --const num_warps=8 --const warp_specialize=true --const lazy_rescale=true --const fold_scale=true"
for m in none causal; do
  $D/sweep/fac run --device cuda --bundle $D/n256.bundle $N256 --const overlap=true --block 256 --mask $m --seqlen-q 1537 --seqlen-k 1000 \
    --dim 64 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-100; echo "rc=${PIPESTATUS[0]} n256 $m"
done
for r in ${ROUNDS:-1 2}; do
  for v in t pp s3; do c=""; case $v in pp) c="--const pingpong=true";; s3) c="--const num_stages=3";; esac
    echo "== r$r $v d64"; $D/sweep/fac bench --bundle $D/sweep/$v-d64.bundle $c --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
  done
  echo "== r$r n256 d64"; $D/sweep/fac bench --bundle $D/n256.bundle $N256 --const overlap=true --block 256 --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
  echo "== r$r n256s1 d64"; $D/sweep/fac bench --bundle $D/n256s1.bundle $N256 --block 256 --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
done
for m in "sliding_window(1023, 0)" document causal; do n=$(echo "$m" | tr -c 'a-z0-9\n' '_' | cut -c1-14)
  $D/sweep/fac run --device cuda --bundle $D/stamp-t.bundle --mask "$m" --random-aux --no-check --lse-out $OUT/lse-t-$n.npy \
    --seqlen-q 8192 --seqlen-k 8192 --batch 2 --heads 16 --dim 128 --dtype bf16 2>&1 | tail -1 | cut -c1-120
  echo "rc=${PIPESTATUS[0]} timeline $m"
done
