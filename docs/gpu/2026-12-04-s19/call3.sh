#!/usr/bin/env bash
# Session 19, device call 3: the GPU suites on this build's kernels (every sm_90a TMA kernel now
# prefetches its tensor maps; persistent kernels carry their block counts). Build them here first:
#   DIR=.gpu/s19/v docs/gpu/2026-12-04-s18/prepare.sh        (sm_90a and sm_80 bundles, tests.test)
# then carry .gpu/s19/v. sm_90a: forward, backward, device pointers, mod patterns, the driver's JIT
# warnings; sm_80 forced: forward and backward.
set -u
G=${G:-$(pwd)/.gpu/s19/v}
(cd $G && for f in *.gz; do gunzip -kf $f; done)
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle FAC_BUNDLE_EXTRA=$G/test-det-sm_90a.bundle:$G/test-patterns.bundle \
  timeout 300 $G/tests.test -test.run 'TestGPUMatchesReference|TestGPUBackwardMatchesReference|TestGPULaunchDevicePointers|TestGPUModPatterns' \
  -test.short -test.v -test.count=1 -test.timeout 8m) > $OUT/tests-sm_90a.log 2>&1
echo "tests sm_90a rc=$?"; grep -E "^(--- |FAIL|ok|PASS)" $OUT/tests-sm_90a.log | tail -8
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle timeout 100 $G/tests.test -test.run 'GPUNoJITPerformanceWarnings' \
  -test.v -test.count=1 -test.timeout 8m) > $OUT/jit.log 2>&1
echo "jit rc=$?"; tail -3 $OUT/jit.log
(cd tests && FAC_ARCH=sm_80 FAC_BUNDLE=$G/test-sm_80.bundle \
  timeout 180 $G/tests.test -test.run 'TestGPUMatchesReference|TestGPUBackwardMatchesReference' -test.short -test.v -test.count=1 -test.timeout 8m) > $OUT/tests-sm_80.log 2>&1
echo "tests sm_80 rc=$?"; grep -E "^(--- |FAIL|ok|PASS)" $OUT/tests-sm_80.log | tail -6
