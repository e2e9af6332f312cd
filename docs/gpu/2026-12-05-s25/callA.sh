#!/usr/bin/env bash
# Session 25, device call A (carry .gpu/s25a: session 24's final build and sliding-window
# experiments, slimmed; .gpu/s25: exp2_poly, built by prepare.sh). One call for scarce device
# time, in order of what a cut-off call should keep:
#  1. ptxas -v of the 32 final-build forward kernels session 24 did not check;
#  2. issue 11's long context: S = 8192, 32768, 131072 causal and sliding window (B = 1, H = 16; and
#     S = 8192 at B = 16, the same tiles as S = 131072), fac run's sampled check at 131072;
#  3. exp2_poly: D = 64 (H = 32, S = 8192) none, causal, prefix-LM at 0..4; D = 128 none, causal,
#     sliding window, document at 0 and 2; ptxas -v of those kernels;
#  4. session 24's sliding-window experiments at D = 128 (default heads_minor t, p2tms, p2tmshm,
#     g2): sliding window and document at S = 8192, sliding window at S = 32768 (B = 1, H = 16);
#     GPU checks of p2tms and p2tmshm at odd lengths;
#  5. flex_bench.py flex and decode_bench.py in the same call.
set -u
exec > >(tee $OUT/callA.txt) 2>&1
R=$(pwd); A=$R/.gpu/s25a; E=$R/.gpu/s25; f24=$A/fac24; f=$E/fac
(cd $A && for x in *.gz; do gunzip -kf $x; done; mkdir -p p32 && tar xzf ptx32.tgz -C p32); (cd $E && for x in *.gz; do gunzip -kf $x; done)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
pt() { ls $1/*.ptx | xargs -P 16 -I{} sh -c \
  'f={}; c=-c; grep -q setmaxnreg "$f" && c=; r=$("$0" -arch=sm_90a $c -v "$f" -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning|rror"); echo "$(basename "$f" .ptx): $(echo $r | tr "\n" " " | sed -E "s/ptxas (info|warning) *: //g")"' "$ptxas" | sort; }
F='^(none|causal|sliding|document|prefix)'
pt $A/p32/ptx > $OUT/ptxas32.txt
echo "ptxas: $(ls $A/p32/ptx/*.ptx | wc -l) kernels, $(wc -l < $OUT/ptxas32.txt) reports; spilling: $(grep -v ' 0 bytes spill stores, 0 bytes spill loads' $OUT/ptxas32.txt | grep -c spill); C75xx/warnings/errors: $(grep -cE 'C75|arning|rror' $OUT/ptxas32.txt)"
grep -v ' 0 bytes spill stores, 0 bytes spill loads' $OUT/ptxas32.txt | grep spill | cut -c1-150 | head
for s in 8192 32768 131072; do
  echo "== long S=$s"; timeout 90 $f24 bench --bundle $A/bench.bundle --seqlen $s --tokens $s --mask causal --mask "sliding_window(1023, 0)" \
    --warmup 2 --reps 5 2>&1 | grep -E "$F|rror" | cut -c1-100
done
echo "== long S=8192 B=16 (S = 131072's tokens and tiles)"; timeout 60 $f24 bench --bundle $A/bench.bundle --seqlen 8192 --tokens 131072 \
  --mask "sliding_window(1023, 0)" --warmup 2 --reps 5 2>&1 | grep -E "$F|rror" | cut -c1-100
for m in causal "sliding_window(1023, 0)"; do
  timeout 60 $f24 run --device cuda --bundle $A/bench.bundle --mask "$m" --dtype bf16 --batch 1 --heads 16 \
    --seqlen-q 131072 --seqlen-k 131072 --dim 128 2>&1 | tail -2 | cut -c1-120; echo "run131072 rc=${PIPESTATUS[0]} $m"
done
pt $E/ptx | cut -c1-200
for n in 0 1 2 3 4; do
  echo "== D=64 exp2_poly=$n"; timeout 60 $f bench --bundle $E/e$n.bundle --const exp2_poly=$n --dim 64 --heads 32 --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
done
for n in 0 2; do
  echo "== D=128 exp2_poly=$n"; timeout 60 $f bench --bundle $E/h$n.bundle --const exp2_poly=$n --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
done
P2="--const persistent=true --const num_stages=2 --const tma_store=true"
G2="--const BLOCK_M=64 --const BLOCK_N=128 --const num_warps=4 --const consumer_groups=2 --const num_stages=2 --const warp_specialize=true --const overlap=true --const lazy_rescale=true --const fold_scale=true --const tma_store=true"
for v in t p2tms p2tmshm g2; do
  case $v in t) c=""; bb=$A/bench.bundle;; p2tms) c=$P2; bb=$A/p2tms.bundle;; p2tmshm) c="$P2 --const heads_minor=true"; bb=$A/p2tmshm.bundle;; g2) c=$G2; bb=$A/g2.bundle;; esac
  echo "== $v S=8192"; timeout 60 $f24 bench --bundle $bb $c --mask "sliding_window(1023, 0)" --mask document --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
  echo "== $v S=32768"; timeout 60 $f24 bench --bundle $bb $c --mask "sliding_window(1023, 0)" --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror" | cut -c1-100
done
for v in p2tms p2tmshm; do c=$P2; [ $v = p2tmshm ] && c="$P2 --const heads_minor=true"
  for m in "sliding_window(1023, 0)" document; do
    timeout 30 $f24 run --device cuda --bundle $A/$v.bundle $c --mask "$m" --random-aux --doc-len 300 \
      --seqlen-q 1537 --seqlen-k 1000 --dim 128 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-90
    echo "rc=${PIPESTATUS[0]} $v $m"
  done
done
(timeout 150 python3 $A/flex_bench.py flex > $OUT/flex.txt 2>&1; echo "flex rc=$?")
(timeout 100 python3 $A/decode_bench.py > $OUT/decode.txt 2>&1; echo "decode rc=$?")
grep -E 'd64' $OUT/decode.txt | cut -c1-160
cat $OUT/flex.txt | grep -E '"what": "(flex|gemm)' | python3 -c '
import json,sys
for l in sys.stdin:
    r=json.loads(l); print(r.get("what"), r.get("S"), r.get("mask"), round(r.get("fwd_tflops", r.get("tflops", 0)),1))'
