#!/usr/bin/env bash
# Session 26, device call 3 (carry .gpu/s26b, built by prepare2.sh): GPU checks of the new
# sliding-window and document kernels (heads_group 16 on the grid's third axis) at odd, unequal
# lengths with GQA and B × H over 16 (several groups), every stdlib score, bf16 (B = 3, H = 12,
# Hkv = 4) and f16 (B = 5, H = 7); then the new default against g0 (two rounds) and hmoff (one) at
# B = 16, B = 2 (S = 8192) and B = 1 (S = 32768).
set -u
source scripts/gpu-call-env call3.txt .gpu/s26b
fails=0
for m in "sliding_window(20, 3)" "sliding_window(1023, 0)" document; do
  for sc in identity "softcap(2.5)" alibi; do
    for dt in bf16 f16; do
      shape="--batch 3 --heads 12 --kv-heads 4 --seqlen-q 1537 --seqlen-k 1000"
      [ $dt = f16 ] && shape="--batch 5 --heads 7 --kv-heads 7 --seqlen-q 333 --seqlen-k 2049"
      {
        out=$(timeout 60 $f run --device cuda --bundle $D/check.bundle --mask "$m" --score "$sc" --random-aux --doc-len 300 \
          --dim 128 --dtype $dt $shape 2>&1); rc=$?
        [ $rc = 0 ] || { fails=$((fails+1)); echo "FAIL rc=$rc $m $sc $dt $shape: $(echo "$out" | tail -2)"; }
      }
    done
  done
done
echo "GPU checks: $fails failed of 18"
SW="sliding_window(1023, 0)"
for r in 1 2; do vs="new g0"; [ $r = 1 ] && vs="new g0 hmoff"; for v in $vs; do
  case $v in new) c=""; b=bench;; g0) c="--const heads_group=0"; b=g0;; hmoff) c="--const heads_minor=false"; b=hmoff;; esac
  for bs in 16 2; do
    echo "== r$r $v B=$bs"; timeout 60 $f bench --bundle $D/$b.bundle $c --mask "$SW" --mask document --seqlen 8192 --batch $bs 2>&1 | grep -E "$F|rror" | cut -c1-90
  done
  echo "== r$r $v S=32768"; timeout 60 $f bench --bundle $D/$b.bundle $c --mask "$SW" --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror" | cut -c1-100
done; done
