#!/usr/bin/env bash
# Session 13, device call 4: E = the forward with the nested partial/end compares (D of call 3) and
# the reciprocal epilogue, and the backward with its dQ accumulator in chunks
# (red.global.add.v2.f32, PTX ISA 8.1). ptxas -v of the backward (A: session 12, E: now), the
# backward against session 12's in turns, E's forward, and backward smoke runs against the float64
# reference (odd seqlens, GQA, D 64/128, bf16/f16).
set -u
G=.gpu/s13
for f in $G/*/*.bundle.gz; do gunzip -kf $f; done
F='^(none|causal|sliding|document|prefix)'
for v in A E; do
  for p in $G/$v/ptx/*.ptx; do
    echo "$v $(basename $p): $(ptxas -arch=sm_90a -v $p -o /tmp/x.cubin 2>&1 | grep -E 'registers|spill|C75|error' | tr '\n' ' ' | sed 's/ptxas info    ://g' | cut -c1-150)"
  done
done
cuobjdump --dump-sass /tmp/x.cubin 2>/dev/null | grep -c "REDG.E.ADD.F32x2\|RED.E.ADD.F32x2\|REDG.*64" ; cuobjdump --dump-sass /tmp/x.cubin | grep -m3 "REDG"
for round in 1 2; do
  for v in A E; do
    echo "== bwd round $round $v"; $G/$v/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $G/$v/bench.bundle 2>&1 | grep -E "$F" | cut -c1-75
  done
done
echo "== fwd E"; $G/E/fac bench --bundle $G/E/bench.bundle 2>&1 | grep -E "$F" | cut -c1-75
run() { echo "== smoke $*"; $G/E/fac run --backward --device cuda --bundle $G/E/smoke.bundle "$@" > /tmp/r.txt 2>&1; rc=$?; tail -4 /tmp/r.txt | cut -c1-160; echo "rc=$rc"; }
run --dtype bf16 --dim 128 --mask causal --batch 2 --heads 4 --kv-heads 2 --seqlen-q 1000 --seqlen-k 1100
run --dtype bf16 --dim 128 --mask document --random-aux --doc-len 300 --batch 1 --heads 2 --seqlen-q 777 --seqlen-k 777
run --dtype f16 --dim 64 --mask "sliding_window(100, 0)" --score "softcap(2.5)" --batch 1 --heads 4 --kv-heads 1 --seqlen-q 301 --seqlen-k 257
run --dtype bf16 --dim 128 --mask none --batch 1 --heads 2 --seqlen-q 1 --seqlen-k 300
run --dtype bf16 --dim 64 --mask causal --batch 1 --heads 8 --kv-heads 2 --seqlen-q 130 --seqlen-k 130
run --dtype f16 --dim 128 --mask none --score "softcap(2.5)" --batch 2 --heads 2 --seqlen-q 64 --seqlen-k 65
