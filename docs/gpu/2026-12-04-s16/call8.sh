#!/usr/bin/env bash
# Session 16, device call 8: the shipped forward (three K/V buffers at D = 128): ptxas -v of every
# stdlib mask × score × dtype × head dim, then fac bench beside flex_bench.py in one call.
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
cd .gpu/fin16 && for f in *.bundle.gz; do gunzip -kf $f; done && tar xzf ptx.tgz && cd ../..
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
ls .gpu/fin16/ptx/*.ptx | xargs -P 16 -I{} sh -c 'echo "$(basename {} .ptx): $('$ptxas' -arch=sm_90a -v {} -o /tmp/$(basename {}).cubin 2>&1 | grep -E "registers|spill|C75|rror" | tr "\n" " " | cut -c1-230)"' | sort > $OUT/ptxas.txt
echo "ptxas: $(grep -c . $OUT/ptxas.txt) kernels; with spills: $(grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | grep -c spill); C75: $(grep -c C75 $OUT/ptxas.txt)"
grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | cut -c1-150
F='^(none|causal|sliding|document|prefix)'
B() { echo "== $1"; shift; "$@" 2>&1 | grep -E "$F" | cut -c1-80; }
B "forward S=8192" .gpu/fin16/fac bench --seqlen 8192 --bundle .gpu/fin16/bench.bundle
B "forward S=2048" .gpu/fin16/fac bench --seqlen 2048 --bundle .gpu/fin16/bench.bundle
B "forward D=64" .gpu/fin16/fac bench --seqlen 8192 --dim 64 --heads 32 --batch 2 --mask none --mask causal --bundle .gpu/fin16/d64.bundle
B "backward S=8192" .gpu/fin16/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle .gpu/fin16/bench.bundle
echo "== FlexAttention"; PYTHONUNBUFFERED=1 timeout 300 python3 .gpu/fin16/flex_bench.py flex > $OUT/flex.txt 2>&1; echo "flex rc=$?"; grep -E "^what=flex S=(8192|2048)" $OUT/flex.txt | sed "s/ first_call.*//" | cut -c1-200
B "forward S=8192 again" .gpu/fin16/fac bench --seqlen 8192 --bundle .gpu/fin16/bench.bundle
B "forward S=2048 again" .gpu/fin16/fac bench --seqlen 2048 --bundle .gpu/fin16/bench.bundle
