#!/usr/bin/env bash
set -u
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for f in .gpu/p1/bench5.bundle.gz .gpu/pE/bench.bundle.gz .gpu/pF/bench.bundle.gz; do gunzip -kf $f; done
cd .gpu/p2
for v in A B C D E_none E_causal E_document F_none; do
  echo "== $v: $(ptxas -arch=sm_90a -v $v.ptx -o /tmp/$v.cubin 2>&1 | grep -E 'registers|spill|rror' | tr '\n' ' ' | cut -c1-150)"
  cuobjdump -sass /tmp/$v.cubin > /tmp/$v.sass
  echo "   insts $(grep -c '/\*[0-9a-f]*\*/ ' /tmp/$v.sass) BSSY $(grep -c BSSY /tmp/$v.sass) RED $(grep -c 'REDG\|ATOMG' /tmp/$v.sass) LDL $(grep -c LDL /tmp/$v.sass) STL $(grep -c STL /tmp/$v.sass)"
  gzip -c /tmp/$v.sass > $OUT/$v.sass.gz
done
cd ../..
F='^(none|causal|sliding|document|prefix)'
for round in 1 2; do
  for d in p1:bench5 pE:bench pF:bench; do
    n=${d%%:*} b=${d##*:}
    echo "== round $round $n"
    .gpu/$n/fac bench --backward --seqlen 8192 --warmup 3 --reps 10 --bundle .gpu/$n/$b.bundle 2>&1 | grep -E "$F" | cut -c1-75
  done
done
