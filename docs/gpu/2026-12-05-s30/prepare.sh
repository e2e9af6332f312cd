#!/usr/bin/env bash
# Session 30: builds .gpu/s32 for callB.sh (the new defaults: sliding window at D = 128 on two CTAs
# a multiprocessor, fwdTwoCTAs; D = 64 causal-shaped masks heads-minor in groups of 16,
# fwdGroupsHeadsMinor). gpu-prepare for sm_90a, then the previous defaults' kernels for the
# comparison in the same call (old-sw: ctas_per_sm=1 gives fwdHeadsMinor's kernel; old-d64:
# heads_minor=false gives fwdGroupsSet's), and PTX of the two-CTA tiles on the masks and scores the
# set does not name yet (ptx3/), for ptxas -v.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export CGO_ENABLED=0 FAC_LLC=$(scripts/ensure-llc)
d=.gpu/s32
GPU_DIR=$d scripts/gpu-prepare --arch sm_90a
gunzip -f $d/bench-sm_90a.bundle.gz
$d/fac build --mask "sliding_window(1023, 0)" --mask document --dtype bf16 --dim 128 --arch sm_90a --num-splits 1 --pack-gqa off \
  --const ctas_per_sm=1 -o $d/old-sw.bundle
$d/fac build --mask causal --mask none --dtype bf16 --dim 64 --arch sm_90a --num-splits 1 --pack-gqa off \
  --const heads_minor=false -o $d/old-d64.bundle
C=(--const BLOCK_M=128 --const BLOCK_N=64 --const num_warps=8 --const ctas_per_sm=2 --const SPARSE_Q=128 --const SPARSE_K=64
   --const num_stages=2 --const warp_specialize=false --const overlap=false --const heads_minor=true --const heads_group=16
   --const lazy_rescale=true --const fold_scale=true)
$d/fac run --device cpu --mask "sliding_window(100, 0)" --dtype bf16 --dim 128 "${C[@]}" \
  --batch 2 --heads 6 --kv-heads 3 --seqlen-q 700 --seqlen-k 650 | tail -1
mkdir -p $d/ptx3
for m in "sliding_window(20, 3)" document; do
  for sc in identity "softcap(2.5)" alibi; do
    $d/fac compile --mask "$m" --score "$sc" --const DTYPE=bf16 --const HEAD_DIM=128 "${C[@]}" --arch sm_90a --emit ptx \
      -o "$d/ptx3/c2n_${m%%(*}_${sc%%(*}.ptx" &
  done
done
wait
# The document bundle with the two-CTA tiles, timed beside the default.
$d/fac build --mask document --dtype bf16 --dim 128 --arch sm_90a --num-splits 1 --pack-gqa off "${C[@]}" -o $d/c2n-doc.bundle
gzip -f $d/old-*.bundle $d/c2n-doc.bundle $d/bench-sm_90a.bundle
du -sh $d
