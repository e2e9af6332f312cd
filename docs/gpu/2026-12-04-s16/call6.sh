set -u
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
ls .gpu/x/ptx/*.ptx | xargs -P 16 -I{} sh -c 'echo "$(basename {} .ptx): $('$ptxas' -arch=sm_90a -v {} -o /tmp/$(basename {}).cubin 2>&1 | grep -E "spill|C75|rror" | tr "\n" " " | cut -c1-160)"' > /tmp/ptxas.txt
echo "ptxas: $(grep -c . /tmp/ptxas.txt) kernels; with spills: $(grep -v ' 0 bytes spill stores' /tmp/ptxas.txt | grep -c spill); C75: $(grep -c C75 /tmp/ptxas.txt)"
grep -v ' 0 bytes spill stores, 0 bytes spill loads *$' /tmp/ptxas.txt | cut -c1-170 | head -20
gunzip -kf .gpu/x/chk.bundle.gz
for a in "--mask causal --batch 2 --heads 4 --kv-heads 2 --seqlen-q 1000 --seqlen-k 1000 --dim 128" "--mask sliding_window(1023,0) --batch 1 --heads 4 --seqlen-q 3000 --seqlen-k 2777 --dim 128" "--mask document --random-aux --doc-len 333 --batch 2 --heads 2 --seqlen-q 1500 --seqlen-k 1500 --dim 128 --dtype f16" "--mask none --batch 2 --heads 8 --kv-heads 1 --seqlen-q 777 --seqlen-k 1300 --dim 64" "--mask prefix_lm(100) --score softcap(30.0) --batch 1 --heads 4 --seqlen-q 2000 --seqlen-k 2100 --dim 128" "--mask sliding_window(1023,0) --score alibi --random-aux --batch 1 --heads 4 --seqlen-q 1234 --seqlen-k 2345 --dim 64 --dtype f16"; do
  .gpu/x/fac run --device cuda --bundle .gpu/x/chk.bundle --dtype bf16 $a 2>&1 | tail -1 | sed "s/^/$a: /" | cut -c1-200
done
F='^(none|causal|sliding|document|prefix)'
B() { echo "== $1"; shift; "$@" 2>&1 | grep -E "$F" | cut -c1-80; }
for round in 1 2; do
  B "r$round s3 8k" .gpu/fac bench --bundle .gpu/tl/s3.bundle --const num_stages=3 --seqlen 8192
  B "r$round X 8k" .gpu/x/fac bench --bundle .gpu/x/x.bundle --seqlen 8192
done
B "s3 2k" .gpu/fac bench --bundle .gpu/tl/s3.bundle --const num_stages=3 --seqlen 2048
B "X 2k" .gpu/x/fac bench --bundle .gpu/x/x.bundle --seqlen 2048
B "d64 s2" .gpu/fac bench --bundle .gpu/tl/d64s2.bundle --const num_stages=2 --seqlen 8192 --dim 64 --heads 32 --batch 2 --mask none --mask causal
B "d64 X" .gpu/x/fac bench --bundle .gpu/x/d64.bundle --seqlen 8192 --dim 64 --heads 32 --batch 2 --mask none --mask causal
R="--device cuda --no-check --dtype bf16 --dim 128 --batch 2 --heads 16 --seqlen-q 8192 --seqlen-k 8192"
.gpu/x/fac run $R --bundle .gpu/x/tlx.bundle --mask causal --lse-out $OUT/xcausal8k.npy >/dev/null 2>&1
.gpu/x/fac run $R --bundle .gpu/x/tlx.bundle --mask "sliding_window(1023, 0)" --lse-out $OUT/xsw8k.npy >/dev/null 2>&1
.gpu/x/fac run $R --bundle .gpu/x/tlx.bundle --mask document --random-aux --lse-out $OUT/xdoc8k.npy >/dev/null 2>&1
ls $OUT
