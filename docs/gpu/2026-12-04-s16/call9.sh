#!/usr/bin/env bash
# Session 16, device call 9: the GPU suites on the shipped kernels (sm_90a, -test.short), then the
# JIT's performance-warning check over the test bundle.
set -u
for f in .gpu/t/*.bundle.gz; do gunzip -kf $f; done
G=$(pwd)/.gpu/t
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle FAC_BUNDLE_EXTRA=$G/test-det-sm_90a.bundle:$G/test-patterns.bundle \
  timeout 360 $G/tests.test -test.run 'GPU' -test.skip 'GPUNoJITPerformanceWarnings' -test.short -test.v -test.count=1 -test.timeout 8m) > $OUT/tests.log 2>&1
echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- (PASS|SKIP)" $OUT/tests.log | tail -30
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle timeout 120 $G/tests.test -test.run 'GPUNoJITPerformanceWarnings' -test.count=1 -test.timeout 8m) > $OUT/jit.log 2>&1
echo "jit rc=$?"; tail -5 $OUT/jit.log | cut -c1-300
