#!/bin/bash
D=.gpu/s11d
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
ls $D/ptx/*.ptx | xargs -P 16 -I{} sh -c 'f={}; r=$("$0" -arch=sm_90a -v "$f" -o /dev/null 2>&1 | grep -E "spill|C75|rror" | tr "\n" " "); echo "$(basename "$f" .ptx): $r"' "$ptxas" | sed -E 's/ptxas info *: //g' | sort
for args in "--mask document --random-aux --seqlen-q 3000 --seqlen-k 3000" "--mask sliding_window(1023,0) --seqlen-q 333 --seqlen-k 1000"; do
  timeout 60 $D/fac run --device cuda --bundle $D/fwd.bundle --dtype bf16 --dim 128 --batch 2 --heads 4 --kv-heads 2 $args 2>&1 | tail -1
done
timeout 100 $D/fac bench --bundle $D/fwd.bundle --seqlen 8192 2>&1 | grep -v "^no llc\|^device"
