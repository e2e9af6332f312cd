#!/usr/bin/env bash
# Session 27, device call 3 (carry .gpu/s27: session 26's kernels and fac, this session's
# tests.test; prepare.sh): issue 11's longest GPU checks (decoding at Sk = 131072, varlen
# sequences of 4096), then the speed points beside the anchors in one call: issue 8's table and
# the D = 64 anchors (fac bench), varlen against the dense document kernel, decoding beside
# decode_bench.py, FlexAttention at S = 32768 (flex_long.py), flex_bench.py, long context.
# BUDGET (seconds, default 540): a part starts only if its estimate fits what is left.
set -u
exec > >(tee "$OUT/call3.txt") 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
export GPU_DIR=.gpu/s27 ARCHS=sm_90a
budget=${BUDGET:-540}
part() { # NAME ESTIMATE CMD...
  local name=$1 est=$2; shift 2
  local left=$((budget - SECONDS))
  if ((left < est)); then echo "== $name skipped ($left s left, needs ~$est)"; return; fi
  echo "== $name (at $SECONDS s)"; timeout $((left - 5)) "$@"; echo "== $name rc=$? (at $SECONDS s)"
}
part tests 120 env TESTRUN='GPUDecodeLongKV|GPUVarlenLong' scripts/gpu-acceptance tests
grep -E "checked|FAIL|rror|largest" $OUT/gpu-test-sm_90a.log | head -20
part bench 60 scripts/gpu-acceptance fwd-bench d64 varlen
part decode 90 scripts/gpu-acceptance decode
part flex-long 60 sh -c 'python3 docs/gpu/2026-12-04-s18/flex_long.py 32768 2>&1 | grep -E "^\{|rror" | tail -4 | tee $OUT/flex-long.txt'
part flex 120 sh -c 'python3 .gpu/s27/flex_bench.py flex > $OUT/flex.txt 2>&1'
grep -E '"what": "(flex|gemm|d2d)' $OUT/flex.txt 2>/dev/null | cut -c1-200
part long 150 scripts/gpu-acceptance long
echo "call3 done at $SECONDS s"
