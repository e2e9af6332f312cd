#!/usr/bin/env bash
# Session 22, device call 5 (carry .gpu/s22d, built by prepare-d64.sh): in-kernel timelines of the
# D = 64 forward, default (t) against pingpong (pp), none and causal, S = 8192, B = 2, H = 32; report
# with go run ./internal/tools/ptxstamp report <files_at>/lse-*.npy. About a minute.
set -u
D=$(pwd)/.gpu/s22d
(cd $D && for f in *.gz; do gunzip -kf $f; done)
for v in t pp; do c=""; [ $v = pp ] && c="--const pingpong=true"
  for m in none causal; do
    $D/fac run --device cuda --bundle $D/stamp-$v.bundle $c --mask $m --no-check --lse-out $OUT/lse-d64-$v-$m.npy \
      --seqlen-q 8192 --seqlen-k 8192 --batch 2 --heads 32 --dim 64 --dtype bf16 2>&1 | tail -1 | cut -c1-100
    echo "rc=${PIPESTATUS[0]} timeline d64 $v $m"
  done
done
