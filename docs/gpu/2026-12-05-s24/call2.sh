#!/usr/bin/env bash
# Session 24, device call 2 (carry .gpu/s24, built by prepare.sh): the GPU suites on the new
# defaults: sm_90a (forward, backward, device pointers, mod patterns; the driver's JIT warnings),
# then the sm_80 path forced (forward and backward): session 19's call3.sh.
set -u
G=$(pwd)/.gpu/s24 OUT=$OUT bash docs/gpu/2026-12-04-s19/call3.sh
