#!/usr/bin/env bash
# Session 13, device call 7: the backward, session 12's (A) against F (the chunked dQ with v2 adds,
# masked per column again instead of a branch around the dQ dot), in turns.
set -u
G=.gpu/s13f
for f in $G/bench?.bundle.gz; do gunzip -kf $f; done
F='^(none|causal|sliding|document|prefix)'
for round in 1 2; do
  for v in A F; do
    echo "== bwd round $round $v"; $G/fac$v bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $G/bench$v.bundle 2>&1 | grep -E "$F" | cut -c1-75
  done
done
