#!/usr/bin/env bash
# Session 12, device call 2: the backward with dS selected on P (keep read once, its select sunk into
# the mask branch): ptxas -v and fac bench --backward of HEAD (180e32f) and the new kernels, then the
# GPU backward suite (short) on the new ones.
set -u
G=.gpu/s12
[ -e $G/test-sm_90a.bundle.gz ] && gunzip -kf $G/test-sm_90a.bundle.gz
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
for f in $G/ptx/bwd*.ptx; do echo "$(basename $f): $($ptxas -arch=sm_90a -c -v $f -o /dev/null 2>&1 | grep -E 'registers|spill|C75|arning' | tr '\n' ' ' | sed 's/ptxas info *: //g')"; done
for v in head new head new; do
  echo "== backward $v"; $G/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle $G/bwd-$v.bundle 2>&1 | grep -v "^no llc"
done
PP="--const BLOCK_M=128 --const BLOCK_N=128 --const num_warps=8 --const overlap=true --const warp_specialize=true --const pingpong=true"
echo "== forward tuned / producer + pingpong, D = 128"
$G/fac bench --bundle $G/tuned.bundle --seqlen 8192 --mask none --mask causal --mask "sliding_window(1023, 0)" 2>&1 | grep -v "^no llc"
$G/fac bench --bundle $G/wspp.bundle --seqlen 8192 --mask none --mask causal --mask "sliding_window(1023, 0)" $PP 2>&1 | grep -v "^no llc"
echo "== forward tuned / producer + pingpong, D = 64"
$G/fac bench --bundle $G/d64.bundle --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -v "^no llc"
$G/fac bench --bundle $G/wspp.bundle --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal $PP 2>&1 | grep -v "^no llc"
N256="--const BLOCK_M=128 --const BLOCK_N=256 --const num_warps=8 --const overlap=true --const warp_specialize=true"
$G/fac bench --bundle $G/d64n256.bundle --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal $N256 --block 256 2>&1 | grep -v "^no llc"
cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=../$G/test-sm_90a.bundle FAC_BUNDLE_EXTRA=../$G/test-det-sm_90a.bundle \
  ../$G/tests.test -test.run 'GPUBackward|GPUSinksBackward|GPUVarlenBackward' -test.v -test.count=1 -test.short -test.timeout 8m > /tmp/bwdtest.log 2>&1
echo "tests rc=$?"
grep -E "^(--- FAIL|FAIL|ok|PASS)|^--- PASS|largest relative|loaded [0-9]+ kernels" /tmp/bwdtest.log | tail -30
