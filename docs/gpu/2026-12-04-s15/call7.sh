#!/usr/bin/env bash
# Session 15, device call 7 (final): the shipped backward (dP − Δ in one GEMM issued after P,
# unmasked dQ adds into a padded accumulator, programs grouped four kv heads at a time) timed
# beside FlexAttention in one call, the forward for reference, ptxas -v of the backward's
# kernels, then the backward GPU suites and the JIT's performance-warning check.
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for f in .gpu/fin/*.bundle.gz .gpu/t/*.bundle.gz; do gunzip -kf $f; done
ls .gpu/fin/ptx/*.ptx | xargs -P 16 -I{} sh -c 'echo "{}: $(ptxas -arch=sm_90a -v {} -o /tmp/$(basename {}).cubin 2>&1 | grep -E "registers|spill|C75|rror" | tr "\n" " " | cut -c1-230)"' > $OUT/ptxas.txt
echo "ptxas: $(grep -c . $OUT/ptxas.txt) kernels; with spills: $(grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | grep -c spill); C75: $(grep -c C75 $OUT/ptxas.txt)"
grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | sed 's/.gpu.fin.ptx.//' | cut -c1-150
F='^(none|causal|sliding|document|prefix)'
echo "== backward"; .gpu/fin/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle .gpu/fin/bench.bundle > $OUT/bwd.txt 2>&1; grep -E "$F" $OUT/bwd.txt | cut -c1-75
echo "== forward"; .gpu/fin/fac bench --seqlen 8192 --bundle .gpu/fin/bench.bundle 2>&1 | grep -E "$F" | cut -c1-75
echo "== FlexAttention"; PYTHONUNBUFFERED=1 timeout 300 python3 .gpu/flex_bench.py flex > $OUT/flex.txt 2>&1; echo "flex rc=$?"; grep -E "^what=flex S=8192" $OUT/flex.txt | sed "s/ first_call.*//"
echo "== backward again"; .gpu/fin/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle .gpu/fin/bench.bundle 2>&1 | grep -E "$F" | cut -c1-75
G=$(pwd)/.gpu/t
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle FAC_BUNDLE_EXTRA=$G/test-det-sm_90a.bundle:$G/test-patterns.bundle \
  timeout 220 $G/tests.test -test.run 'GPUBackward|GPUSinksBackward|GPUVarlenBackward' -test.v -test.count=1 -test.timeout 8m) > $OUT/tests.log 2>&1
echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- (PASS|SKIP)" $OUT/tests.log | tail -30
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle timeout 100 $G/tests.test -test.run 'GPUNoJITPerformanceWarnings' -test.count=1 -test.timeout 8m) > $OUT/jit.log 2>&1
echo "jit rc=$?"; tail -5 $OUT/jit.log | cut -c1-300
