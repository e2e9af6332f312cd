#!/usr/bin/env bash
# Session 12, device call 1: the persistent tile loop (static snake schedule) beside the
# tuned non-persistent forward; ptxas -v of both. Built by: go build -o .gpu/s12/fac ./cmd/fac;
# fac build <bench masks> [--const ... persistent=true] (see BENCHMARKS.md, session 12).
set -u
G=.gpu/s12
PC="--const BLOCK_M=128 --const BLOCK_N=128 --const num_warps=8 --const overlap=true --const warp_specialize=true --const persistent=true"
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
for f in $G/ptx/*.ptx; do echo "$(basename $f): $($ptxas -arch=sm_90a -v $f -o /dev/null 2>&1 | grep -E 'registers|spill|C75|arning' | tr '\n' ' ')"; done
echo "== tuned"; $G/fac bench --bundle $G/tuned.bundle 2>&1 | grep -v "^no llc"
echo "== persistent"; $G/fac bench --bundle $G/pers.bundle $PC 2>&1 | grep -v "^no llc"
echo "== persistent, one program per tile"; FAC_PERSISTENT_PROGRAMS=100000000 $G/fac bench --bundle $G/pers.bundle $PC 2>&1 | grep -v "^no llc"
echo "== d64 tuned"; $G/fac bench --bundle $G/d64.bundle --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -v "^no llc"
echo "== d64 persistent"; $G/fac bench --bundle $G/d64pers.bundle --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal $PC 2>&1 | grep -v "^no llc"
