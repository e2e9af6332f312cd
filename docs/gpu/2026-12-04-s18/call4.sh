#!/usr/bin/env bash
# Session 18, device call 4: the final build (.gpu/s18/f, prepare.sh with DIR=.gpu/s18/f
# ARCHS=sm_90a: document runs as spans) against HEAD at the session's start (.gpu/s18/old: its
# fac and bench bundle), beside flex_bench.py; ptxas -v of the 84 forward kernels and of the span
# kernels (.gpu/s18/fb); the sm_90a forward and backward suites on the final build.
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
N=$(pwd)/.gpu/s18/f; O=$(pwd)/.gpu/s18/old
for d in $N $O; do (cd $d && for f in *.gz; do gunzip -kf $f; done); done
(cd $N && tar xzf ptx.tgz)
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
ls $N/ptx/*.ptx .gpu/s18/fb/*.ptx | xargs -P 16 -I{} sh -c 'echo "$(basename {} .ptx): $('$ptxas' -arch=sm_90a -v {} -o {}.cubin 2>&1 | grep -E "registers|spill|C75|rror" | tr "\n" " " | cut -c1-230)"' | sort > $OUT/ptxas.txt
echo "ptxas: $(grep -c . $OUT/ptxas.txt) kernels; with spills: $(grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | grep -c spill); C75: $(grep -c C75 $OUT/ptxas.txt)"
grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | cut -c1-160
grep -E '^(bwd|fwd_document_spans)' $OUT/ptxas.txt | sed -E 's/ptxas info *: //g; s/bytes stack frame, //' | cut -c1-170
echo "== run document (spans path) 1537x1537 and 1000x4097"
for sq in 1537 1000; do sk=$sq; [ $sq = 1000 ] && sk=4097
  $N/fac run --device cuda --bundle $N/bench.bundle --mask document --random-aux --doc-len 300 --seqlen-q $sq --seqlen-k $sk \
    --dim 128 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 --backward 2>&1 | grep -E "check|rror" | cut -c1-120
done
F='^(none|causal|sliding|document|prefix|and_masks)'
Bn() { echo "== $1"; shift; "$@" 2>&1 | grep -E "$F|rror" | cut -c1-80; }
for r in 1 2; do
  Bn "r$r start forward" $O/fac bench --seqlen 8192,2048 --bundle $O/bench.bundle
  Bn "r$r final forward" $N/fac bench --seqlen 8192,2048 --bundle $N/bench.bundle
done
Bn "start backward" $O/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $O/bench.bundle
Bn "final backward" $N/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $N/bench.bundle
for b in O N; do eval d=\$$b
  Bn "$b causal document" $d/fac bench --mask "and_masks(causal, document)" --seqlen 8192 --bundle $d/cd.bundle
  Bn "$b causal document backward" $d/fac bench --backward --mask "and_masks(causal, document)" --seqlen 8192 --warmup 3 --reps 10 --bundle $d/cd.bundle
  Bn "$b D=64 document" $d/fac bench --mask document --dim 64 --heads 32 --seqlen 8192 --bundle $d/d64.bundle
done
echo "== flex"
timeout 300 python3 $N/flex_bench.py flex 2>&1 | grep -E '^what=flex|rror' | cut -c1-200
Bn "final forward after flex" $N/fac bench --seqlen 8192 --bundle $N/bench.bundle
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$N/test-sm_90a.bundle FAC_BUNDLE_EXTRA=$N/test-det-sm_90a.bundle:$N/test-patterns.bundle \
  timeout 240 $N/tests.test -test.run 'TestGPUMatchesReference|TestGPUBackwardMatchesReference' -test.short -test.v -test.count=1 -test.timeout 8m) > $OUT/tests-sm_90a.log 2>&1
echo "tests sm_90a rc=$?"
grep -E "^(--- |FAIL|ok|PASS)" $OUT/tests-sm_90a.log | tail -6
