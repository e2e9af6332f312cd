#!/usr/bin/env bash
# Session 16, device call 10: tile selects behind a predicate move (one select per element where
# llc made one per condition): ptxas -v of the forward matrix and the bench bundle's backward
# kernels, then forward and backward timed against the shipped build in turns.
set -u
cd .gpu/m && gunzip -kf bench.bundle.gz && tar xzf ptx.tgz && cd ../..
cd .gpu/fin16 && gunzip -kf bench.bundle.gz && tar xzf ptx.tgz && cd ../..
python3 - <<'PY'
import json
b=json.load(open('.gpu/m/bench.bundle'))
for k in b['kernels']:
    if k['ident']['kernel'] in ('flash_bwd',):
        open('.gpu/m/ptx/bwd_%s.ptx' % k['ident']['mods']['mask'][:6], 'w').write(k['ptx'])
PY
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
ls .gpu/m/ptx/*.ptx | xargs -P 16 -I{} sh -c 'echo "$(basename {} .ptx): $('$ptxas' -arch=sm_90a -v {} -o /tmp/$(basename {}).cubin 2>&1 | grep -E "spill|C75|rror" | tr "\n" " " | cut -c1-200)"' | sort > $OUT/ptxas.txt
echo "ptxas: $(grep -c . $OUT/ptxas.txt) kernels; with spills: $(grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | grep -c spill); C75: $(grep -c C75 $OUT/ptxas.txt)"
grep -v ' 0 bytes spill stores' $OUT/ptxas.txt | cut -c1-150
cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump | tail -1)
for f in /tmp/bwd_*.ptx.cubin /tmp/bf16_d128_slidingwindow203_iden.ptx.cubin /tmp/bf16_d128_document_iden.ptx.cubin; do echo "$f FSEL $($cuobjdump --dump-sass $f 2>/dev/null | grep -c FSEL) ISETP $($cuobjdump --dump-sass $f 2>/dev/null | grep -c ISETP)"; done
for n in bf16_d128_slidingwindow203_iden bf16_d128_document_iden; do $ptxas -arch=sm_90a .gpu/fin16/ptx/$n.ptx -o /tmp/base_$n.cubin; echo "shipped $n FSEL $($cuobjdump --dump-sass /tmp/base_$n.cubin | grep -c FSEL) ISETP $($cuobjdump --dump-sass /tmp/base_$n.cubin | grep -c ISETP)"; done
F='^(none|causal|sliding|document|prefix)'
B() { echo "== $1"; shift; "$@" 2>&1 | grep -E "$F" | cut -c1-80; }
for r in 1 2; do
  B "r$r shipped fwd 8k" .gpu/fin16/fac bench --seqlen 8192 --bundle .gpu/fin16/bench.bundle
  B "r$r M fwd 8k" .gpu/m/fac bench --seqlen 8192 --bundle .gpu/m/bench.bundle
done
B "shipped fwd 2k" .gpu/fin16/fac bench --seqlen 2048 --bundle .gpu/fin16/bench.bundle
B "M fwd 2k" .gpu/m/fac bench --seqlen 2048 --bundle .gpu/m/bench.bundle
B "shipped bwd" .gpu/fin16/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle .gpu/fin16/bench.bundle
B "M bwd" .gpu/m/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle .gpu/m/bench.bundle
