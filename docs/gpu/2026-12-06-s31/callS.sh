#!/usr/bin/env bash
# Session 31's second call (carry .gpu/s32): SASS of every forward kernel PTX in .gpu/s32/ptx (the
# stdlib masks x scores at D = 64 and 128, with the tuned defaults of session 30), counting HGMMA
# (wgmma) and UTMALDG (TMA loads), with ptxas -v's registers and spills beside them.
set -u
exec > >(tee "$OUT/callS.txt") 2>&1
D=$(pwd)/.gpu/s32
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
cuobjdump=$(dirname $ptxas)/cuobjdump
cd $D/ptx && for x in flash_fwd_*.gz; do gunzip -kf $x; done
ls flash_fwd_*.ptx | xargs -P 16 -I{} sh -c \
  'f={}; n=$(basename $f .ptx); $0 -arch=sm_90a -v $f -o /tmp/$n.cubin > /tmp/$n.v 2>&1 || $0 -arch=sm_90a -c -v $f -o /tmp/$n.cubin > /tmp/$n.v 2>&1;
   s=$($1 --dump-sass /tmp/$n.cubin); echo "$n: HGMMA $(echo "$s" | grep -c HGMMA) UTMALDG $(echo "$s" | grep -c UTMALDG) $(grep -E "registers|spill|C75|arning" /tmp/$n.v | sed -E "s/ptxas info *: //g; s/bytes stack frame, //" | tr "\n" " ")"' $ptxas $cuobjdump | sort | cut -c1-200
