#!/usr/bin/env bash
# Session 17, device call 3: D = 64 tile shapes on the mask-range build (B, cbdb2e0): 128×256
# tiles with 256×256 block-mask blocks (two and three stages) and 128×128 tiles on 256-blocks,
# beside the tuned 128×128 (128-blocks); the persistent tile loop (two stages) beside the tuned
# kernel at D = 128; fac run checks of the 128×256 kernels.
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
B=.gpu/ab/cbdb2e0
for f in $B/*.bundle.gz; do gunzip -kf $f; done
F='^(none|causal|sliding|document|prefix)'
Bn() { echo "== $1"; shift; "$@" 2>&1 | grep -E "$F|rror" | cut -c1-100; }
T=(--const BLOCK_M=128 --const num_warps=8 --const overlap=true --const warp_specialize=true --const SPARSE_Q=256 --const SPARSE_K=256)
D64=(--seqlen 8192 --dim 64 --heads 32 --batch 2 --mask none --mask causal)
for r in 1 2; do
  Bn "r$r D=64 tuned" $B/fac bench "${D64[@]}" --bundle $B/d64.bundle
  Bn "r$r D=64 128x256 b256" $B/fac bench "${D64[@]}" "${T[@]}" --const BLOCK_N=256 --block 256 --bundle $B/d64w.bundle
  Bn "r$r D=64 128x256 b256 s3" $B/fac bench "${D64[@]}" "${T[@]}" --const BLOCK_N=256 --const num_stages=3 --block 256 --bundle $B/d64w3.bundle
  Bn "r$r D=64 128x128 b256" $B/fac bench "${D64[@]}" "${T[@]}" --const BLOCK_N=128 --block 256 --bundle $B/d64s256.bundle
done
M=(--seqlen 8192 --mask "sliding_window(1023, 0)" --mask document --mask none --mask causal)
for r in 1 2; do
  Bn "r$r D=128 tuned" $B/fac bench "${M[@]}" --bundle $B/bench.bundle
  Bn "r$r D=128 persistent s2" $B/fac bench "${M[@]}" --const persistent=true --const num_stages=2 --bundle $B/pers.bundle
done
chk() { timeout 90 "$@" 2>&1 | tail -1 | cut -c1-120; echo "  rc=${PIPESTATUS[0]}: ${*: -14}"; }
for s in "1000 1537" "4097 333"; do set -- $s; for m in none causal; do
  chk $B/fac run --device cuda --bundle $B/d64w.bundle "${T[@]}" --const BLOCK_N=256 --block 256 --mask $m --batch 1 --heads 4 --seqlen-q $1 --seqlen-k $2 --dim 64 --dtype bf16
done; done
