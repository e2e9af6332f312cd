#!/usr/bin/env bash
# Session 20, device call 4 (carry .gpu/s20; optional): in-kernel timelines (internal/tools/ptxstamp)
# of base, lf and plf3, sliding window 1024 and causal at S = 8192, B = 2, H = 16; report here with
#   go run ./internal/tools/ptxstamp report <files_at>/lse-*.npy
set -u
D=$(pwd)/.gpu/s20
(cd $D && for f in stamp-*.bundle.gz; do gunzip -kf $f; done)
LF="--const lazy_rescale=true --const fold_scale=true"
for v in base lf plf3; do
  c=""; case $v in lf) c=$LF;; plf3) c="$LF --const persistent=true";; esac
  [ -f $D/stamp-$v.bundle ] || { echo "no stamp-$v.bundle"; continue; }
  for m in "sliding_window(1023, 0)" causal; do n=$(echo "$m" | tr -c 'a-z0-9\n' '_' | cut -c1-14)
    $D/sweep/fac run --device cuda --bundle $D/stamp-$v.bundle $c --mask "$m" --no-check --lse-out $OUT/lse-$v-$n.npy \
      --seqlen-q 8192 --seqlen-k 8192 --batch 2 --heads 16 --dim 128 --dtype bf16 2>&1 | tail -1 | cut -c1-120
    echo "rc=${PIPESTATUS[0]} $v $m"
  done
done
ls -la $OUT
