#!/usr/bin/env bash
# Session 17, device call 6: the final build (mask-range on selects of any constant, not on a
# range of the sequence end alone; .gpu/s17 from prepare.sh) against call 5's (597c4dd,
# .gpu/s17a): ptxas -v of the 84 forward kernels and of backward kernels (.gpu/s17p), forward and
# backward in turns, then the GPU suites on sm_90a (-test.short).
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
G=$(pwd)/.gpu/s17; A=$(pwd)/.gpu/s17a
cd $G && for f in *.bundle.gz; do gunzip -kf $f; done && tar xzf ptx.tgz && cd - >/dev/null
gunzip -kf $A/bench.bundle.gz
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
ls $G/ptx/*.ptx .gpu/s17p/*.ptx | xargs -P 16 -I{} sh -c 'echo "$(basename {} .ptx): $('$ptxas' -arch=sm_90a -v {} -o {}.cubin 2>&1 | grep -E "registers|spill|C75|rror" | tr "\n" " " | cut -c1-230)"' | sort > $OUT/ptxas.txt
echo "ptxas: $(grep -c . $OUT/ptxas.txt) kernels; with spills: $(grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | grep -c spill); C75: $(grep -c C75 $OUT/ptxas.txt)"
grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | cut -c1-150
grep '^bwd' $OUT/ptxas.txt | sed 's/ptxas info *: //' | cut -c1-150
F='^(none|causal|sliding|document|prefix)'
Bn() { echo "== $1"; shift; "$@" 2>&1 | grep -E "$F|rror" | cut -c1-80; }
for r in 1 2; do
  Bn "r$r call-5 build forward" $A/fac bench --seqlen 8192 --bundle $A/bench.bundle
  Bn "r$r final forward" $G/fac bench --seqlen 8192 --bundle $G/bench.bundle
  Bn "r$r call-5 build backward" $A/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $A/bench.bundle
  Bn "r$r final backward" $G/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $G/bench.bundle
done
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle FAC_BUNDLE_EXTRA=$G/test-det-sm_90a.bundle:$G/test-patterns.bundle \
  timeout 330 $G/tests.test -test.run 'GPU' -test.skip 'GPUNoJITPerformanceWarnings' -test.short -test.v -test.count=1 -test.timeout 8m) > $OUT/tests-sm_90a.log 2>&1
echo "tests sm_90a rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- (PASS|SKIP)" $OUT/tests-sm_90a.log | tail -30
