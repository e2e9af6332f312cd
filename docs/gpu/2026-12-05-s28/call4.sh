#!/usr/bin/env bash
# Session 28, call 4 (carry .gpu/s29, rebuilt after the fix: CompileForwardVarlen now passes
# Options.Arch, so the varlen forward gets its tuned 128×128 set on the GPU; before, every varlen
# figure was the untuned 64×64 kernel): the varlen forward suites (default, unpacked, producer;
# long), then `gpu-acceptance varlen`.
set -u
export GPU_DIR=.gpu/s29 ARCHS=sm_90a
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
TESTRUN='GPUVarlen(MatchesReference|Unpacked|Producer|Long)' timeout 300 scripts/gpu-acceptance tests >/dev/null; echo "tests rc=$?"
grep -E "^(--- |ok|FAIL|PASS)|checked|Error|error" $OUT/gpu-test-sm_90a.log | head -30
timeout 150 scripts/gpu-acceptance varlen >/dev/null 2>&1; echo "varlen rc=$?"
for f in $OUT/bench-varlen*.txt; do echo "== $f"; grep -E '^(none|causal|document)|rror' $f; done
