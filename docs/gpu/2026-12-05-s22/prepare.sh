#!/usr/bin/env bash
# Session 22: the timeline bundles (internal/tools/ptxstamp, with the epilogue's stamps 24–26) of
# the tuned default (t) and of the same with persistent=true (p), sliding window 1024, document and
# causal, D = 128, bf16, sm_90a, and fac, into DIR (default .gpu/s22t). Run from the tree to time.
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=${DIR:-.gpu/s22t}
export CGO_ENABLED=0
FAC_LLC=$(scripts/ensure-llc); export FAC_LLC
mkdir -p $d
go build -ldflags="-s -w" -o $d/fac ./cmd/fac
masks=(--mask "sliding_window(1023, 0)" --mask document --mask causal)
$d/fac build "${masks[@]}" --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/t.bundle
$d/fac build "${masks[@]}" --const persistent=true --dtype bf16 --dim 128 --arch sm_90a --cache-dir - -o $d/p.bundle
for v in t p; do
  go run ./internal/tools/ptxstamp patch $d/$v.bundle $d/stamp-$v.bundle
  rm $d/$v.bundle
done
gzip -f $d/*.bundle
du -sh $d
