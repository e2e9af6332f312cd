#!/usr/bin/env bash
# Session 24: the new defaults (tuned sets in order: D = 64 on three consumer groups with 192-row
# mask blocks and the TMA store, falling back to the 128×128 set; heads_minor for document at D = 128)
# built into DIR (default .gpu/s24): session 18's prepare.sh (fac, tests.test, the suite's bundles
# for sm_90a and sm_80, bench.bundle, the 84 forward kernels' PTX, flex_bench.py), then the anchor
# bundles: D = 64 five masks (default, and the 128-row fallback: --block 128), heads_minor for
# sliding window at D = 128, and decode_bench.py.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s24}
DIR=$d bash docs/gpu/2026-12-04-s18/prepare.sh
five=(--mask none --mask causal --mask "sliding_window(1023, 0)" --mask document --mask "prefix_lm(1024)")
$d/fac build "${five[@]}" --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/d64g.bundle
$d/fac build "${five[@]}" --block 128 --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/d64t.bundle
$d/fac build --mask "sliding_window(1023, 0)" --mask causal --const heads_minor=true --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/hm.bundle
gzip -f $d/d64g.bundle $d/d64t.bundle $d/hm.bundle
cp ../shared/bench/decode_bench.py $d/
du -sh $d
# Experiment: three consumer groups at D = 128 with BLOCK_N = 64 (192-row tiles; 230,400 bytes of
# shared memory at four buffers): g3n64.
G3=(--const BLOCK_M=64 --const BLOCK_N=64 --const num_warps=4 --const consumer_groups=3 --const SPARSE_Q=192
    --const SPARSE_K=128 --const num_stages=4 --const tma_store=true --const warp_specialize=true --const overlap=true
    --const lazy_rescale=true --const fold_scale=true)
$d/fac build "${five[@]}" "${G3[@]}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/g3n64.bundle
$d/fac compile --cache-dir - --mask "sliding_window(1023, 0)" "${G3[@]}" --const DTYPE=bf16 --const HEAD_DIM=128 --arch sm_90a -o $d/g3n64-sw.ptx
gzip -f $d/g3n64.bundle
