#!/usr/bin/env bash
# Session 21, device call 3 (carry .gpu/s21v, built by DIR=.gpu/s21v docs/gpu/2026-12-04-s18/prepare.sh
# from the final tree): ptxas -v of the 84 forward kernels (7 stdlib masks × 3 scores × bf16/f16 ×
# D 64/128: spills, C75xx), then the GPU suites on sm_90a and with the sm_80 path forced
# (session 19's call3.sh).
set -u
G=${G:-$(pwd)/.gpu/s21v}
(cd $G && tar xzf ptx.tgz)
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
for p in $G/ptx/*.ptx; do
  echo "$(basename $p .ptx): $($ptxas -arch=sm_90a -v $p -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning" | sed -E 's/ptxas (info|warning) *: //' | tr '\n' ' ' | cut -c1-200)"
done > $OUT/ptxas84.txt
echo "ptxas: $(ls $G/ptx/*.ptx | wc -l) kernels; spilling: $(grep -v ' 0 bytes spill stores, 0 bytes spill loads' $OUT/ptxas84.txt | grep -c spill); C75xx/warnings: $(grep -cE 'C75|arning' $OUT/ptxas84.txt)"
awk '{for(i=1;i<=NF;i++) if($i=="registers,") print $(i-1)}' $OUT/ptxas84.txt | sort -n | uniq -c | tr '\n' ' '; echo
G=$G OUT=$OUT bash docs/gpu/2026-12-04-s19/call3.sh
