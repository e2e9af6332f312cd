#!/usr/bin/env bash
# Session 13, device call 2: the forward A/B (session 12 / this session's kernels) timed in turns,
# three rounds, S = 8192; the backward profiled (none, causal) for where its time goes.
set -u
G=.gpu/s13
F='^(none|causal|sliding|document|prefix)'
for round in 1 2 3; do
  for v in A B; do
    echo "== round $round $v"; $G/$v/fac bench --bundle $G/$v/fwd.bundle --seqlen 8192 2>&1 | grep -E "$F" | cut -c1-75
  done
done
echo "== B backward"; $G/B/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $G/B/bwd.bundle --bundle $G/B/fwd.bundle 2>&1 | grep -E "$F" | cut -c1-75
export OUT=${OUT:-/tmp/out}
TOP=40 GPU_DIR=$G/B scripts/gpu-profile bwd-none flash_bwd --backward --mask none --seqlen 8192 2>&1 | cut -c1-150
TOP=20 GPU_DIR=$G/B scripts/gpu-profile bwd-causal flash_bwd --backward --mask causal --seqlen 8192 2>&1 | cut -c1-150
