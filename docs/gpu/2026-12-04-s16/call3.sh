set -u
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump | tail -1)
python3 - <<'PY'
import json
b=json.load(open('.gpu/tl/base.bundle'))
for k in b['kernels']:
    if k['ident']['kernel']=='flash_fwd':
        open('/tmp/b_%s.ptx' % k['ident']['mods']['mask'][:6], 'w').write(k['ptx'])
PY
for m in none causal slidin docume; do
  $ptxas -arch=sm_90a -v /tmp/b_$m.ptx -o /tmp/b_$m.cubin 2>&1 | grep -E 'registers|spill' | tr '\n' ' '; echo
  $cuobjdump --dump-sass /tmp/b_$m.cubin > $OUT/sass_$m.txt
  wc -l $OUT/sass_$m.txt
done
