#!/usr/bin/env bash
# Session 17, device call 8: the shipped rule (a range of the sequence end alone stays a per-column
# compare; beside another conjunct it is rewritten; .gpu/s17r) against call 6's build (.gpu/s17):
# ptxas -v of the 84 forward and 10 backward kernels, forward and backward in turns, then
# TestGPUMatchesReference with the sm_80 path forced (-test.short) for what time is left.
set -u
R=$(pwd)/.gpu/s17r; G=$(pwd)/.gpu/s17g
gunzip -kf $R/bench.bundle.gz; gunzip -kf $G/bench.bundle.gz; cd $R && tar xzf ptx.tgz && cd - >/dev/null
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
ls $R/ptx/*.ptx | xargs -P 16 -I{} sh -c 'echo "$(basename {} .ptx): $('$ptxas' -arch=sm_90a -v {} -o {}.cubin 2>&1 | grep -E "registers|spill|C75|rror" | tr "\n" " " | cut -c1-230)"' | sort > $OUT/ptxas-call8.txt
echo "ptxas: $(grep -c . $OUT/ptxas-call8.txt) kernels; with spills: $(grep -v ' 0 bytes spill stores' $OUT/ptxas-call8.txt | grep -c spill); C75: $(grep -c C75 $OUT/ptxas-call8.txt)"
grep -v ' 0 bytes spill stores' $OUT/ptxas-call8.txt | cut -c1-150
grep '^bwd' $OUT/ptxas-call8.txt | sed 's/ptxas info *: //' | cut -c1-120
F='^(none|causal|sliding|document|prefix)'
Bn() { echo "== $1"; shift; "$@" 2>&1 | grep -E "$F|rror" | cut -c1-80; }
Bn "call-6 build forward" $G/fac bench --seqlen 8192 --bundle $G/bench.bundle
Bn "shipped forward" $R/fac bench --seqlen 8192 --bundle $R/bench.bundle
Bn "call-6 build backward" $G/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $G/bench.bundle
Bn "shipped backward" $R/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $R/bench.bundle
Bn "shipped forward again" $R/fac bench --seqlen 8192 --bundle $R/bench.bundle
gunzip -kf $R/test-sm_80.bundle.gz
(cd tests && FAC_ARCH=sm_80 FAC_BUNDLE=$R/test-sm_80.bundle timeout ${TLEFT:-120} $G/tests.test -test.run 'GPUMatchesReference$' -test.short -test.v -test.count=1) > $OUT/tests-sm_80.log 2>&1
echo "tests sm_80 rc=$?"; grep -cE "rel [0-9]" $OUT/tests-sm_80.log; grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- PASS|FAIL:" $OUT/tests-sm_80.log | tail -8
