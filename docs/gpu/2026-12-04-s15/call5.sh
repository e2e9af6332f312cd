#!/usr/bin/env bash
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for n in pF/bench pI/bench pM/bench pN/bench; do gunzip -kf .gpu/$n.bundle.gz; done
cd .gpu/p2
for v in M_none M_causal M_docume M_slidin N_none N_causal N_docume N_slidin; do
  echo "== $v: $(ptxas -arch=sm_90a -v $v.ptx -o /tmp/$v.cubin 2>&1 | grep -E 'spill|C75|rror' | tr '\n' ' ' | cut -c1-200)"
  cuobjdump -sass /tmp/$v.cubin > /tmp/$v.sass
  echo "   insts $(grep -c '/\*[0-9a-f]*\*/ ' /tmp/$v.sass) BSSY $(grep -c BSSY /tmp/$v.sass) RED $(grep -c 'REDG' /tmp/$v.sass) LDL $(grep -c LDL /tmp/$v.sass) DEPBAR $(grep -c DEPBAR /tmp/$v.sass)"
  gzip -c /tmp/$v.sass > $OUT/$v.sass.gz
done
cd ../..
F='^(none|causal|sliding|document|prefix)'
for round in 1 2; do
  for d in pF:bench pI:bench pM:bench pN:bench; do
    n=${d%%:*} b=${d##*:}
    echo "== round $round $n"
    .gpu/$n/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle .gpu/$n/$b.bundle 2>&1 | grep -E "$F" | cut -c1-75
  done
done
