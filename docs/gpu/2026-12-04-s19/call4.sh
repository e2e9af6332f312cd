#!/usr/bin/env bash
# Session 19, device call 4 (carry .gpu/s19; optional, when call 1 leaves the persistent schedule's
# result unexplained): the in-kernel timeline of base and pers3 (internal/tools/ptxstamp: per tile
# for the persistent kernel), sliding window 1024 and causal at S = 8192, B = 2, H = 16. The stamped
# kernels' LSE is the stamps; report here with
#   go run ./internal/tools/ptxstamp report $OUT/lse-*.npy
set -u
D=$(pwd)/.gpu/s19
(cd $D && gunzip -kf stamp-base.bundle.gz stamp-pers3.bundle.gz)
for v in base pers3; do c=""; [ $v = pers3 ] && c="--const persistent=true"
  for m in "sliding_window(1023, 0)" causal; do n=$(echo "$m" | tr -c 'a-z0-9\n' '_' | cut -c1-14)
    $D/sweep/fac run --device cuda --bundle $D/stamp-$v.bundle $c --mask "$m" --no-check --lse-out $OUT/lse-$v-$n.npy \
      --seqlen-q 8192 --seqlen-k 8192 --batch 2 --heads 16 --dim 128 --dtype bf16 2>&1 | tail -1 | cut -c1-120
    echo "rc=${PIPESTATUS[0]} $v $m"
  done
done
ls -la $OUT
