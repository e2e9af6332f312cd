#!/usr/bin/env bash
# Session 22, device call 4 (carry .gpu/s22m and .gpu/s22m-suite, built by prepare-tms.sh from branch
# s22-tmastore; the timeline bundles stamp-t and stamp-p copied from .gpu/s22t, built by prepare.sh):
# 1. in-kernel timelines (with the epilogue's stamps) of the default (t), persistent (p) and the TMA
#    store (tms) at S = 8192, B = 2, H = 16, D = 128: sliding window 1024, document, causal;
# 2. ptxas -v of tms (forward D 64/128, backward causal);
# 3. GPU checks of tms, forward and backward (the deterministic one too: flash_bwd_dq's dQ), odd
#    shapes and GQA, bf16 D 64/128, f16 D 128;
# 4. t against tms in turns: forward (two rounds), backward, D = 64, S = 32768; p2tms (persistent,
#    two buffers, the TMA store: FlashAttention-3's arrangement) forward and its checks; hm
#    (flash_fwd's heads_minor) at S = 8192 and 2048 against t, and its checks; hmtms (both) at S = 8192;
# 5. the GPU suite on sm_90a (the merged tree's kernels, .gpu/s22v's files).
set -u
D=$(pwd)/.gpu/s22m; S=$(pwd)/.gpu/s22m-suite
(cd $D && for f in *.gz; do gunzip -kf $f; done && tar xzf ptx.tgz)
f=$D/fac
for v in t p tms; do c=""; e=""; [ $v = p ] && c="--const persistent=true"; [ $v = tms ] && e=1
  for m in "sliding_window(1023, 0)" document causal; do n=$(echo "$m" | tr -c 'a-z0-9\n' '_' | cut -c1-14)
    FAC_TMA_STORE=$e $f run --device cuda --bundle $D/stamp-$v.bundle $c --mask "$m" --random-aux --no-check --lse-out $OUT/lse-$v-$n.npy \
      --seqlen-q 8192 --seqlen-k 8192 --batch 2 --heads 16 --dim 128 --dtype bf16 2>&1 | tail -1 | cut -c1-100
    echo "rc=${PIPESTATUS[0]} timeline $v $m"
  done
done
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | tail -1)
echo "== ptxas -v (tms)"
for p in $D/ptx/*.ptx; do
  echo "$(basename $p .ptx): $($ptxas -arch=sm_90a -v $p -o /dev/null 2>&1 | grep -E "registers|spill|C75|arning|rror" | sed -E 's/ptxas (info|warning) *: //' | tr '\n' ' ' | cut -c1-160)"
done
echo "== tms checks"
for m in causal "sliding_window(20, 3)" document none; do for h in 64 128; do
  FAC_TMA_STORE=1 $f run --device cuda --bundle $D/tms-check.bundle --mask "$m" --random-aux --doc-len 300 --backward \
    --seqlen-q 1537 --seqlen-k 1000 --dim $h --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-90
  echo "rc=${PIPESTATUS[0]} tms $m D=$h"
done; done
FAC_TMA_STORE=1 $f run --device cuda --bundle $D/tms-check.bundle --mask "prefix_lm(100)" --backward --scale -0.2 \
  --seqlen-q 700 --seqlen-k 900 --dim 128 --heads 2 --batch 1 --dtype f16 2>&1 | tail -1 | cut -c1-90
echo "rc=${PIPESTATUS[0]} tms f16 prefix_lm(100) D=128 scale -0.2"
for h in 64 128; do
  FAC_TMA_STORE=1 $f run --device cuda --bundle $D/tms-det.bundle --const DETERMINISTIC=true --const AUX_GRAD=false --backward \
    --mask "sliding_window(20, 3)" --seqlen-q 1537 --seqlen-k 1000 --dim $h --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-90
  echo "rc=${PIPESTATUS[0]} tms deterministic backward D=$h"
done
F='^(none|causal|sliding|document|prefix)'
for r in 1 2; do for v in t tms; do e=""; [ $v = tms ] && e=1
  echo "== r$r $v D=128"; FAC_TMA_STORE=$e $f bench --bundle $D/$v-d128.bundle --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-80
done; done
P2="--const persistent=true --const num_stages=2"
echo "== p2tms D=128 (persistent, two buffers, TMA store)"; FAC_TMA_STORE=1 $f bench --bundle $D/p2tms-d128.bundle $P2 --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-80
for m in causal "sliding_window(1023, 0)" document; do
  FAC_TMA_STORE=1 $f run --device cuda --bundle $D/p2tms-d128.bundle $P2 --mask "$m" --random-aux --doc-len 300 \
    --seqlen-q 1537 --seqlen-k 1000 --dim 128 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-90
  echo "rc=${PIPESTATUS[0]} p2tms $m D=128"
done
HM="--const heads_minor=true"
echo "== hm D=128 (heads_minor)"; $f bench --bundle $D/hm-d128.bundle $HM --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-80
echo "== hmtms D=128 (heads_minor and the TMA store)"; FAC_TMA_STORE=1 $f bench --bundle $D/hmtms-d128.bundle $HM --seqlen 8192 2>&1 | grep -E "$F|rror" | cut -c1-80
for v in t hm; do c=""; [ $v = hm ] && c=$HM
  echo "== $v S=2048"; $f bench --bundle $D/$v-d128.bundle $c --seqlen 2048 --batch 8 2>&1 | grep -E "$F|rror" | cut -c1-80
done
for m in causal "sliding_window(20, 3)" document; do
  $f run --device cuda --bundle $D/hm-check.bundle $HM --mask "$m" --random-aux --doc-len 300 \
    --seqlen-q 1537 --seqlen-k 1000 --dim 128 --heads 4 --kv-heads 2 --batch 2 --dtype bf16 2>&1 | tail -1 | cut -c1-90
  echo "rc=${PIPESTATUS[0]} hm $m D=128"
done
for v in t tms; do e=""; [ $v = tms ] && e=1
  echo "== $v backward"; FAC_TMA_STORE=$e $f bench --bundle $D/$v-d128.bundle --backward --seqlen 8192 --warmup 3 --reps 10 2>&1 | grep -E "$F|rror" | cut -c1-80
done
for v in t tms; do e=""; [ $v = tms ] && e=1
  echo "== $v D=64"; FAC_TMA_STORE=$e $f bench --bundle $D/$v-d64.bundle --dim 64 --heads 32 --seqlen 8192 --mask none --mask causal 2>&1 | grep -E "$F|rror" | cut -c1-80
  echo "== $v S=32768"; FAC_TMA_STORE=$e $f bench --bundle $D/$v-d128.bundle --seqlen 32768 --batch 1 --heads 16 --warmup 3 --reps 10 \
    --mask causal --mask "sliding_window(1023, 0)" 2>&1 | grep -E "$F|rror" | cut -c1-100
done
(cd $S && for f in *.gz; do gunzip -kf $f; done)
(cd tests && FAC_ARCH=sm_90a FAC_BUNDLE=$S/test-sm_90a.bundle FAC_BUNDLE_EXTRA=$S/test-det-sm_90a.bundle:$S/test-patterns.bundle \
  timeout 280 $S/tests.test -test.run 'TestGPUMatchesReference|TestGPUBackwardMatchesReference|TestGPULaunchDevicePointers|TestGPUModPatterns' \
  -test.short -test.v -test.count=1 -test.timeout 8m) > $OUT/tests-sm_90a.log 2>&1
echo "tests sm_90a rc=$?"; grep -E "^(--- |FAIL|ok|PASS)" $OUT/tests-sm_90a.log | tail -8
