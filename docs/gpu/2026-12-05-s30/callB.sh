#!/usr/bin/env bash
# Session 30's final call (carry .gpu/s32, built by prepare.sh): issue 8 on the new defaults, most
# needed first, so that a call cut short by the device budget keeps them: round 1 (issue 8's table
# with fac bench, D = 64, and the previous defaults: old-sw, old-d64); ptxas -v of the kernels whose
# defaults changed and of the two-CTA tiles on the masks and scores fwdTwoCTAs does not name yet
# (ptx3/); flex_bench.py; the forward GPU suite on sm_90a; round 2 (with the two-CTA document); long
# sliding windows (S = 32768, B = 16) new against old.
set -u
exec > >(tee "$OUT/callB.txt") 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
export GPU_DIR=.gpu/s32 ARCHS=sm_90a
D=$(pwd)/.gpu/s32; f=$D/fac; F='^(none|causal|prefix|sliding|document)'
SECONDS=0
(cd $D && for x in bench-sm_90a bench-d64-sm_90a old-sw old-d64 c2n-doc test-sm_90a test-det-sm_90a test-patterns; do gunzip -kf $x.bundle.gz; done)
b() { local name=$1; shift; echo "== $name"; timeout 90 "$@" 2>&1 | grep -E "$F|rror"; }
round() {
  local r=$1
  b "r$r issue 8 table (new defaults)" $f bench --bundle $D/bench-sm_90a.bundle
  b "r$r D=64 (new defaults)" $f bench --bundle $D/bench-d64-sm_90a.bundle --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal
  b "r$r old sliding window (fwdHeadsMinor), document" $f bench --bundle $D/old-sw.bundle --const ctas_per_sm=1 --seqlen 8192 --mask "sliding_window(1023, 0)" --mask document
  b "r$r D=64 old (heads-major)" $f bench --bundle $D/old-d64.bundle --const heads_minor=false --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal
  [ $r = 1 ] && return
  b "r$r two-CTA document" $f bench --bundle $D/c2n-doc.bundle --const BLOCK_M=128 --const BLOCK_N=64 --const num_warps=8 --const ctas_per_sm=2 --const SPARSE_Q=128 --const SPARSE_K=64 --const num_stages=2 --const warp_specialize=false --const overlap=false --const heads_minor=true --const heads_group=16 --const lazy_rescale=true --const fold_scale=true --seqlen 8192 --mask document
}
round 1
echo "## t=$SECONDS"
# ptxas -v of the kernels whose defaults changed (sliding window at D = 128; causal-shaped masks at
# D = 64), every stdlib score; and of the two-CTA tiles on the masks and scores fwdTwoCTAs does not
# name yet (ptx3/). The other forward and backward kernels are those of session 28's passing check.
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
(cd $D/ptx && for x in flash_fwd_d128_sliding_window_*.gz flash_fwd_d64_causal*.gz flash_fwd_d64_prefix_lm_*.gz; do gunzip -kf $x; done)
ls $D/ptx/flash_fwd_d128_sliding_window_*.ptx $D/ptx/flash_fwd_d64_causal*.ptx $D/ptx/flash_fwd_d64_prefix_lm_*.ptx $D/ptx3/*.ptx | xargs -P 16 -I{} sh -c \
  'f={}; c=-c; grep -q setmaxnreg "$f" && c=; echo "$(basename $f .ptx): $($0 -arch=sm_90a $c -v $f -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning" | sed -E "s/ptxas info *: //g" | tr "\n" " ")"' $ptxas | sort | cut -c1-260
echo "## t=$SECONDS"
PYTHONUNBUFFERED=1 timeout 150 python3 $D/flex_bench.py flex 2>&1 | grep -E "S=(8192|2048)" | cut -c1-140
echo "## t=$SECONDS"
TESTRUN='GPUMatchesReference|GPUNoJIT' TESTFLAGS= timeout 200 scripts/gpu-acceptance tests; echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- PASS: TestGPU[A-Za-z]+ " $OUT/gpu-test-sm_90a.log | head -20
echo "## t=$SECONDS"
round 2
echo "## t=$SECONDS"
b "S=32768 new" $f bench --bundle $D/bench-sm_90a.bundle --seqlen 32768 --tokens 32768 --mask "sliding_window(1023, 0)" --warmup 2 --reps 5
b "S=32768 old" $f bench --bundle $D/old-sw.bundle --const ctas_per_sm=1 --seqlen 32768 --tokens 32768 --mask "sliding_window(1023, 0)" --warmup 2 --reps 5
b "B=16 new" $f bench --bundle $D/bench-sm_90a.bundle --seqlen 8192 --tokens 131072 --mask "sliding_window(1023, 0)" --warmup 2 --reps 5
b "B=16 old" $f bench --bundle $D/old-sw.bundle --const ctas_per_sm=1 --seqlen 8192 --tokens 131072 --mask "sliding_window(1023, 0)" --warmup 2 --reps 5
echo "## t=$SECONDS"
