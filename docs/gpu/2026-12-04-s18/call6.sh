#!/usr/bin/env bash
# Session 18, device call 6: the final build with the sm_80 path forced (its test bundle with
# the span kernels, .gpu/s18/f80, built by the final fac as prepare.sh builds it), forward and
# backward suites; and none at issue 11's long-context shape beside call 1's causal.
set -u
N=$(pwd)/.gpu/s18/f; E=$(pwd)/.gpu/s18/f80
(cd $E && gunzip -kf test-sm_80.bundle.gz); (cd $N && gunzip -kf bench.bundle.gz)
$N/fac bench --bundle $N/bench.bundle --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 \
  --mask none --mask causal 2>&1 | grep -E "^(none|causal)|rror" | cut -c1-100
(cd tests && FAC_ARCH=sm_80 FAC_BUNDLE=$E/test-sm_80.bundle \
  timeout 300 $N/tests.test -test.run 'TestGPUMatchesReference|TestGPUBackwardMatchesReference' -test.short -test.v -test.count=1 -test.timeout 8m) > $OUT/tests-sm_80.log 2>&1
echo "tests sm_80 rc=$?"
grep -E "^(--- |FAIL|ok|PASS)" $OUT/tests-sm_80.log | tail -6
