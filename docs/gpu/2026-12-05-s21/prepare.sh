#!/usr/bin/env bash
# Session 21: builds for the device calls (Go and llc here), into DIR (default .gpu/s21): the
# D = 64 schedule sweep on top of the new default (lazy_rescale and fold_scale in the tuned set):
# t (the tuned set), pp (pingpong), s3 (three K/V buffers); n256 (128×256 tiles, 256-wide mask
# blocks), n256s1 (128×256 without overlap); and the default's timeline bundle
# (internal/tools/ptxstamp) at D = 128.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s21}
export CGO_ENABLED=0
FAC_LLC=$(scripts/ensure-llc); export FAC_LLC
GPU_DIR=$d VARIANTS="t=; pp=;pingpong=true s3=;num_stages=3" \
  DIMS="64" scripts/gpu-sweep prepare
f=$d/sweep/fac
# 128×256 tiles need 256-wide mask blocks (--block 256).
n256=(--const BLOCK_M=128 --const BLOCK_N=256 --const num_warps=8 --const warp_specialize=true --const lazy_rescale=true --const fold_scale=true)
$f build --mask none --mask causal --block 256 "${n256[@]}" --const overlap=true --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/n256.bundle
$f build --mask none --mask causal --block 256 "${n256[@]}" --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/n256s1.bundle
for m in none causal; do
  $f compile --cache-dir - --mask $m "${n256[@]}" --const overlap=true --const SPARSE_Q=256 --const SPARSE_K=256 --const DTYPE=bf16 --const HEAD_DIM=64 \
    --arch sm_90a --emit ptx -o $d/sweep/n256-d64-$m.ptx
done
masks=(none causal "sliding_window(1023, 0)" document "prefix_lm(1024)")
mflags=(); for m in "${masks[@]}"; do mflags+=(--mask "$m"); done
$f build "${mflags[@]}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/t128.bundle
go run ./internal/tools/ptxstamp patch $d/t128.bundle $d/stamp-t.bundle
rm $d/t128.bundle
(cd $d && gzip -f *.bundle)
du -sh $d
