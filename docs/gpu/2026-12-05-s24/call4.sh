#!/usr/bin/env bash
# Session 24, device call 4, for a short call when little device time is left (carry .gpu/s24p:
# the 32 of prepare2.sh's 84 forward PTX files that differ from prepare.sh's, whose ptxas call 1
# ran: D = 64 kernels now on 128×128 tiles, sliding window at D = 128 now heads_minor): ptxas -v.
set -u
D=$(pwd)/.gpu/s24p
(cd $D && tar xzf ptx.tgz)
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
for p in $D/ptx/*.ptx; do
  echo "$(basename $p .ptx): $($ptxas -arch=sm_90a -v $p -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning|rror" | sed -E 's/ptxas (info|warning) *: //' | tr '\n' ' ' | cut -c1-200)" &
done > $OUT/ptxas84.txt
wait
echo "ptxas: $(ls $D/ptx/*.ptx | wc -l) kernels, $(wc -l < $OUT/ptxas84.txt) reports; spilling: $(grep -v ' 0 bytes spill stores, 0 bytes spill loads' $OUT/ptxas84.txt | grep -c spill); C75xx/warnings/errors: $(grep -cE 'C75|arning|rror' $OUT/ptxas84.txt)"
grep -v ' 0 bytes spill stores, 0 bytes spill loads' $OUT/ptxas84.txt | grep spill | cut -c1-150 | head
awk '{for(i=1;i<=NF;i++) if($i=="registers,") print $(i-1)}' $OUT/ptxas84.txt | sort -n | uniq -c | tr '\n' ' '; echo
