#!/usr/bin/env bash
# Session 22, device call 2 (carry .gpu/s20): in-kernel timelines (internal/tools/ptxstamp) of the
# persistent build with both softmax arguments (plf3, session 20's stamp bundle) at S = 8192,
# B = 2, H = 16, D = 128: sliding window 1024, document, causal; report here with
#   go run ./internal/tools/ptxstamp report <files_at>/lse-*.npy
# (call 1 of this session ran session 21's call2.sh, whose timelines are the plain launch's).
set -u
D=${D:-$(pwd)/.gpu/s20}
(cd $D && gunzip -kf stamp-plf3.bundle.gz)
LF="--const lazy_rescale=true --const fold_scale=true --const persistent=true"
for m in "sliding_window(1023, 0)" document causal; do n=$(echo "$m" | tr -c 'a-z0-9\n' '_' | cut -c1-14)
  $D/sweep/fac run --device cuda --bundle $D/stamp-plf3.bundle $LF --mask "$m" --random-aux --no-check --lse-out $OUT/lse-plf3-$n.npy \
    --seqlen-q 8192 --seqlen-k 8192 --batch 2 --heads 16 --dim 128 --dtype bf16 2>&1 | tail -1 | cut -c1-120
  echo "rc=${PIPESTATUS[0]} plf3 $m"
done
