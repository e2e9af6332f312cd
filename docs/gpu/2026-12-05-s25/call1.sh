#!/usr/bin/env bash
# Session 25, device call 1 (carry .gpu/s24b, .gpu/s24p, .gpu/s24x: session 24's builds of the
# final defaults, unchanged code since): session 24's call4 (ptxas -v of the 32 forward PTX files
# not checked on the final build), the final defaults' benches (D = 128 S = 8192 five masks; D = 64
# H = 32 five masks), call5's sliding-window experiments (default against p2tms, p2tmshm, g2), issue
# 11's long context (S = 8192, 32768, 131072 causal and sliding window 1024, B = 1, H = 16; sampled
# check at 131072), then flex_bench.py flex and flex_long.py (S = 32768) in the same call.
set -u
exec > >(tee $OUT/call1.txt) 2>&1
R=$(pwd); B=$R/.gpu/s24b; X=$R/.gpu/s24x; P=$R/.gpu/s24p; f=$B/fac
(cd $B && for x in *.gz; do gunzip -kf $x; done); (cd $X && for x in *.gz; do gunzip -kf $x; done); (cd $P && tar xzf ptx.tgz)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
ls $P/ptx/*.ptx | xargs -P 16 -I{} sh -c \
  'f={}; c=-c; grep -q setmaxnreg "$f" && c=; r=$("$0" -arch=sm_90a $c -v "$f" -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning|rror"); echo "$(basename "$f" .ptx): $(echo $r | tr "\n" " ")"' "$ptxas" \
  | sort > $OUT/ptxas32.txt
echo "ptxas: $(ls $P/ptx/*.ptx | wc -l) kernels, $(wc -l < $OUT/ptxas32.txt) reports; spilling: $(grep -v ' 0 bytes spill stores, 0 bytes spill loads' $OUT/ptxas32.txt | grep -c spill); C75xx/warnings/errors: $(grep -cE 'C75|arning|rror' $OUT/ptxas32.txt)"
grep -v ' 0 bytes spill stores, 0 bytes spill loads' $OUT/ptxas32.txt | grep spill | cut -c1-150 | head
F='^(none|causal|sliding|document|prefix)'
echo "== D=128 S=8192"; $f bench --bundle $B/bench.bundle --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
echo "== D=64 S=8192"; $f bench --bundle $B/d64g.bundle --dim 64 --heads 32 --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
P2="--const persistent=true --const num_stages=2 --const tma_store=true"
G2="--const BLOCK_M=64 --const BLOCK_N=128 --const num_warps=4 --const consumer_groups=2 --const num_stages=2 --const warp_specialize=true --const overlap=true --const lazy_rescale=true --const fold_scale=true --const tma_store=true"
M=(--mask causal --mask "sliding_window(1023, 0)" --mask document)
for r in 1 2; do for v in t p2tms p2tmshm g2; do
  case $v in t) c=""; bb=$B/bench.bundle;; p2tms) c=$P2; bb=$X/p2tms.bundle;; p2tmshm) c="$P2 --const heads_minor=true"; bb=$X/p2tmshm.bundle;; g2) c=$G2; bb=$X/g2.bundle;; esac
  echo "== r$r $v S=8192"; timeout 60 $X/fac bench --bundle $bb $c "${M[@]}" --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
  echo "== r$r $v S=32768"; timeout 60 $X/fac bench --bundle $bb $c --mask "sliding_window(1023, 0)" --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror" | cut -c1-100
done; done
for s in 8192 32768 131072; do
  echo "== long S=$s"; timeout 90 $f bench --bundle $B/bench.bundle --seqlen $s --tokens $s --mask causal --mask "sliding_window(1023, 0)" \
    --warmup 2 --reps 5 2>&1 | grep -E "$F|rror" | cut -c1-100
done
for m in causal "sliding_window(1023, 0)"; do
  timeout 120 $f run --device cuda --bundle $B/bench.bundle --mask "$m" --dtype bf16 --batch 1 --heads 16 \
    --seqlen-q 131072 --seqlen-k 131072 --dim 128 2>&1 | tail -2 | cut -c1-120; echo "run131072 rc=${PIPESTATUS[0]} $m"
done
(timeout 200 python3 $B/flex_bench.py flex > $OUT/flex.txt 2>&1; echo "flex rc=$?")
(timeout 120 python3 $R/docs/gpu/2026-12-04-s18/flex_long.py 32768 > $OUT/flex_long.txt 2>&1; echo "flex_long rc=$?")
cat $OUT/flex.txt $OUT/flex_long.txt | grep -E '"what": "(flex|gemm)' | python3 -c '
import json,sys
for l in sys.stdin:
    r=json.loads(l); print(r.get("what"), r.get("S"), r.get("mask"), round(r.get("fwd_tflops", r.get("tflops", 0)),1))'
