#!/usr/bin/env bash
# Session 14, device call 5: the backward orders in turns (main; order = dQᵀ, dV, dK GEMMs after
# dS; order-a = dV before dS, then dQᵀ, dK), the reordered kernel's ablations (no dQ adds, no
# barrier before dS is written: timing only), FlexAttention (flex_bench.py) in the same call,
# then the backward GPU suites on order's kernels.
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
for f in .gpu/ab/*/*.bundle.gz .gpu/abl/*.bundle.gz .gpu/t/*.bundle.gz; do gunzip -kf $f; done
for p in .gpu/ab/s14-bwd-order*/ptx/bwd*.ptx; do
  echo "$p: $(ptxas -arch=sm_90a -v "$p" -o /tmp/ab.cubin 2>&1 | grep -E 'registers|spill|C75|error' | tr '\n' ' ' | cut -c1-160)"
done
F='^(none|causal|sliding|document|prefix)'
bench() { # NAME BUNDLE FAC
  echo "== bwd round $round $1"
  $3 bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $2 > /tmp/o.txt 2>&1
  grep -E "$F" /tmp/o.txt | cut -c1-75; grep -vE "$F|^device|^backward|^mask" /tmp/o.txt | tail -3 | cut -c1-300
}
for round in 1 2; do
  for d in main s14-bwd-order s14-bwd-order-a; do bench $d .gpu/ab/$d/bench.bundle .gpu/ab/$d/fac; done
  [ $round = 1 ] && for a in noatomic nowar; do bench order-$a .gpu/abl/$a.bundle .gpu/abl/fac; done
done
echo "== forward s14-bwd-order"; .gpu/ab/s14-bwd-order/fac bench --bundle .gpu/ab/s14-bwd-order/bench.bundle --seqlen 8192 2>&1 | grep -E "$F" | cut -c1-75
echo "== FlexAttention"; PYTHONUNBUFFERED=1 timeout 300 python3 .gpu/flex_bench.py flex > $OUT/flex.txt 2>&1; echo "flex rc=$?"; tail -6 $OUT/flex.txt
G=$(pwd)/.gpu/t
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle FAC_BUNDLE_EXTRA=$G/test-det-sm_90a.bundle:$G/test-patterns.bundle \
  timeout 240 $G/tests.test -test.run 'GPUBackward|GPUSinksBackward|GPUVarlenBackward' -test.v -test.count=1 -test.timeout 8m) > $OUT/call5-tests.log 2>&1
echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- (PASS|SKIP)|largest relative" $OUT/call5-tests.log | tail -30
