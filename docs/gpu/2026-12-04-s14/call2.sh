#!/usr/bin/env bash
# Session 14, device call 2: the backward's ablations again, each bundle built without the kernel
# cache (call 1's later bundles had the first one's kernels from the cache): no dQ atomics, no
# barrier before dS is written, FAC_DQ_BULK=1 as it is, and FAC_DQ_BULK=1 without its barriers.
# Timing only: the ablated results are wrong on purpose.
set -u
A=.gpu/abl
F='^(none|causal|sliding|document|prefix)'
for f in $A/*.bundle.gz; do gunzip -kf $f; done
for round in 1 2; do
  echo "== bwd round $round main"; .gpu/ab/main/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle .gpu/ab/main/bench.bundle 2>&1 | grep -E "$F" | cut -c1-75
  for v in noatomic nowar bulk bulknobar; do
    echo "== bwd round $round $v"; $A/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $A/$v.bundle > /tmp/o.txt 2>&1; grep -E "$F" /tmp/o.txt | cut -c1-75; grep -vE "$F" /tmp/o.txt | tail -3 | cut -c1-200
  done
done
