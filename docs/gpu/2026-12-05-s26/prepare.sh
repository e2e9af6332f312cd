#!/usr/bin/env bash
# Session 26: the current defaults (bench.bundle at D = 128, d64.bundle at D = 64; forward,
# bf16, sm_90a) and the last cheap schedule variants against issue 8's two misses, into DIR
# (default .gpu/s26): sliding window 1024 at D = 128 with tma_store, prefetch_q, full_first or
# two stages; D = 64 none and causal (the three consumer groups) at 3 and 5 stages, with
# full_first or prefetch_q. FlexAttention's and SDPA's scripts go along.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s26}
source scripts/gpu-env $d
cp ../shared/bench/flex_bench.py ../shared/bench/decode_bench.py $d/
bench=(--mask none --mask causal --mask "sliding_window(1023, 0)" --mask document --mask "prefix_lm(1024)")
$d/fac build "${bench[@]}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/bench.bundle &
$d/fac build "${bench[@]}" --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/d64.bundle &
wait
sw() { $d/fac build --mask "sliding_window(1023, 0)" "${@:2}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/sw-$1.bundle; }
sw tms --const tma_store=true &
sw pf --const prefetch_q=true &
wait
sw ff --const full_first=true &
sw s2 --const num_stages=2 &
wait
g() { $d/fac build --mask none --mask causal "${@:2}" --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/d64-$1.bundle; }
g s3 --const num_stages=3 &
g s5 --const num_stages=5 &
wait
g ff --const full_first=true &
g pf --const prefetch_q=true &
wait
gzip -f $d/*.bundle
du -sh $d; ls -la $d
