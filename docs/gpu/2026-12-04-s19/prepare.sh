#!/usr/bin/env bash
# Session 19: the builds the device calls carry, made here (Go and llc): fac, the bench bundles of
# three schedules of the tuned forward (scripts/gpu-sweep: base; pers3, persistent with the tuned
# three K/V buffers, which now fit by storing O from registers; pers2, persistent at two buffers
# with the exchange), a correctness bundle of the persistent forward at odd shapes, and the PTX of
# the persistent forwards (masks × identity/alibi, D 64/128) for ptxas -v, and the timeline bundles.
# Into DIR (default .gpu/s19).
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s19}
export CGO_ENABLED=0
FAC_LLC=$(scripts/ensure-llc); export FAC_LLC
GPU_DIR=$d VARIANTS="base=; pers3=;persistent=true pers2=;persistent=true,num_stages=2" DIMS="64 128" \
  scripts/gpu-sweep prepare
f=$d/sweep/fac
masks=(none causal "sliding_window(1023, 0)" document "prefix_lm(1024)" "sliding_window(20, 3)")
mflags=(); for m in "${masks[@]}"; do mflags+=(--mask "$m"); done
$f build "${mflags[@]}" --const persistent=true --dtype bf16,f16 --dim 64,128 --arch sm_90a --cache-dir - -o $d/pers-check.bundle
# D = 64 on 256-row tiles with four consumer warpgroups (640 threads; 256-blocks), and the tuned
# 128-row tiles on 256-blocks beside it (the same block mask).
w16=(--const BLOCK_M=256 --const BLOCK_N=64 --const num_warps=16 --const overlap=true --const warp_specialize=true)
$f build --mask none --mask causal --block 256 "${w16[@]}" --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/d64w16.bundle
$f build --mask none --mask causal --block 256 --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/d64b256.bundle
mkdir -p $d/ptx
for m in none causal; do
  $f compile --cache-dir - --mask "$m" "${w16[@]}" --const SPARSE_Q=256 --const SPARSE_K=256 --const DTYPE=bf16 --const HEAD_DIM=64 \
    --arch sm_90a --emit ptx -o $d/ptx/d64w16_$m.ptx
done
for m in "${masks[@]}"; do for s in identity alibi; do for h in 64 128; do for ns in 2 3; do
  [ $h = 64 ] && [ $ns = 3 ] && continue
  n=$(echo "pers${ns}_${m}_${s}_d$h" | tr -c 'a-z0-9_\n' '_')
  c=(--const persistent=true); [ $h = 128 ] && c+=(--const num_stages=$ns)
  $f compile --cache-dir - --mask "$m" --score "$s" "${c[@]}" --const DTYPE=bf16 --const HEAD_DIM=$h --arch sm_90a --emit ptx -o $d/ptx/$n.ptx
done; done; done; done
# The in-kernel timeline (internal/tools/ptxstamp; per tile for the persistent kernel) of base and
# pers3, for call 4.
for v in base pers3; do
  gunzip -c $d/sweep/$v-d128.bundle.gz >$d/$v.bundle
  go run ./internal/tools/ptxstamp patch $d/$v.bundle $d/stamp-$v.bundle && rm $d/$v.bundle
done
(cd $d && tar czf ptx.tgz ptx && rm -rf ptx && gzip -f pers-check.bundle d64w16.bundle d64b256.bundle stamp-base.bundle stamp-pers3.bundle)
du -sh $d
