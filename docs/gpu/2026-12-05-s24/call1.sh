#!/usr/bin/env bash
# Session 24, device call 1 (carry .gpu/s24, built by prepare.sh): issue 8's anchors on the new
# defaults, beside FlexAttention in the same call. PART=a (default) or b, for short calls.
# a: 1. ptxas -v of the 84 forward kernels (7 stdlib masks × 3 scores × bf16/f16 × D 64/128; D = 64
#       is now three consumer groups): spills, C75xx;
#    2. fac bench: D = 128 S = 8192 five masks (document now heads_minor), two rounds; D = 64 (H = 32)
#       five masks on the groups (g) and on the 128-row fallback (t, --block 128), in turns;
#    3. flex_bench.py flex.
# b: 1. D = 64 g and t again; S = 2048 none; g3n64 (three consumer groups at D = 128, BLOCK_N = 64: an
#       experiment for sliding window); heads_minor for sliding window and causal (hm) against the
#       default at S = 8192 and S = 32768 (B = 1, H = 16);
#    2. decode_bench.py (FlexAttention and SDPA at D = 64).
set -u
exec > >(tee $OUT/call1${PART:-a}.txt) 2>&1
D=$(pwd)/.gpu/s24; f=$D/fac
(cd $D && for x in *.gz; do gunzip -kf $x; done && tar xzf ptx.tgz)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
F='^(none|causal|sliding|document|prefix)'
d64() {
  echo "== $1 D=64 g"; $f bench --bundle $D/d64g.bundle --dim 64 --heads 32 --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
  echo "== $1 D=64 t"; $f bench --bundle $D/d64t.bundle --block 128 --dim 64 --heads 32 --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
}
if [ "${PART:-a}" = a ]; then
  for p in $D/ptx/*.ptx; do
    echo "$(basename $p .ptx): $($ptxas -arch=sm_90a -v $p -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning|rror" | sed -E 's/ptxas (info|warning) *: //' | tr '\n' ' ' | cut -c1-200)"
  done > $OUT/ptxas84.txt
  echo "ptxas: $(ls $D/ptx/*.ptx | wc -l) kernels; spilling: $(grep -v ' 0 bytes spill stores, 0 bytes spill loads' $OUT/ptxas84.txt | grep -c spill); C75xx/warnings/errors: $(grep -cE 'C75|arning|rror' $OUT/ptxas84.txt)"
  grep -v ' 0 bytes spill stores, 0 bytes spill loads' $OUT/ptxas84.txt | grep spill | cut -c1-150 | head
  grep -E 'C75|arning|rror' $OUT/ptxas84.txt | cut -c1-150 | head -5
  for r in 1 2; do
    echo "== r$r D=128 S=8192"; $f bench --bundle $D/bench.bundle --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
  done
  d64 r1
  (timeout 240 python3 $D/flex_bench.py flex > $OUT/flex.txt 2>&1; echo "flex rc=$?")
  grep -E '"what": "(flex|gemm)' $OUT/flex.txt | python3 -c '
import json,sys
for l in sys.stdin:
    r=json.loads(l); print(r.get("what"), r.get("S"), r.get("mask"), round(r.get("fwd_tflops", r.get("tflops", 0)),1))'
else
  d64 r2
  echo "== S=2048"; $f bench --bundle $D/bench.bundle --seqlen 2048 --mask none 2>&1 | grep -E "$F|rror" | cut -c1-90
  G3="--const BLOCK_M=64 --const BLOCK_N=64 --const num_warps=4 --const consumer_groups=3 --const SPARSE_Q=192 --const SPARSE_K=128 --const num_stages=4 --const tma_store=true --const warp_specialize=true --const overlap=true --const lazy_rescale=true --const fold_scale=true"
  echo "== g3n64 ptxas: $($ptxas -arch=sm_90a -v $D/g3n64-sw.ptx -o /dev/null 2>&1 | grep -E "registers|spill|C75" | tr '\n' ' ' | cut -c1-250)"
  echo "== g3n64 D=128 S=8192"; $f bench --bundle $D/g3n64.bundle $G3 --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
  SW=(--mask causal --mask "sliding_window(1023, 0)")
  echo "== hm S=8192"; $f bench --bundle $D/hm.bundle --const heads_minor=true "${SW[@]}" --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
  for v in t hm; do c=""; b=$D/bench.bundle; [ $v = hm ] && c="--const heads_minor=true" && b=$D/hm.bundle
    echo "== $v S=32768"; $f bench --bundle $b $c "${SW[@]}" --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror" | cut -c1-100
  done
  (timeout 120 python3 $D/decode_bench.py > $OUT/decode.txt 2>&1; echo "decode rc=$?")
  grep -E 'd64' $OUT/decode.txt | cut -c1-160
fi
