#!/usr/bin/env bash
# Session 14, device call 3: the backward with dQ added by deferred bulk reductions
# (s14-dq-deferred) against main's per-element reds, in turns; ptxas spills; then the backward
# GPU suites (dense, sinks, varlen) on the deferred build's kernels.
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
for f in .gpu/ab/*/bench.bundle.gz .gpu/t/*.bundle.gz; do gunzip -kf $f; done
for p in .gpu/ab/*/ptx/bwd*.ptx; do
  echo "$p: $(ptxas -arch=sm_90a -v "$p" -o /tmp/ab.cubin 2>&1 | grep -E 'registers|spill|C75|error' | tr '\n' ' ' | cut -c1-160)"
done
F='^(none|causal|sliding|document|prefix)'
for round in 1 2; do
  for d in main s14-dq-deferred; do
    echo "== bwd round $round $d"
    .gpu/ab/$d/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle .gpu/ab/$d/bench.bundle > /tmp/o.txt 2>&1
    grep -E "$F" /tmp/o.txt | cut -c1-75; grep -vE "$F|^device|^backward|^mask" /tmp/o.txt | tail -3 | cut -c1-300
  done
done
G=$(pwd)/.gpu/t
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle FAC_BUNDLE_EXTRA=$G/test-det-sm_90a.bundle \
  $G/tests.test -test.run 'GPUBackward|GPUSinksBackward|GPUVarlenBackward' -test.v -test.count=1 -test.timeout 8m) > $OUT/call3-tests.log 2>&1
echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- (PASS|SKIP)|largest relative" $OUT/call3-tests.log | tail -30
