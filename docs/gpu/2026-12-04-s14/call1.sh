#!/usr/bin/env bash
# Session 14, device call 1: main against G (the forward's partial blocks compare with seqlen_k only
# in the block holding the sequence end, one select per path), forward and backward, in turns
# (scripts/gpu-ab); then the backward's ablations (results wrong on purpose, timing only): no dQ
# atomics, no barrier before dS is written, both, and the bulk dQ without its barrier.
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
scripts/gpu-ab run 2
A=.gpu/abl
F='^(none|causal|sliding|document|prefix)'
for f in $A/*.bundle.gz; do gunzip -kf $f; done
for round in 1 2; do
  echo "== bwd round $round main"; .gpu/ab/main/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle .gpu/ab/main/bench.bundle 2>&1 | grep -E "$F" | cut -c1-75
  for v in noatomic nowar noatomic_nowar bulknobar; do
    echo "== bwd round $round $v"; $A/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $A/$v.bundle 2>&1 | grep -E "$F|rror" | cut -c1-75
  done
done
