#!/usr/bin/env bash
# Session 28, call 5 (carry .gpu/s29, rebuilt with the new default: the varlen forward tuned as
# flash_fwd, packed loads on TMA, a producer warpgroup, three K/V buffers at D = 128), on the
# device time left: the one schedule call 4 did not run (packed_loads=false, now with the
# producer argument on but off in codegen, and three buffers), then the default's varlen row
# beside the dense document row. (Call 4 ran the new default's exact kernels as "producer"/"ws3",
# and its default is now the no-producer schedule.)
set -u
export GPU_DIR=.gpu/s29 ARCHS=sm_90a
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
TESTRUN='GPUVarlenUnpacked' timeout 120 scripts/gpu-acceptance tests >/dev/null; echo "tests rc=$?"
grep -E "^(--- |ok|FAIL|PASS)|Error|error" $OUT/gpu-test-sm_90a.log | head -10
D=.gpu/s29
timeout 40 $D/fac bench --varlen-len 1000 --tokens 16384 --mask none --mask causal --bundle $D/test-patterns.bundle 2>&1 | grep -E '^(none|causal)|rror'
timeout 30 $D/fac bench --bundle $D/bench-sm_90a.bundle --seqlen 8192 --mask document 2>&1 | grep -E '^document|rror'
