#!/usr/bin/env bash
# Session 18, device call 3: the backward with the document spans stated from the key's side
# (document_spans_kv: q_idx in [doc_start[kv_idx], doc_end[kv_idx]), a range per key row of the
# backward's tiles) against document and document_spans; then the acceptance suites with the
# sm_80 path forced on the verification build (.gpu/s18/v).
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
S=$(pwd)/.gpu/s18/spans
for n in 1537 1000; do
  echo "== run spans_kv backward n=$n"
  $S/fac run --device cuda $S/spans.fa --bundle $S/spans.bundle --mask document_spans_kv --aux doc_start=$S/start$n.npy --aux doc_end=$S/end$n.npy \
    --seqlen-q $n --seqlen-k $n --dim 128 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 --backward 2>&1 | grep -E "check|rror" | cut -c1-120
done
for r in 1 2; do
  echo "== r$r backward"
  $S/fac bench $S/spans.fa --bundle $S/spans.bundle --backward --mask document --mask document_spans_kv --mask document_spans --seqlen 8192 --warmup 3 --reps 10 2>&1 | grep -E "^document|rror" | cut -c1-80
done
G=$(pwd)/.gpu/s18/v
cd $G && for f in *.bundle.gz; do gunzip -kf $f; done && cd - >/dev/null
(cd tests && FAC_ARCH=sm_80 FAC_BUNDLE=$G/test-sm_80.bundle FAC_BUNDLE_EXTRA=$G/test-det-sm_80.bundle:$G/test-patterns.bundle \
  timeout 420 $G/tests.test -test.run 'TestGPUMatchesReference|TestGPUBackwardMatchesReference|TestGPUModPatterns' -test.short -test.v -test.count=1 -test.timeout 8m) > $OUT/tests-sm_80.log 2>&1
echo "tests sm_80 rc=$?"
grep -E "^(--- |FAIL|ok|PASS)" $OUT/tests-sm_80.log | tail -12
