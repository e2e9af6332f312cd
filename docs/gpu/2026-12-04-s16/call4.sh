set -u
T=.gpu/tl
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas | tail -1)
python3 - <<'PY'
import json
for bn in ('s3', 'd64s3', 'd64s4'):
    b=json.load(open('.gpu/tl/%s.bundle' % bn))
    for k in b['kernels']:
        if k['ident']['kernel']=='flash_fwd':
            open('/tmp/%s_%s.ptx' % (bn, k['ident']['mods']['mask'][:6]), 'w').write(k['ptx'])
PY
for f in /tmp/s3_*.ptx /tmp/d64s*.ptx; do echo "$(basename $f): $($ptxas -arch=sm_90a -v $f -o /tmp/x.cubin 2>&1 | grep -E 'spill|C75|rror|arning' | tr '\n' ' ' | cut -c1-200)"; done
R="--device cuda --no-check --dtype bf16 --dim 128 --const num_stages=3"
.gpu/fac run $R --bundle $T/tl3.bundle --mask none --batch 8 --heads 16 --seqlen-q 2048 --seqlen-k 2048 --lse-out $OUT/s3none2k.npy 2>&1 | grep -v "check skipped\|^compile"
.gpu/fac run $R --bundle $T/tl3.bundle --mask "sliding_window(1023, 0)" --batch 2 --heads 16 --seqlen-q 8192 --seqlen-k 8192 --lse-out $OUT/s3sw8k.npy 2>&1 | grep -v "check skipped\|^compile"
F='^(none|causal|sliding|document|prefix)'
for round in 1 2; do
  for v in b2:num_stages=2 s3:num_stages=3; do
    b=${v%%:*}; c=${v#*:}
    echo "== round $round $b"
    .gpu/fac bench --bundle $T/$b.bundle --const $c --seqlen 8192 2>&1 | grep -E "$F" | cut -c1-80
    .gpu/fac bench --bundle $T/$b.bundle --const $c --seqlen 2048 2>&1 | grep -E "$F" | cut -c1-80
  done
  for s in 2 3 4; do
    echo "== round $round d64 s$s"
    .gpu/fac bench --bundle $T/d64s$s.bundle --const num_stages=$s --seqlen 8192 --dim 64 --heads 32 --batch 2 --mask none --mask causal 2>&1 | grep -E "$F" | cut -c1-80
  done
done
for m in causal "sliding_window(1023, 0)" none document; do
  .gpu/fac run --device cuda --bundle $T/s3.bundle --const num_stages=3 --mask "$m" --random-aux --batch 2 --heads 4 --seqlen-q 1000 --seqlen-k 1777 --dim 128 --dtype bf16 2>&1 | tail -1
done
.gpu/fac run --device cuda --bundle $T/d64s4.bundle --const num_stages=4 --mask causal --batch 2 --heads 4 --seqlen-q 1500 --seqlen-k 1500 --dim 64 --dtype bf16 2>&1 | tail -1
python3 $T/analyze.py $OUT/s3none2k.npy $OUT/s3sw8k.npy 2>&1 | grep -E "==|it[0-9] dur|mid|loop |total|Q ready|cons"
