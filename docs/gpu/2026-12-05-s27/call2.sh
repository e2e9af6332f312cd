#!/usr/bin/env bash
# Session 27, device call 2. On an H200 (carry .gpu/s26p): the GPU suite on the sm_90a path, ptxas
# -v, and issue 11's long-context points (S = 8192, 32768, 131072; per-kept-block ratios; fac run
# at S = 131072 on sampled rows). On an H100 (carry .gpu/s27-80): the GPU suite with the sm_80 path
# forced (the same fac and tests.test; sm_80 bundles built by this session's prepare.sh).
set -u
exec > >(tee "$OUT/call2.txt") 2>&1
gpu=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader); echo "$gpu"
if [[ $gpu == *H200* ]]; then
  GPU_DIR=.gpu/s26p ARCHS=sm_90a timeout 580 scripts/gpu-acceptance tests ptxas long
else
  GPU_DIR=.gpu/s27-80 ARCHS=sm_80 timeout 580 scripts/gpu-acceptance tests
fi
echo "call2 rc=$?"
