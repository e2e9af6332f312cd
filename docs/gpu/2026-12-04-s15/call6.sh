#!/usr/bin/env bash
# Session 15, device call 6: ptxas of Q (Δ fold, unmasked dQ adds into a padded accumulator,
# programs grouped four heads at a time, longest first; forward grouped too), then the backward
# and forward timed in turns against pF (ablation) / pI (masked-else) and main (p1).
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for f in .gpu/p1/*.bundle.gz .gpu/pI/bench.bundle.gz .gpu/pF/bench.bundle.gz .gpu/pQ/*.bundle.gz; do gunzip -kf $f; done
for v in Q_none Q_causal Q_docume Q_slidin Q_prefix QF_none QF_causal QF_docume QF_slidin QF_prefix; do
  echo "$v: $(ptxas -arch=sm_90a -v .gpu/p2/$v.ptx -o /tmp/x.cubin 2>&1 | grep -E 'spill|C75|rror' | sed 's/in function .flash_.wd.//' | tr '\n' ' ' | cut -c1-200)"
done
F='^(none|causal|sliding|document|prefix)'
for round in 1 2; do
  for d in pF:bench pI:bench pQ:bench; do
    n=${d%%:*} b=${d##*:}
    echo "== bwd round $round $n"
    .gpu/$n/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle .gpu/$n/$b.bundle 2>&1 | grep -E "$F" | cut -c1-75
  done
  for d in p1:bench5 pQ:bench; do
    n=${d%%:*} b=${d##*:}
    echo "== fwd round $round $n"
    .gpu/$n/fac bench --seqlen 8192 --bundle .gpu/$n/$b.bundle 2>&1 | grep -E "$F" | cut -c1-75
    .gpu/$n/fac bench --seqlen 2048 --bundle .gpu/$n/$b.bundle 2>&1 | grep -E "^(none|causal)" | cut -c1-75
    .gpu/$n/fac bench --seqlen 8192 --dim 64 --heads 32 --batch 2 --mask none --mask causal --bundle .gpu/$n/d64.bundle 2>&1 | grep -E "$F" | cut -c1-75
  done
done
