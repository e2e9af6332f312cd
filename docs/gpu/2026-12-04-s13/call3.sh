#!/usr/bin/env bash
# Session 13, device call 3: the forward variants (A: session 12; B/E: reciprocal epilogue and the
# partial blocks' compare split in two branches; C: reciprocal only; D: reciprocal, and the two
# compares nested in the one partial-or-end branch) in turns; the backward with its dQ accumulator
# in chunks (red.global.add.v2.f32) against session 12's; backward smoke runs (odd seqlens, GQA,
# D 64/128, bf16/f16) against the float64 reference.
set -u
G=.gpu/s13
for f in $G/*/*.bundle.gz; do gunzip -kf $f; done
F='^(none|causal|sliding|document|prefix)'
for round in 1 2; do
  for v in A C D E; do
    b=$G/$v/fwd.bundle; [ -f $b ] || b=$G/$v/bench.bundle
    echo "== fwd round $round $v"; $G/$v/fac bench --bundle $b --seqlen 8192 2>&1 | grep -E "$F" | cut -c1-75
  done
done
for v in A E; do
  echo "== bwd $v"; $G/$v/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $G/$v/bench.bundle 2>&1 | grep -E "$F" | cut -c1-75
done
run() { echo "== smoke $*"; $G/E/fac run --backward --device cuda --bundle $G/E/smoke.bundle "$@" > /tmp/r.txt 2>&1; rc=$?; tail -4 /tmp/r.txt | cut -c1-160; echo "rc=$rc"; }
run --dtype bf16 --dim 128 --mask causal --batch 2 --heads 4 --kv-heads 2 --seqlen-q 1000 --seqlen-k 1100
run --dtype bf16 --dim 128 --mask document --random-aux --doc-len 300 --batch 1 --heads 2 --seqlen-q 777 --seqlen-k 777
run --dtype f16 --dim 64 --mask "sliding_window(100, 0)" --score "softcap(2.5)" --batch 1 --heads 4 --kv-heads 1 --seqlen-q 301 --seqlen-k 257
run --dtype bf16 --dim 128 --mask none --batch 1 --heads 2 --seqlen-q 1 --seqlen-k 300
run --dtype bf16 --dim 64 --mask causal --batch 1 --heads 8 --kv-heads 2 --seqlen-q 130 --seqlen-k 130
run --dtype f16 --dim 128 --mask none --score "softcap(2.5)" --batch 2 --heads 2 --seqlen-q 64 --seqlen-k 65
