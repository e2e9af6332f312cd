#!/usr/bin/env bash
# The next session's first device call (carry .gpu/s28, built by prepare.sh), any card:
# 1. packed_loads on the GPU: the varlen suites (TestGPUVarlenMatchesReference, ...PackedLoads,
#    ...Long, ...Backward) and `gpu-acceptance varlen` (default, three packed schedules, the dense
#    document row) — issue 11's last point;
# 2. sliding window and document on 64×64 tiles, two CTAs a multiprocessor (m64s2, m64s3), against
#    the default in turns, S = 8192 (B = 2) and S = 32768 (B = 1) — issue 8's last point;
#    then GPU checks of the m64 kernels at odd lengths with GQA.
set -u
exec > >(tee "$OUT/call1.txt") 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
export GPU_DIR=.gpu/s28 ARCHS=sm_90a
D=$(pwd)/.gpu/s28; f=$D/fac; F='^(none|causal|sliding|document)'
TESTRUN=GPUVarlen timeout 240 scripts/gpu-acceptance smoke tests; echo "tests rc=$?"
grep -E "^(--- |ok|FAIL|PASS)|checked" $OUT/gpu-test-sm_90a.log | head -30
timeout 90 scripts/gpu-acceptance varlen 2>&1 | grep -E "$F|rror"; echo "varlen rc=$?"
(cd $D && for x in m64s*.bundle.gz; do gunzip -kf $x; done)
SW="sliding_window(1023, 0)"
C="--const BLOCK_M=64 --const BLOCK_N=64 --const num_warps=4 --const overlap=true --const lazy_rescale=true --const fold_scale=true --const heads_minor=true --const heads_group=16"
for r in 1 2; do
  echo "== r$r default"; timeout 60 $f bench --bundle $D/bench-sm_90a.bundle --mask "$SW" --mask document --seqlen 8192 2>&1 | grep -E "$F|rror"
  for s in 2 3; do
    echo "== r$r m64s$s"; timeout 60 $f bench --bundle $D/m64s$s.bundle --block 64 $C --const num_stages=$s --mask "$SW" --mask document --seqlen 8192 2>&1 | grep -E "$F|rror"
  done
  echo "== r$r S=32768 default / m64s3"
  timeout 60 $f bench --bundle $D/bench-sm_90a.bundle --mask "$SW" --seqlen 32768 --batch 1 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror"
  timeout 60 $f bench --bundle $D/m64s3.bundle --block 64 $C --const num_stages=3 --mask "$SW" --seqlen 32768 --batch 1 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror"
done
for s in 2 3; do for m in "sliding_window(20, 3)" "$SW" document; do
  timeout 60 $f run --device cuda --bundle $D/m64s$s.bundle --block 64 $C --const num_stages=$s --mask "$m" --random-aux --doc-len 300 \
    --dtype bf16 --dim 128 --batch 3 --heads 12 --kv-heads 4 --seqlen-q 1537 --seqlen-k 1000 2>&1 | tail -1
done; done
