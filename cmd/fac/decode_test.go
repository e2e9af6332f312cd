package main

import (
	"math"
	"strings"
	"testing"

	"github.com/fac-compiler/fac"
)

// TestRunDecode: fac run prints the split-KV plan it ran and checks it;
// the choices are flags, and bad values are errors.
func TestRunDecode(t *testing.T) {
	r := runFac(t, "", "run", "--mask", "causal_bottom_right", "--heads", "8", "--kv-heads", "2", "--seqlen-q", "3",
		"--seqlen-k", "700", "--dim", "16", "--num-splits", "3")
	wantOK(t, r)
	for _, want := range []string{"decoding: flash_fwd_splitkv", "3 splits", "PackGQA 4 heads per tile", "check passed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runFac(t, "", "run", "--heads", "4", "--seqlen-q", "3", "--seqlen-k", "100", "--dim", "16", "--num-splits", "1", "--pack-gqa", "off")
	wantOK(t, r)
	if strings.Contains(r.stdout, "decoding:") {
		t.Errorf("--num-splits 1 --pack-gqa off ran split-KV:\n%s", r.stdout)
	}
	wantFail(t, runFac(t, "", "run", "--num-splits", "0x", "--seqlen-q", "3", "--seqlen-k", "8", "--dim", "16"), "--num-splits")
	wantFail(t, runFac(t, "", "run", "--pack-gqa", "maybe", "--seqlen-q", "3", "--seqlen-k", "8", "--dim", "16"), "--pack-gqa")
	wantFail(t, runFac(t, "", "run", "--decode-const", "BLOCK_N", "--seqlen-q", "3", "--seqlen-k", "8", "--dim", "16"), "--decode-const")
}

// TestBenchShapes checks fac bench's shapes (the decode anchors' among
// them) and its KV bandwidth, which must match decode_bench.py's
// kv_bytes / ms / 1e9.
func TestBenchShapes(t *testing.T) {
	sh, err := benchShapes([]int{2048, 8192}, []int{1, 16}, []int{8192, 32768}, 16384, 8, 32, 8, 128, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]int{{1, 8192}, {16, 8192}, {1, 32768}, {16, 32768}}
	if len(sh) != len(want) {
		t.Fatalf("%d shapes, want %d", len(sh), len(want))
	}
	for i, s := range sh {
		if s.SeqQ != want[i][0] || s.SeqK != want[i][1] || s.Batch != 8 || s.Heads != 32 || s.KV() != 8 || s.Dim != 128 {
			t.Errorf("shape %d: %+v", i, s)
		}
	}
	sh, err = benchShapes([]int{2048, 8192}, nil, nil, 16384, 0, 16, 0, 128, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(sh) != 2 || sh[0].Batch != 8 || sh[1].Batch != 2 || sh[1].SeqQ != 8192 || sh[1].KV() != 16 {
		t.Errorf("Sq = Sk shapes %+v", sh)
	}
	if _, err := benchShapes([]int{8}, []int{0}, nil, 16, 0, 4, 0, 16, 0); err == nil {
		t.Error("Sq = 0: no error")
	}
	// decode_bench.py: kv_bytes = 2 * k.numel() * 2 (bf16), kv_tbps = kv_bytes / ms / 1e9.
	d := fac.Shape{Batch: 8, Heads: 32, KVHeads: 8, SeqQ: 1, SeqK: 8192, Dim: 128}
	kvBytes := 2.0 * 8 * 8 * 8192 * 128 * 2
	if got, want := kvTBps(d, "bf16", 0.1), kvBytes/0.1/1e9; math.Abs(got-want) > 1e-9 {
		t.Errorf("kvTBps = %v, want %v", got, want)
	}
}
