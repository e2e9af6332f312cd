#!/usr/bin/env bash
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for k in none causal; do ptxas -arch=sm_90a -v .gpu/p1/bwd_$k.ptx -o /tmp/bwd_$k.cubin 2>&1 | grep -E "registers|spill" | tr '\n' ' '; echo; cuobjdump -sass /tmp/bwd_$k.cubin | gzip > $OUT/bwd_$k.sass.gz; done
GPU_DIR=.gpu/p1 OUT=$OUT TOP=40 scripts/gpu-profile bwd-none flash_bwd --backward --mask none --seqlen 8192 2>&1 | tail -60
GPU_DIR=.gpu/p1b OUT=$OUT TOP=40 FAC_DQ_BULK=1 scripts/gpu-profile bwd-none-bulk flash_bwd --backward --mask none --seqlen 8192 2>&1 | tail -60
