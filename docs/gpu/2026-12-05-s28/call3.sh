#!/usr/bin/env bash
# Session 28, call 3 (carry .gpu/s29: fac, tests.test, test-patterns.bundle for sm_90a built at
# the packed_loads default; the dense bench and test bundles copied from .gpu/s28, unchanged):
# the varlen GPU suites on the new default, `gpu-acceptance varlen` (default beside the
# other schedules and the dense document row), then decoding beside decode_bench.py.
set -u
export GPU_DIR=.gpu/s29 ARCHS=sm_90a
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
TESTRUN=GPUVarlen timeout 300 scripts/gpu-acceptance tests >/dev/null; echo "tests rc=$?"
grep -E "^(--- |ok|FAIL|PASS)|checked" $OUT/gpu-test-sm_90a.log | head -30
timeout 120 scripts/gpu-acceptance varlen >/dev/null 2>&1; echo "varlen rc=$?"
for f in $OUT/bench-varlen*.txt; do echo "== $f"; grep -E '^(none|causal|document)' $f; done
timeout 150 scripts/gpu-acceptance decode >/dev/null 2>&1; echo "decode rc=$?"
for f in $OUT/bench-decode*.txt; do echo "== $f"; grep -E '^(none|decode_window)' $f; done
grep -E 'what=|decode_|TB/s' $OUT/decode-anchors.txt | cut -c1-200
