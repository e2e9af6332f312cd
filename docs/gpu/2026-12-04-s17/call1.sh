#!/usr/bin/env bash
# Session 17, device call 1: the mask-range pass (per-row column ranges, compares against
# immediates) against main (0cd7d8b): ptxas -v and the SASS mix of the partial path, forward bench
# in turns (S = 8192, 2048, D = 64), the in-kernel timeline (ptxstamp) of sliding window and
# document for both, and fac run's check of the new kernels at odd lengths.
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
A=.gpu/ab/0cd7d8b; N=.gpu/ab/s17-mask-range
for d in $A $N; do for f in $d/*.bundle.gz; do gunzip -kf $f; done; done
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
cuobjdump=$(dirname $ptxas)/cuobjdump
for d in $A $N; do for p in $d/ptx/fwd_*.ptx; do
  echo "$p: $($ptxas -arch=sm_90a -v $p -o $p.cubin 2>&1 | grep -E 'registers|spill|C75|rror' | tr '\n' ' ' | cut -c1-200)"
  echo "  SASS: $($cuobjdump --dump-sass $p.cubin | grep -oE '^ +/\*[0-9a-f]+\*/ +[A-Z0-9.]+' | awk '{print $2}' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -14 | awk '{printf "%s %s, ", $2, $1}')"
done; done
F='^(none|causal|sliding|document|prefix)'
B() { echo "== $1"; shift; "$@" 2>&1 | grep -E "$F" | cut -c1-80; }
for r in 1 2; do
  B "r$r main 8k" $A/fac bench --seqlen 8192 --bundle $A/bench.bundle
  B "r$r range 8k" $N/fac bench --seqlen 8192 --bundle $N/bench.bundle
done
B "main 2k" $A/fac bench --seqlen 2048 --bundle $A/bench.bundle
B "range 2k" $N/fac bench --seqlen 2048 --bundle $N/bench.bundle
B "main D=64" $A/fac bench --seqlen 8192 --dim 64 --heads 32 --batch 2 --mask none --mask causal --bundle $A/d64.bundle
B "range D=64" $N/fac bench --seqlen 8192 --dim 64 --heads 32 --batch 2 --mask none --mask causal --bundle $N/d64.bundle
for d in $A $N; do n=$(basename $d); for m in "sliding_window(1023, 0)" document causal; do
  k=${m//[^a-z]/}
  extra=(); [[ $m == document ]] && extra=(--random-aux --doc-len 1000)
  timeout 60 $d/fac run --device cuda --bundle $d/stamp.bundle --no-check --lse-out $OUT/lse_${n}_$k.npy --mask "$m" "${extra[@]}" \
    --batch 2 --heads 16 --seqlen-q 8192 --seqlen-k 8192 --dim 128 --dtype bf16 > /dev/null 2>$OUT/stamp_${n}_$k.err; echo "stamp $n $k rc=$?"
done; done
for m in "sliding_window(1023, 0)" causal "prefix_lm(1024)" document none; do
  extra=(); [[ $m == document ]] && extra=(--random-aux --doc-len 300)
  for s in "1000 1537" "4097 333" "2048 2048"; do set -- $s
    timeout 60 $N/fac run --device cuda --bundle $N/bench.bundle --mask "$m" "${extra[@]}" --batch 1 --heads 4 --seqlen-q $1 --seqlen-k $2 --dim 128 --dtype bf16 2>&1 | tail -1 | cut -c1-150
    echo "check $m $1x$2 rc=${PIPESTATUS[0]}"
  done
done
