#!/usr/bin/env bash
# Session 18, device call 2: the document mask as per-row spans (a user mask, document_spans:
# kv_idx in [doc_start[q_idx], doc_end[q_idx]), which mask-range turns into one range per row)
# against document (doc[q_idx] == doc[kv_idx]) on the same documents: correctness on odd
# lengths, ptxas -v, forward and backward time (.gpu/s18/spans, built on branch s18-spans).
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
S=$(pwd)/.gpu/s18/spans
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
for p in $S/*.ptx; do echo "$(basename $p): $($ptxas -arch=sm_90a -v $p -o /dev/null 2>&1 | grep -E 'registers|spill|C75' | tr '\n' ' ' | cut -c1-200)"; done
for n in 1537 1000; do for d in 128 64; do
  b=$S/spans.bundle; [ $d = 64 ] && b=$S/spans64.bundle
  echo "== run spans n=$n d=$d"
  $S/fac run --device cuda $S/spans.fa --bundle $b --mask document_spans --aux doc_start=$S/start$n.npy --aux doc_end=$S/end$n.npy \
    --seqlen-q $n --seqlen-k $n --dim $d --heads 4 --kv-heads 2 --batch 2 --dtype bf16 --backward 2>&1 | grep -E "check|rror|max" | cut -c1-120
  echo "== run document n=$n d=$d"
  $S/fac run --device cuda $S/spans.fa --bundle $b --mask document --aux doc=$S/doc$n.npy \
    --seqlen-q $n --seqlen-k $n --dim $d --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | grep -E "check|rror" | cut -c1-120
done; done
F='^(document)'
for r in 1 2; do
  echo "== r$r forward"
  $S/fac bench $S/spans.fa --bundle $S/spans.bundle --mask document --mask document_spans --seqlen 8192,2048 2>&1 | grep -E "$F|rror" | cut -c1-80
  echo "== r$r backward"
  $S/fac bench $S/spans.fa --bundle $S/spans.bundle --backward --mask document --mask document_spans --seqlen 8192 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror" | cut -c1-80
done
echo "== D=64 H=32"
$S/fac bench $S/spans.fa --bundle $S/spans64.bundle --dim 64 --heads 32 --mask document --mask document_spans --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-80
# The forward suites of the sm_90a path that call 6 of session 17 did not reach, and the JIT's
# performance-warning check, on this session's verification build (prepare.sh, .gpu/s18/v).
G=$(pwd)/.gpu/s18/v
cd $G && for f in *.bundle.gz; do gunzip -kf $f; done && cd - >/dev/null
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle FAC_BUNDLE_EXTRA=$G/test-det-sm_90a.bundle:$G/test-patterns.bundle \
  timeout 300 $G/tests.test -test.run 'TestGPUMatchesReference|TestGPULaunchDevicePointers|TestGPUModPatterns' -test.short -test.v -test.count=1 -test.timeout 8m) > $OUT/tests-sm_90a-fwd.log 2>&1
echo "tests sm_90a forward rc=$?"
grep -E "^(--- |FAIL|ok|PASS)" $OUT/tests-sm_90a-fwd.log | tail -12
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$G/test-sm_90a.bundle timeout 150 $G/tests.test -test.run 'GPUNoJITPerformanceWarnings' -test.v -test.count=1 -test.timeout 8m) > $OUT/jit.log 2>&1
echo "jit rc=$?"; grep -E "^(--- |FAIL|ok|PASS)" $OUT/jit.log | tail -4
