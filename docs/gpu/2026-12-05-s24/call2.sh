#!/usr/bin/env bash
# Session 24, device call 2 (carry .gpu/s24, built by prepare.sh): the GPU suite on the new defaults,
# sm_90a (forward, backward, device pointers, mod patterns: the first half of session 19's
# call3.sh). The sm_80 path is not rerun: with FAC_ARCH=sm_80 no tuned set applies, and its kernels
# are those of the last run (SM80=1 runs it anyway).
set -u
G=$(pwd)/.gpu/s24
(cd $G && for f in *.gz; do gunzip -kf $f; done)
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle FAC_BUNDLE_EXTRA=$G/test-det-sm_90a.bundle:$G/test-patterns.bundle \
  timeout 330 $G/tests.test -test.run 'TestGPUMatchesReference|TestGPUBackwardMatchesReference|TestGPULaunchDevicePointers|TestGPUModPatterns' \
  -test.short -test.v -test.count=1 -test.timeout 8m) > $OUT/tests-sm_90a.log 2>&1
echo "tests sm_90a rc=$?"; grep -E "^(--- |FAIL|ok|PASS)" $OUT/tests-sm_90a.log | tail -8
grep -E "largest|loaded [0-9]+ kernels" $OUT/tests-sm_90a.log | tail -3
if [ "${SM80:-}" = 1 ]; then
  (cd tests && FAC_ARCH=sm_80 FAC_BUNDLE=$G/test-sm_80.bundle \
    timeout 180 $G/tests.test -test.run 'TestGPUMatchesReference|TestGPUBackwardMatchesReference' -test.short -test.v -test.count=1 -test.timeout 8m) > $OUT/tests-sm_80.log 2>&1
  echo "tests sm_80 rc=$?"; grep -E "^(--- |FAIL|ok|PASS)" $OUT/tests-sm_80.log | tail -6
fi
