#!/usr/bin/env bash
# Session 14, device call 4: the backward with dQᵀ's GEMM issued before dV's and dK's
# (s14-bwd-order; dQ in deferred bulk reductions, and with FAC_DQ_BULK=0 per-element reds) against
# main and the deferred bulk alone (s14-dq-deferred), in turns; ptxas; then the backward GPU suites
# (dense, sinks, varlen) on s14-bwd-order's kernels.
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
for f in .gpu/ab/*/*.bundle.gz .gpu/t/*.bundle.gz; do gunzip -kf $f; done
for p in .gpu/ab/s14-bwd-order/ptx/bwd*.ptx; do
  echo "$p: $(ptxas -arch=sm_90a -v "$p" -o /tmp/ab.cubin 2>&1 | grep -E 'registers|spill|C75|error' | tr '\n' ' ' | cut -c1-160)"
done
F='^(none|causal|sliding|document|prefix)'
bench() { # NAME ENV BUNDLE FAC
  echo "== bwd round $round $1"
  env $2 $4 bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $3 > /tmp/o.txt 2>&1
  grep -E "$F" /tmp/o.txt | cut -c1-75; grep -vE "$F|^device|^backward|^mask" /tmp/o.txt | tail -3 | cut -c1-300
}
for round in 1 2; do
  bench main FAC_X=0 .gpu/ab/main/bench.bundle .gpu/ab/main/fac
  bench deferred FAC_X=0 .gpu/ab/s14-dq-deferred/bench.bundle .gpu/ab/s14-dq-deferred/fac
  bench order FAC_X=0 .gpu/ab/s14-bwd-order/bench.bundle .gpu/ab/s14-bwd-order/fac
  bench order-dqred FAC_DQ_BULK=0 .gpu/ab/s14-bwd-order/dqred.bundle .gpu/ab/s14-bwd-order/fac
done
G=$(pwd)/.gpu/t
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle FAC_BUNDLE_EXTRA=$G/test-det-sm_90a.bundle:$G/test-patterns.bundle \
  $G/tests.test -test.run 'GPUBackward|GPUSinksBackward|GPUVarlenBackward' -test.v -test.count=1 -test.timeout 8m) > $OUT/call4-tests.log 2>&1
echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- (PASS|SKIP)|largest relative" $OUT/call4-tests.log | tail -30
