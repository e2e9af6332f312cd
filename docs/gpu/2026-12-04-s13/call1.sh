#!/usr/bin/env bash
# Session 13, device call 1: A = session 12's build, B = the reciprocal epilogue and the partial
# blocks' sequence-end compare only where the sequence ends. Default and persistent, a
# sliding-window sweep (per-tile cost), and Nsight Compute on sliding window (default, persistent).
set -u
G=.gpu/s13
for v in A B; do
  echo "== $v default"; $G/$v/fac bench --bundle $G/$v/fwd.bundle 2>&1 | grep -E "^(none|causal|sliding|document|prefix|cold|warm)" | cut -c1-100
  echo "== $v persistent"; $G/$v/fac bench --bundle $G/$v/pers.bundle --const persistent=true 2>&1 | grep -E "^(none|causal|sliding|document|prefix|cold|warm)" | cut -c1-100
done
SW=(--mask none --mask "sliding_window(255, 0)" --mask "sliding_window(1023, 0)" --mask "sliding_window(4095, 0)")
echo "== B sweep default"; $G/B/fac bench --bundle $G/B/fwd.bundle "${SW[@]}" --seqlen 8192 2>&1 | grep -E "^(none|causal|sliding|document|prefix|cold|warm)" | cut -c1-100
echo "== B sweep persistent"; $G/B/fac bench --bundle $G/B/pers.bundle --const persistent=true "${SW[@]}" --seqlen 8192 2>&1 | grep -E "^(none|causal|sliding|document|prefix|cold|warm)" | cut -c1-100
export OUT=${OUT:-/tmp/out}
TOP=30 GPU_DIR=$G/B scripts/gpu-profile fwd-sw flash_fwd --mask "sliding_window(1023, 0)" --seqlen 8192 2>&1 | cut -c1-150
TOP=30 GPU_DIR=$G/B scripts/gpu-profile fwd-sw-pers flash_fwd --mask "sliding_window(1023, 0)" --seqlen 8192 --const persistent=true 2>&1 | cut -c1-150
