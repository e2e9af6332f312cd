#!/usr/bin/env bash
# Session 17, device call 2: main (A, 0cd7d8b), mask-range (B, cbdb2e0) and mask-range with the
# masked-load-index pass and predicate-operand masked loads (C, 631c5ad) in turns; C's SASS of
# the partial path; D = 64 with 128×256 tiles (two and three stages) beside C's default; C's
# timeline (sliding window, document); fac run checks of C and of the 128×256 D = 64 kernels.
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
A=.gpu/ab/0cd7d8b; B=.gpu/ab/cbdb2e0; C=.gpu/ab/631c5ad
for d in $A $B $C; do for f in $d/*.bundle.gz; do gunzip -kf $f; done; done
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
cuobjdump=$(dirname $ptxas)/cuobjdump
for p in $C/ptx/*.ptx; do
  echo "$p: $($ptxas -arch=sm_90a -v $p -o $p.cubin 2>&1 | grep -E 'registers|spill|C75|rror' | tr '\n' ' ' | cut -c1-200)"
done
for k in document slidingwindow causal; do $cuobjdump --dump-sass $C/ptx/fwd_$k.ptx.cubin | gzip > $OUT/sass_C_$k.txt.gz; done
F='^(none|causal|sliding|document|prefix)'
Bn() { echo "== $1"; shift; "$@" 2>&1 | grep -E "$F" | cut -c1-80; }
for r in 1 2; do for d in $A $B $C; do
  Bn "r$r $(basename $d) 8k" $d/fac bench --seqlen 8192 --bundle $d/bench.bundle
done; done
Bn "A 2k" $A/fac bench --seqlen 2048 --bundle $A/bench.bundle
Bn "C 2k" $C/fac bench --seqlen 2048 --bundle $C/bench.bundle
W=(--const BLOCK_M=128 --const BLOCK_N=256 --const SPARSE_K=256 --const num_warps=8 --const overlap=true --const warp_specialize=true)
D64=(--seqlen 8192 --dim 64 --heads 32 --batch 2 --mask none --mask causal)
for r in 1 2; do
  Bn "r$r C D=64 128x128" $C/fac bench "${D64[@]}" --bundle $C/d64.bundle
  Bn "r$r C D=64 128x256" $C/fac bench "${D64[@]}" "${W[@]}" --bundle $C/d64w.bundle
  Bn "r$r C D=64 128x256 s3" $C/fac bench "${D64[@]}" "${W[@]}" --const num_stages=3 --bundle $C/d64w3.bundle
done
for m in "sliding_window(1023, 0)" document; do
  k=${m//[^a-z]/}
  extra=(); [[ $m == document ]] && extra=(--random-aux --doc-len 1000)
  timeout 60 $C/fac run --device cuda --bundle $C/stamp.bundle --no-check --lse-out $OUT/lse_C_$k.npy --mask "$m" "${extra[@]}" \
    --batch 2 --heads 16 --seqlen-q 8192 --seqlen-k 8192 --dim 128 --dtype bf16 > /dev/null 2>&1; echo "stamp C $k rc=$?"
done
chk() { timeout 90 "$@" 2>&1 | tail -1 | cut -c1-120; echo "  rc=${PIPESTATUS[0]}: ${*: -12}"; }
for s in "1000 1537" "4097 333" "2048 2048"; do set -- $s
  chk $C/fac run --device cuda --bundle $C/bench.bundle --mask document --random-aux --doc-len 300 --batch 1 --heads 4 --seqlen-q $1 --seqlen-k $2 --dim 128 --dtype bf16
  chk $C/fac run --device cuda --bundle $C/bench.bundle --mask "sliding_window(1023, 0)" --batch 1 --heads 4 --seqlen-q $1 --seqlen-k $2 --dim 128 --dtype bf16
  for m in none causal; do
    chk $C/fac run --device cuda --bundle $C/d64w.bundle "${W[@]}" --mask $m --batch 1 --heads 4 --seqlen-q $1 --seqlen-k $2 --dim 64 --dtype bf16
  done
done
