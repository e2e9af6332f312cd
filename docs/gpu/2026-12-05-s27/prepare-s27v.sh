#!/usr/bin/env bash
# Session 27: .gpu/s27v for call 6 — session 26's fac and bench bundles (.gpu/s26p) and a bundle of
# flash_fwd_varlen (none, causal; bf16, D = 128, sm_90a) with the tuned tiles given as consts at two
# and three K/V buffers. The varlen bundle came from a throwaway test (not kept) that called
# fac.CompileForwardVarlen(fac.Options{Mask: m, DType: "bf16", Consts: c}, 128).BundleKernels(ctx, nil,
# "sm_90a", llc) for c = {BLOCK_M: 128, BLOCK_N: 128, num_warps: 8, overlap, lazy_rescale, fold_scale:
# true, num_stages: 2 | 3}, at 3f9c858's kernels (before this session's flash_fwd_varlen change).
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=.gpu/s27v; mkdir -p $d
cp .gpu/s26p/fac $d/
for f in bench-cpasync-sm_90a bench-sm_90a; do gunzip -c .gpu/s26p/$f.bundle.gz >$d/$f.bundle; done
