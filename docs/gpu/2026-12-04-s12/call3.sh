#!/usr/bin/env bash
# Session 12, device call 3: the default forward and backward (fac bench) beside FlexAttention
# (flex_bench.py, a copy of ../shared/bench/flex_bench.py) in the same call.
set -u
G=.gpu/s12
for f in $G/*.bundle.gz; do gunzip -kf $f; done
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=../$G/test-sm_90a.bundle FAC_BUNDLE_EXTRA=../$G/test-det-sm_90a.bundle:../$G/test-patterns.bundle \
  ../$G/tests.test -test.run 'GPUSinksBackward|GPUVarlenBackward' -test.v -test.count=1 -test.short -test.timeout 4m > /tmp/t.log 2>&1; echo "tests rc=$?"
  grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- PASS|largest relative|_test.go" /tmp/t.log | tail -20)
echo "== forward (default)"; $G/fac bench --bundle $G/tuned.bundle 2>&1 | grep -v "^no llc"
echo "== backward (default)"; $G/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $G/bwd-new.bundle 2>&1 | grep -v "^no llc"
echo "== FlexAttention"; PYTHONUNBUFFERED=1 timeout 400 python3 $G/flex_bench.py flex > /tmp/flex.txt 2>&1; echo "flex rc=$?"; tail -16 /tmp/flex.txt
