#!/usr/bin/env bash
# Session 31's third call (carry .gpu/s33, built by prepare80.sh): the forward GPU acceptance suite
# with the sm_80 path forced (FAC_ARCH=sm_80) on the final build, then the whole GPU suite on it.
set -u
exec > >(tee "$OUT/call80.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader
export GPU_DIR=.gpu/s33 ARCHS=sm_80
SECONDS=0
TESTRUN='GPUMatchesReference|GPUNoJIT' TESTFLAGS= timeout 240 scripts/gpu-acceptance tests; echo "forward tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- PASS: TestGPU[A-Za-z]+ " $OUT/gpu-test-sm_80.log | head -20
mv $OUT/gpu-test-sm_80.log $OUT/gpu-test-sm_80-fwd.log
echo "## t=$SECONDS"
TESTFLAGS= timeout 300 scripts/gpu-acceptance tests; echo "all GPU tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- PASS: TestGPU[A-Za-z]+ " $OUT/gpu-test-sm_80.log | head -40
echo "## t=$SECONDS"
