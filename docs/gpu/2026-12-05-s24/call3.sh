#!/usr/bin/env bash
# Session 24, device call 3 (carry .gpu/s24b, built by prepare2.sh): the final defaults (D = 64's
# groups for none, causal, causal_bottom_right, prefix-LM with identity or softcap; heads_minor for
# document and sliding window at D = 128): ptxas -v of the 84 forward kernels, fac bench (D = 128
# S = 8192 five masks, two rounds; D = 64 H = 32 five masks; S = 32768 causal and sliding window,
# B = 1, H = 16), flex_bench.py flex in the same call, then the GPU forward suite on sm_90a
# (ROUNDS=1 one D = 128 round, SUITE=0 no suite: for a short call).
set -u
exec > >(tee $OUT/call3.txt) 2>&1
D=$(pwd)/.gpu/s24b; f=$D/fac
(cd $D && for x in *.gz; do gunzip -kf $x; done && tar xzf ptx.tgz)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
for p in $D/ptx/*.ptx; do
  echo "$(basename $p .ptx): $($ptxas -arch=sm_90a -v $p -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning|rror" | sed -E 's/ptxas (info|warning) *: //' | tr '\n' ' ' | cut -c1-200)"
done > $OUT/ptxas84.txt
echo "ptxas: $(ls $D/ptx/*.ptx | wc -l) kernels; spilling: $(grep -v ' 0 bytes spill stores, 0 bytes spill loads' $OUT/ptxas84.txt | grep -c spill); C75xx/warnings/errors: $(grep -cE 'C75|arning|rror' $OUT/ptxas84.txt)"
grep -v ' 0 bytes spill stores, 0 bytes spill loads' $OUT/ptxas84.txt | grep spill | cut -c1-150 | head
awk '{for(i=1;i<=NF;i++) if($i=="registers,") print $(i-1)}' $OUT/ptxas84.txt | sort -n | uniq -c | tr '\n' ' '; echo
F='^(none|causal|sliding|document|prefix)'
for r in $(seq ${ROUNDS:-2}); do
  echo "== r$r D=128 S=8192"; $f bench --bundle $D/bench.bundle --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
done
echo "== D=64 S=8192"; $f bench --bundle $D/d64g.bundle --dim 64 --heads 32 --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
echo "== S=32768"; $f bench --bundle $D/bench.bundle --mask causal --mask "sliding_window(1023, 0)" --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror" | cut -c1-100
(timeout 200 python3 $D/flex_bench.py flex > $OUT/flex.txt 2>&1; echo "flex rc=$?")
grep -E '"what": "(flex|gemm)' $OUT/flex.txt | python3 -c '
import json,sys
for l in sys.stdin:
    r=json.loads(l); print(r.get("what"), r.get("S"), r.get("mask"), round(r.get("fwd_tflops", r.get("tflops", 0)),1))'
[ "${SUITE:-1}" = 1 ] || exit 0
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$D/test-sm_90a.bundle FAC_BUNDLE_EXTRA=$D/test-det-sm_90a.bundle:$D/test-patterns.bundle \
  timeout ${SUITE_S:-150} $D/tests.test -test.run "${TESTRUN:-TestGPUMatchesReference}" -test.short -test.v -test.count=1 -test.timeout 8m) > $OUT/tests-sm_90a.log 2>&1
echo "tests sm_90a rc=$?"; grep -E "^(--- |FAIL|ok|PASS)" $OUT/tests-sm_90a.log | tail -8
