R="--device cuda --no-check --dtype bf16 --dim 128 --batch 2 --heads 16 --seqlen-q 8192 --seqlen-k 8192"
.gpu/d/fac run -f .gpu/d/dilated.fa $R --bundle .gpu/d/tld.bundle --mask "dilated(2)" --lse-out $OUT/dil8k.npy 2>&1 | tail -1
.gpu/d/fac run $R --bundle .gpu/d/tld.bundle --mask "sliding_window(1023, 0)" --lse-out $OUT/s3sw8k.npy 2>&1 | tail -1
.gpu/d/fac bench -f .gpu/d/dilated.fa --bundle .gpu/d/d.bundle --mask "dilated(2)" --seqlen 8192 2>&1 | grep dilated | cut -c1-80
ls $OUT
