#!/usr/bin/env bash
# Session 25: exp2_poly (FlashAttention-4's exponential emulation) into DIR (default .gpu/s25):
# fac, D = 64 (H = 32) none, causal, prefix-LM on the consumer groups with exp2_poly 0..4 (eN),
# D = 128 none, causal, sliding window, document with exp2_poly 0, 2 (hN), all bf16, sm_90a, with
# the PTX of each for ptxas.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s25}
source scripts/gpu-env $d
mkdir -p $d/ptx
d64=(--mask none --mask causal --mask "prefix_lm(1024)")
d128=(--mask none --mask causal --mask "sliding_window(1023, 0)" --mask document)
for n in 0 1 2 3 4; do
  $d/fac build "${d64[@]}" --const exp2_poly=$n --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/e$n.bundle
  $d/fac compile --mask causal --const exp2_poly=$n --const DTYPE=bf16 --const HEAD_DIM=64 --arch sm_90a --no-cache -o $d/ptx/e$n-causal.ptx
done
for n in 0 2; do
  $d/fac build "${d128[@]}" --const exp2_poly=$n --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/h$n.bundle
  $d/fac compile --mask "sliding_window(1023, 0)" --const exp2_poly=$n --const DTYPE=bf16 --const HEAD_DIM=128 --arch sm_90a --no-cache -o $d/ptx/h$n-sw.ptx
done
gzip -f $d/*.bundle
du -sh $d
