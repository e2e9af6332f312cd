#!/usr/bin/env bash
# Session 17, device call 5: the shipped kernels (597c4dd, .gpu/s17 from prepare.sh): ptxas -v of
# the 84 forward kernels, HGMMA/UTMALDG in the tuned kernel's SASS, fac bench (forward at S = 8192,
# 2048, D = 64; backward) beside flex_bench.py in one call, the forward again after Flex, and the
# JIT's performance-warning check. Also mask-range on the backward's P select (V, branch
# s17-bwd-range, .gpu/s17bwd): ptxas -v of its backward kernels against main's, backward in turns.
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
G=$(pwd)/.gpu/s17
cd $G && for f in *.bundle.gz; do gunzip -kf $f; done && tar xzf ptx.tgz && cd - >/dev/null
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
cuobjdump=$(dirname $ptxas)/cuobjdump
ls $G/ptx/*.ptx | xargs -P 16 -I{} sh -c 'echo "$(basename {} .ptx): $('$ptxas' -arch=sm_90a -v {} -o {}.cubin 2>&1 | grep -E "registers|spill|C75|rror" | tr "\n" " " | cut -c1-230)"' | sort > $OUT/ptxas.txt
echo "ptxas: $(grep -c . $OUT/ptxas.txt) kernels; with spills: $(grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | grep -c spill); C75: $(grep -c C75 $OUT/ptxas.txt)"
grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | cut -c1-150
k=$G/ptx/fwd_sliding_window_20__3__identity_bf16_d128.ptx.cubin; [ -f $k ] || k=$(ls $G/ptx/*bf16_d128.ptx.cubin | head -1)
echo "SASS of $(basename $k): $($cuobjdump --dump-sass $k | grep -oE 'HGMMA|UTMALDG|UTMAPF|SYNCS' | sort | uniq -c | tr '\n' ' ')"
V=$(pwd)/.gpu/s17bwd; gunzip -kf $V/bench.bundle.gz
for p in $V/ptx/*.ptx; do echo "$(basename $p): $($ptxas -arch=sm_90a -v $p -o /tmp/b.cubin 2>&1 | grep -E 'registers|spill|C75' | tr '\n' ' ' | cut -c1-160)"; done
F='^(none|causal|sliding|document|prefix)'
Bn() { echo "== $1"; shift; "$@" 2>&1 | grep -E "$F|rror" | cut -c1-80; }
Bn "forward S=8192" $G/fac bench --seqlen 8192 --bundle $G/bench.bundle
Bn "forward S=2048" $G/fac bench --seqlen 2048 --bundle $G/bench.bundle
Bn "forward D=64" $G/fac bench --seqlen 8192 --dim 64 --heads 32 --batch 2 --mask none --mask causal --bundle $G/d64.bundle
Bn "backward S=8192" $G/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $G/bench.bundle
Bn "backward V S=8192" $V/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $V/bench.bundle
echo "== FlexAttention"; PYTHONUNBUFFERED=1 timeout 300 python3 $G/flex_bench.py flex > $OUT/flex.txt 2>&1; echo "flex rc=$?"; grep -E "^what=flex S=(8192|2048)" $OUT/flex.txt | sed "s/ first_call.*//" | cut -c1-200
Bn "forward S=8192 again" $G/fac bench --seqlen 8192 --bundle $G/bench.bundle
Bn "forward S=2048 again" $G/fac bench --seqlen 2048 --bundle $G/bench.bundle
Bn "backward V again" $V/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $V/bench.bundle
Bn "backward again" $G/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $G/bench.bundle
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle timeout 150 $G/tests.test -test.run 'GPUNoJITPerformanceWarnings' -test.count=1 -test.timeout 8m) > $OUT/jit.log 2>&1
echo "jit rc=$?"; tail -3 $OUT/jit.log | cut -c1-300
