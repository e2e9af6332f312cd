set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
T=.gpu/tl
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
python3 - <<'PY'
import json
b=json.load(open('.gpu/tl/tl.bundle'))
for k in b['kernels']:
    if '%tl0' in k['ptx']:
        open('/tmp/tl_%s.ptx' % k['ident']['mods']['mask'][:6], 'w').write(k['ptx'])
PY
for f in /tmp/tl_*.ptx; do echo "$f: $($ptxas -arch=sm_90a -v $f -o /tmp/x.cubin 2>&1 | grep -E 'spill|C75|rror|arning' | tr '\n' ' ' | cut -c1-300)"; done
R="--device cuda --no-check --dtype bf16 --dim 128"
.gpu/fac run $R --bundle $T/tl.bundle --mask none --batch 8 --heads 16 --seqlen-q 2048 --seqlen-k 2048 --lse-out $OUT/none2k.npy 2>&1 | tail -2
.gpu/fac run $R --bundle $T/tl.bundle --mask none --batch 2 --heads 16 --seqlen-q 8192 --seqlen-k 8192 --lse-out $OUT/none8k.npy 2>&1 | tail -2
.gpu/fac run $R --bundle $T/tl.bundle --mask "sliding_window(1023, 0)" --batch 2 --heads 16 --seqlen-q 8192 --seqlen-k 8192 --lse-out $OUT/sw8k.npy 2>&1 | tail -2
.gpu/fac run $R --bundle $T/tl.bundle --mask causal --batch 2 --heads 16 --seqlen-q 8192 --seqlen-k 8192 --lse-out $OUT/causal8k.npy 2>&1 | tail -2
.gpu/fac run $R --bundle $T/tl.bundle --mask document --random-aux --doc-len 1000 --batch 2 --heads 16 --seqlen-q 8192 --seqlen-k 8192 --lse-out $OUT/doc8k.npy 2>&1 | tail -2
python3 $T/analyze.py $OUT/none2k.npy $OUT/none8k.npy $OUT/sw8k.npy $OUT/causal8k.npy $OUT/doc8k.npy
