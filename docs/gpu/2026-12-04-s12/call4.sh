#!/usr/bin/env bash
# Session 12, device call 4: the forward and backward GPU suites (-test.short) with the sm80 path
# forced (kernels compiled for sm_80: mma.sync, cp.async), as issue 8 asks.
set -u
G=.gpu/s12
gunzip -kf $G/test-sm_80.bundle.gz
cd tests && FAC_ARCH=sm_80 FAC_BUNDLE=../$G/test-sm_80.bundle ../$G/tests.test -test.run 'GPUMatchesReference|GPUBackwardMatchesReference' \
  -test.v -test.count=1 -test.short -test.timeout 7m > /tmp/t.log 2>&1; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- PASS|largest relative|loaded [0-9]+ kernels" /tmp/t.log | tail -20
