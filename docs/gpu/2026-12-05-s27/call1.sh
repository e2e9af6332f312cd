#!/usr/bin/env bash
# Session 27, device call 1 (carry .gpu/s26p: session 26's final kernels, sm_90a). What it runs
# depends on the card that came: on an H200, issue 8's and 11's speed points beside the anchors
# (smoke, issue 8's table, flex_bench.py, decoding beside decode_bench.py, the D = 64 anchors);
# on an H100, the card-independent checks instead (the GPU suite on the sm_90a path, ptxas -v).
set -u
exec > >(tee "$OUT/call1.txt") 2>&1
gpu=$(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader); echo "$gpu"
export GPU_DIR=.gpu/s26p ARCHS=sm_90a
if [[ $gpu == *H200* ]]; then
  timeout 570 scripts/gpu-acceptance smoke fwd-bench flex decode d64
else
  timeout 570 scripts/gpu-acceptance smoke tests ptxas
fi
echo "call1 rc=$?"
