#!/usr/bin/env bash
# Session 13, device calls 5 (argument tests) and 6 (argument bench) on the shipped build. tests: the
# GPU suites (-test.short) on the sm90 path — forward, backward (chunked dQ, red.v2), deterministic,
# sinks and varlen backward — and ptxas -v of the forward. bench: the default forward and backward
# (fac bench) beside FlexAttention (flex_bench.py, a copy of ../shared/bench/flex_bench.py).
set -u
G=$(pwd)/.gpu/s13f
for f in $G/*.bundle.gz; do gunzip -kf $f; done
if [ "${1:-}" = tests ]; then
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle FAC_BUNDLE_EXTRA=$G/test-det-sm_90a.bundle:$G/test-patterns.bundle \
  $G/tests.test -test.run 'GPUMatchesReference|GPUBackward|GPUSinksBackward|GPUVarlenBackward' -test.v -test.count=1 -test.short -test.timeout 6m > /tmp/t.log 2>&1; echo "tests rc=$?"
  grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- PASS|largest relative" /tmp/t.log | cut -c1-200 | tail -24)
for p in $G/ptx/*.ptx; do
  echo "$(basename $p): $(ptxas -arch=sm_90a -v $p -o /tmp/x.cubin 2>&1 | grep -E 'registers|spill|C75|error' | tr '\n' ' ' | sed 's/ptxas info    ://g' | cut -c1-160)"
done
exit 0
fi
for p in $G/ptx/*.ptx $G/ptxA/*.ptx; do
  echo "$(basename $(dirname $p))/$(basename $p): $(ptxas -arch=sm_90a -v $p -o /tmp/x.cubin 2>&1 | grep -E 'spill|C75|error' | tr '\n' ' ' | sed 's/ptxas info    ://g' | cut -c1-120)"
done
F='^(none|causal|sliding|document|prefix)'
echo "== forward (default)"; $G/fac bench --bundle $G/bench-sm_90a.bundle 2>&1 | grep -E "$F" | cut -c1-75
echo "== backward (default)"; $G/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $G/bench-sm_90a.bundle 2>&1 | grep -E "$F" | cut -c1-75
echo "== FlexAttention"; PYTHONUNBUFFERED=1 timeout 300 python3 $G/flex_bench.py flex > /tmp/flex.txt 2>&1; echo "flex rc=$?"; tail -6 /tmp/flex.txt
