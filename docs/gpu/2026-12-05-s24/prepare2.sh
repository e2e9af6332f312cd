#!/usr/bin/env bash
# Session 24, after call 1: the tuned sets' conditions on mods (D = 64's groups only for none,
# causal, causal_bottom_right and prefix-LM with the identity or softcap score; heads_minor for
# sliding window too) built into DIR (default .gpu/s24b): session 18's prepare.sh for sm_90a (fac,
# tests.test, the suite's bundles, bench.bundle, the 84 forward kernels' PTX), the D = 64 bench
# bundle of five masks.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s24b}
ARCHS=sm_90a DIR=$d bash docs/gpu/2026-12-04-s18/prepare.sh
five=(--mask none --mask causal --mask "sliding_window(1023, 0)" --mask document --mask "prefix_lm(1024)")
$d/fac build "${five[@]}" --dtype bf16 --dim 64 --arch sm_90a --cache-dir - -o $d/d64g.bundle
gzip -f $d/d64g.bundle
du -sh $d
