#!/usr/bin/env bash
# Session 30's final call (carry .gpu/s32, built by prepare.sh): issue 8 on the new defaults.
# ptxas -v of every stdlib mask × score (ptx/) and of the two-CTA tiles on the masks and scores
# fwdTwoCTAs does not name yet (ptx3/); issue 8's table (fac bench, S = 8192 and 2048), D = 64,
# the previous defaults beside the new ones (old-sw, old-d64) and the two-CTA document, long
# sliding windows (S = 32768, B = 16), flex_bench.py; then the forward GPU suite on sm_90a.
set -u
exec > >(tee "$OUT/callB.txt") 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
export GPU_DIR=.gpu/s32 ARCHS=sm_90a
D=$(pwd)/.gpu/s32; f=$D/fac; F='^(none|causal|prefix|sliding|document)'
SECONDS=0
(cd $D && for x in *.bundle.gz ptx/*.gz; do gunzip -kf $x; done)
scripts/gpu-acceptance ptxas 2>&1 | sed -E 's/ptxas info *: //g' | grep -E "flash_fwd" | grep -vE ": Used [0-9]+ registers, used [0-9]+ barriers( [0-9]+ bytes smem)?, [0-9]+ bytes cmem\[0\]" | cut -c1-220
echo "## spills or C75 in ptx/:"; grep -E "spill (stores|loads)" $OUT/ptxas.txt | grep -vE " 0 bytes spill stores, 0 bytes spill loads" | cut -c1-200; grep -c C75 $OUT/ptxas.txt
grep -E "flash_fwd_d(64_causal|128_sliding)_identity" $OUT/ptxas.txt | sed -E 's/ptxas info *: //g' | cut -c1-220
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
for p in $D/ptx3/*.ptx; do echo "== $(basename $p) $($ptxas -arch=sm_90a -c -v $p -o /dev/null 2>&1 | grep -E 'registers|spill|C75' | tr '\n' ' ' | sed -E 's/ptxas info *: //g')"; done
echo "## t=$SECONDS"
b() { local name=$1; shift; echo "== $name"; timeout 90 "$@" 2>&1 | grep -E "$F|rror"; }
round() {
  local r=$1
  b "r$r issue 8 table (new defaults)" $f bench --bundle $D/bench-sm_90a.bundle
  b "r$r D=64 (new defaults)" $f bench --bundle $D/bench-d64-sm_90a.bundle --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal
  b "r$r old sliding window (fwdHeadsMinor), document" $f bench --bundle $D/old-sw.bundle --const ctas_per_sm=1 --seqlen 8192 --mask "sliding_window(1023, 0)" --mask document
  b "r$r D=64 old (heads-major)" $f bench --bundle $D/old-d64.bundle --const heads_minor=false --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal
  b "r$r two-CTA document" $f bench --bundle $D/c2n-doc.bundle --const BLOCK_M=128 --const BLOCK_N=64 --const num_warps=8 --const ctas_per_sm=2 --const SPARSE_Q=128 --const SPARSE_K=64 --const num_stages=2 --const warp_specialize=false --const overlap=false --const heads_minor=true --const heads_group=16 --const lazy_rescale=true --const fold_scale=true --seqlen 8192 --mask document
}
round 1
echo "## t=$SECONDS"
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
