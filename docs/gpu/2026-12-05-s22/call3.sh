#!/usr/bin/env bash
# Session 22, device call 3 (carry .gpu/s22t, built by prepare.sh here, and .gpu/s22v, built by
# DIR=.gpu/s22v docs/gpu/2026-12-04-s18/prepare.sh): in-kernel timelines with the epilogue's stamps
# of the tuned default (t) and of persistent=true (p) at S = 8192, B = 2, H = 16, D = 128 (sliding
# window 1024, document, causal; report with go run ./internal/tools/ptxstamp report
# <files_at>/lse-*.npy), then session 21's call3.sh on .gpu/s22v (ptxas of the 84 forward kernels,
# the GPU suites on sm_90a and with sm_80 forced).
set -u
D=$(pwd)/.gpu/s22t
(cd $D && for f in *.gz; do gunzip -kf $f; done)
for v in t p; do c=""; [ $v = p ] && c="--const persistent=true"
  for m in "sliding_window(1023, 0)" document causal; do n=$(echo "$m" | tr -c 'a-z0-9\n' '_' | cut -c1-14)
    $D/fac run --device cuda --bundle $D/stamp-$v.bundle $c --mask "$m" --random-aux --no-check --lse-out $OUT/lse-$v-$n.npy \
      --seqlen-q 8192 --seqlen-k 8192 --batch 2 --heads 16 --dim 128 --dtype bf16 2>&1 | tail -1 | cut -c1-120
    echo "rc=${PIPESTATUS[0]} $v $m"
  done
done
G=$(pwd)/.gpu/s22v OUT=$OUT bash docs/gpu/2026-12-05-s21/call3.sh
