#!/usr/bin/env bash
# Session 28, call 2 (carry .gpu/s28, on the H200 call 1 left warm): issue 8's forward table, D = 64,
# decoding, and flex_bench.py in one call. (decode_bench.py ran too, but its lines went to
# /dev/null and its file did not come back: call 3 reruns it.)
export GPU_DIR=.gpu/s28 ARCHS=sm_90a
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 560 scripts/gpu-acceptance fwd-bench d64 decode flex >/dev/null 2>&1; echo rc=$?
cd $OUT && ls
for f in *.txt; do echo "=== $f"; grep -vE '^(no llc|device:|compile)' $f | grep -E 'TFLOPS|TB/s|^[a-z_]+.*[0-9]|rror' | cut -c1-140 | head -40; done
