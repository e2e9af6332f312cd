#!/usr/bin/env bash
# Session 25, device call D: the shortest useful call for the last minutes of device time, most
# decisive first: exp2_poly 0 / 2 / 3 at D = 64 (none, causal, prefix-LM; H = 32, S = 8192) in
# turns; the default sliding window against p2tmshm (persistent, two buffers, the TMA store,
# heads_minor) at S = 8192 and 32768; ptxas -v of the 32 unchecked final-build kernels; the long
# context's sliding window at S = 131072 and 8192 (B = 1 and 16).
set -u
exec > >(tee $OUT/callD.txt) 2>&1
R=$(pwd); A=$R/.gpu/s25a; E=$R/.gpu/s25; f24=$A/fac24; f=$E/fac
(cd $A && for x in *.gz; do gunzip -kf $x; done; mkdir -p p32 && tar xzf ptx32.tgz -C p32); (cd $E && for x in e*.gz; do gunzip -kf $x; done)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
F='^(none|causal|sliding|document|prefix)'
for r in 1 2; do for n in 0 2 3; do
  echo "== r$r D=64 exp2_poly=$n"; timeout 40 $f bench --bundle $E/e$n.bundle --const exp2_poly=$n --dim 64 --heads 32 --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
done; done
P2="--const persistent=true --const num_stages=2 --const tma_store=true --const heads_minor=true"
for v in t p2tmshm; do c=""; bb=$A/bench.bundle; [ $v = p2tmshm ] && c=$P2 && bb=$A/p2tmshm.bundle
  echo "== $v S=8192"; timeout 40 $f24 bench --bundle $bb $c --mask "sliding_window(1023, 0)" --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-90
  echo "== $v S=32768"; timeout 40 $f24 bench --bundle $bb $c --mask "sliding_window(1023, 0)" --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror" | cut -c1-100
done
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
ls $A/p32/ptx/*.ptx | xargs -P 16 -I{} sh -c 'f={}; c=-c; grep -q setmaxnreg "$f" && c=; r=$("$0" -arch=sm_90a $c -v "$f" -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning|rror"); echo "$(basename "$f" .ptx): $(echo $r | tr "\n" " ")"' "$ptxas" | sort > $OUT/ptxas32.txt
echo "ptxas: $(wc -l < $OUT/ptxas32.txt) reports; spilling: $(grep -v ' 0 bytes spill stores, 0 bytes spill loads' $OUT/ptxas32.txt | grep -c spill); C75xx/warnings: $(grep -cE 'C75|arning' $OUT/ptxas32.txt)"
for t in 8192 131072; do
  echo "== long sliding window S=8192 tokens=$t"; timeout 40 $f24 bench --bundle $A/bench.bundle --seqlen 8192 --tokens $t --mask "sliding_window(1023, 0)" --warmup 2 --reps 5 2>&1 | grep -E "$F|rror" | cut -c1-100
done
echo "== long sliding window S=131072"; timeout 60 $f24 bench --bundle $A/bench.bundle --seqlen 131072 --tokens 131072 --mask "sliding_window(1023, 0)" --warmup 2 --reps 5 2>&1 | grep -E "$F|rror" | cut -c1-100
