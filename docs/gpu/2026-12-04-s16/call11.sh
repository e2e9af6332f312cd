#!/usr/bin/env bash
# Session 16, device call 11: one select per mask select (mov.pred on -inf selects of and/or
# conditions; the backward's PTX is byte-identical): ptxas -v of the forward matrix, the forward
# timed against the shipped build in turns, TestGPUMatchesReference on it.
set -u
cd .gpu/m3 && gunzip -kf bench.bundle.gz test.bundle.gz && tar xzf ptx.tgz && cd ../..
cd .gpu/fin16 && gunzip -kf bench.bundle.gz && cd ../..
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
ls .gpu/m3/ptx/*.ptx | xargs -P 16 -I{} sh -c 'echo "$(basename {} .ptx): $('$ptxas' -arch=sm_90a -v {} -o /tmp/$(basename {}).cubin 2>&1 | grep -E "spill|C75|rror" | tr "\n" " " | cut -c1-200)"' | sort > $OUT/ptxas.txt
echo "ptxas: $(grep -c . $OUT/ptxas.txt) kernels; with spills: $(grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | grep -c spill); C75: $(grep -c C75 $OUT/ptxas.txt)"
grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | cut -c1-150
F='^(none|causal|sliding|document|prefix)'
B() { echo "== $1"; shift; "$@" 2>&1 | grep -E "$F" | cut -c1-80; }
for r in 1 2; do
  B "r$r shipped 8k" .gpu/fin16/fac bench --seqlen 8192 --bundle .gpu/fin16/bench.bundle
  B "r$r one-select 8k" .gpu/m3/fac bench --seqlen 8192 --bundle .gpu/m3/bench.bundle
done
B "shipped 2k" .gpu/fin16/fac bench --seqlen 2048 --bundle .gpu/fin16/bench.bundle
B "one-select 2k" .gpu/m3/fac bench --seqlen 2048 --bundle .gpu/m3/bench.bundle
G=$(pwd)/.gpu
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/m3/test.bundle timeout 150 $G/t/tests.test -test.run 'GPUMatchesReference|GPULaunchDevicePointers' -test.short -test.v -test.count=1) > $OUT/tests.log 2>&1
echo "tests rc=$?"; grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- (PASS|SKIP)" $OUT/tests.log | tail
