#!/usr/bin/env bash
# Session 26, device call 1 (carry .gpu/s26, built by prepare.sh): issue 8's table on the current
# defaults (D = 128, S = 2048 and 8192; D = 64, H = 32, S = 8192), the schedule variants against
# its two misses in turns over two rounds (fac bench times as triton.testing.do_bench does since
# session 26; the defaults also with FAC_BENCH_SYNC=1, session 25's timing), then flex_bench.py and decode_bench.py in the same call.
set -u
source scripts/gpu-call-env call1.txt .gpu/s26
echo "== D=128 default"; timeout 90 $f bench --bundle $D/bench.bundle 2>&1 | grep -E "$F|rror" | cut -c1-90
echo "== D=128 default, FAC_BENCH_SYNC=1 (session 25's timing)"; FAC_BENCH_SYNC=1 timeout 90 $f bench --bundle $D/bench.bundle 2>&1 | grep -E "$F|rror" | cut -c1-90
echo "== D=64 default"; timeout 60 $f bench --bundle $D/d64.bundle --dim 64 --heads 32 --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
echo "== D=64 default, FAC_BENCH_SYNC=1"; FAC_BENCH_SYNC=1 timeout 60 $f bench --bundle $D/d64.bundle --dim 64 --heads 32 --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
SW="sliding_window(1023, 0)"
for r in 1 2; do
  echo "== r$r sw t"; timeout 30 $f bench --bundle $D/bench.bundle --mask "$SW" --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
  for v in tms pf ff s2; do
    case $v in tms) c="--const tma_store=true";; pf) c="--const prefetch_q=true";; ff) c="--const full_first=true";; s2) c="--const num_stages=2";; esac
    echo "== r$r sw $v"; timeout 30 $f bench --bundle $D/sw-$v.bundle $c --mask "$SW" --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
  done
  echo "== r$r d64 t"; timeout 30 $f bench --bundle $D/d64.bundle --dim 64 --heads 32 --mask none --mask causal --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
  for v in s3 s5 ff pf; do
    case $v in s3) c="--const num_stages=3";; s5) c="--const num_stages=5";; ff) c="--const full_first=true";; pf) c="--const prefetch_q=true";; esac
    echo "== r$r d64 $v"; timeout 30 $f bench --bundle $D/d64-$v.bundle $c --dim 64 --heads 32 --mask none --mask causal --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
  done
done
(timeout 150 python3 $D/flex_bench.py flex > $OUT/flex.txt 2>&1; echo "flex rc=$?")
(timeout 100 python3 $D/decode_bench.py > $OUT/decode.txt 2>&1; echo "decode rc=$?")
grep -E 'd64' $OUT/decode.txt | cut -c1-160
grep -E '"what": "(flex|gemm)' $OUT/flex.txt | python3 -c '
import json,sys
for l in sys.stdin:
    r=json.loads(l); print(r.get("what"), r.get("S"), r.get("mask"), round(r.get("fwd_tflops", r.get("tflops", 0)),1))'
