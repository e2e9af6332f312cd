#!/usr/bin/env bash
# Session 20: the builds the device calls carry, made here (Go and llc), into DIR (default .gpu/s20):
# fac and the bench bundles of six schedules of the tuned forward (scripts/gpu-sweep), D = 64 and
# 128: base; lazy (lazy_rescale: O's rescale skipped in warps whose rows' max stayed); fold
# (fold_scale: the scale in exp2's factor, not in each score); lf (both); pers3 (persistent, three
# K/V buffers, O stored from registers); plf3 (pers3 with both). A correctness bundle of lf and plf3
# at odd shapes, the PTX of lf and plf3 for ptxas -v, D = 64 on 256-row tiles (w16, and w16 with
# both), the backward with and without fold_scale, and timeline bundles (internal/tools/ptxstamp)
# of base, lf and plf3.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s20}
export CGO_ENABLED=0
FAC_LLC=$(scripts/ensure-llc); export FAC_LLC
LF=lazy_rescale=true,fold_scale=true
GPU_DIR=$d VARIANTS="base=; lazy=;lazy_rescale=true fold=;fold_scale=true lf=;$LF pers3=;persistent=true plf3=;persistent=true,$LF" \
  DIMS="64 128" scripts/gpu-sweep prepare
f=$d/sweep/fac
lfc=(--const lazy_rescale=true --const fold_scale=true)
masks=(none causal "sliding_window(1023, 0)" document "prefix_lm(1024)" "sliding_window(20, 3)")
mflags=(); for m in "${masks[@]}"; do mflags+=(--mask "$m"); done
$f build "${mflags[@]}" "${lfc[@]}" --dtype bf16,f16 --dim 64,128 --arch sm_90a --cache-dir - -o $d/lf-check.bundle
$f build "${mflags[@]}" "${lfc[@]}" --const persistent=true --dtype bf16,f16 --dim 64,128 --arch sm_90a --cache-dir - -o $d/plf3-check.bundle
w16=(--const BLOCK_M=256 --const BLOCK_N=64 --const num_warps=16 --const overlap=true --const warp_specialize=true)
$f build --mask none --mask causal --block 256 "${w16[@]}" --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/d64w16.bundle
$f build --mask none --mask causal --block 256 "${w16[@]}" "${lfc[@]}" --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/d64w16lf.bundle
# The backward with and without fold_scale (P's exp2 takes the scale: no sign test there).
bm=(--mask none --mask causal --mask "sliding_window(1023, 0)" --mask document --mask "prefix_lm(1024)")
$f build --backward "${bm[@]}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/bwd.bundle
$f build --backward "${bm[@]}" --const fold_scale=true --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/bwdfold.bundle
mkdir -p $d/ptx
for m in "${masks[@]}"; do for s in identity alibi; do for h in 64 128; do
  n=$(echo "lf_${m}_${s}_d$h" | tr -c 'a-z0-9_\n' '_')
  $f compile --cache-dir - --mask "$m" --score "$s" "${lfc[@]}" --const DTYPE=bf16 --const HEAD_DIM=$h --arch sm_90a --emit ptx -o $d/ptx/$n.ptx
done; done
  n=$(echo "plf3_${m}_d128" | tr -c 'a-z0-9_\n' '_')
  $f compile --cache-dir - --mask "$m" "${lfc[@]}" --const persistent=true --const DTYPE=bf16 --const HEAD_DIM=128 --arch sm_90a --emit ptx -o $d/ptx/$n.ptx
  n=$(echo "bwdfold_${m}_d128" | tr -c 'a-z0-9_\n' '_')
  $f compile --cache-dir - --kernel flash_bwd --mask "$m" --const fold_scale=true --const DTYPE=bf16 --const HEAD_DIM=128 --arch sm_90a --emit ptx -o $d/ptx/$n.ptx
done
for m in none causal; do
  $f compile --cache-dir - --mask "$m" "${w16[@]}" "${lfc[@]}" --const SPARSE_Q=256 --const SPARSE_K=256 --const DTYPE=bf16 --const HEAD_DIM=64 \
    --arch sm_90a --emit ptx -o $d/ptx/d64w16lf_$m.ptx
done
for v in base lf plf3; do
  gunzip -c $d/sweep/$v-d128.bundle.gz >$d/$v.bundle
  go run ./internal/tools/ptxstamp patch $d/$v.bundle $d/stamp-$v.bundle || echo "ptxstamp: $v not patched"
  rm $d/$v.bundle
done
(cd $d && tar czf ptx.tgz ptx && rm -rf ptx && gzip -f *.bundle)
du -sh $d
