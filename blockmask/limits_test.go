package blockmask

import (
	"math"
	"strings"
	"testing"
)

// TestLimitsCountBlocks is the regression test of limits checked on
// elements: B=1, H=32, S=16384 is 2^33 (q, kv) pairs but, for causal (one
// mask for every head), 128×128 blocks of 128×128, built analytically in
// milliseconds. A mask reading h gets 32 masks of those blocks.
func TestLimitsCountBlocks(t *testing.T) {
	p := loadProg(t, map[string]string{"h.fa": `
mask per_head(b, h, q_idx, kv_idx) {
    return q_idx - kv_idx <= 1024 * (h + 1) && kv_idx <= q_idx
}
`})
	sh, opts := Shape{B: 1, H: 32, SeqQ: 16384, SeqK: 16384}, Options{BlockQ: 128, BlockK: 128}
	bm, method, err := Build(p, resolve(t, p, "causal"), sh, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if method != MethodAnalytic || bm.B != 1 || bm.H != 1 || bm.NumQ != 128 || bm.NumK != 128 {
		t.Fatalf("causal: %s, B=%d H=%d %d×%d blocks", method, bm.B, bm.H, bm.NumQ, bm.NumK)
	}
	if empty, partial, full := bm.Counts(); partial != 128 || full != 128*127/2 || empty != 128*127/2 {
		t.Errorf("causal: %d empty, %d partial, %d full blocks", empty, partial, full)
	}
	bm, err = Analytic(p, resolve(t, p, "per_head"), sh, opts)
	if err != nil {
		t.Fatal(err)
	}
	if bm.B != 1 || bm.H != 32 {
		t.Fatalf("per_head: B=%d H=%d, want 1, 32", bm.B, bm.H)
	}
	// Head h keeps 8(h+1) blocks below the diagonal in full rows.
	if c := bm.Class(0, 31, 127, 0); c != Full {
		t.Errorf("per_head: head 31, block (127, 0) is %s, want full", c)
	}
	if c := bm.Class(0, 0, 127, 0); c != Empty {
		t.Errorf("per_head: head 0, block (127, 0) is %s, want empty", c)
	}
}

// TestLimitsReject checks that absurd shapes give a clear error, from
// every builder, and never a panic or an overflow.
func TestLimitsReject(t *testing.T) {
	p := loadProg(t, map[string]string{"bh.fa": `
mask both(b, h, q_idx, kv_idx) {
    return q_idx >= kv_idx && b + h >= 0
}
`})
	builders := map[string]func(mask string, sh Shape, opts Options) error{
		"analytic": func(m string, sh Shape, opts Options) error {
			_, err := Analytic(p, resolve(t, p, m), sh, opts)
			return err
		},
		"analyzer": func(m string, sh Shape, opts Options) error {
			_, err := NewAnalyzer(p, resolve(t, p, m), sh)
			return err
		},
		"build": func(m string, sh Shape, opts Options) error {
			_, _, err := Build(p, resolve(t, p, m), sh, opts, nil)
			return err
		},
		"evaluated-cpu": func(m string, sh Shape, opts Options) error {
			_, err := EvaluateCPU(p, resolve(t, p, m), sh, opts, nil)
			return err
		},
		"brute force": func(m string, sh Shape, opts Options) error {
			_, err := BruteForce(p, resolve(t, p, m), sh, opts, nil)
			return err
		},
	}
	for _, c := range []struct {
		name, mask string
		sh         Shape
		opts       Options
		want       string
	}{
		{"seqlen 2^40", "causal", Shape{SeqQ: 1 << 40, SeqK: 1 << 40}, Options{}, "sequence lengths must be in [1, 2^30]"},
		{"seqlen -1", "causal", Shape{SeqQ: -1, SeqK: 8}, Options{}, "sequence lengths must be in [1, 2^30]"},
		{"B -3", "causal", Shape{B: -3, SeqQ: 8, SeqK: 8}, Options{}, "B and H must be at least 1"},
		{"B×H 2^80", "both", Shape{B: 1 << 40, H: 1 << 40, SeqQ: 8, SeqK: 8}, Options{}, "more than 2147483648"},
		{"B×H max int", "both", Shape{B: math.MaxInt, H: math.MaxInt, SeqQ: 8, SeqK: 8}, Options{}, "more than 2147483648"},
		{"blocks", "causal", Shape{B: 64, H: 64, SeqQ: 1 << 30, SeqK: 1 << 30}, Options{BlockQ: 1 << 10, BlockK: 1 << 10}, "1×1×1048576×1048576 blocks of 1024×1024 is more than 2147483648"},
	} {
		for name, build := range builders {
			if name == "analyzer" && c.name == "blocks" {
				continue // the analyzer meets the block size later, in Grid
			}
			err := build(c.mask, c.sh, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s, %s: err = %v, want %q", c.name, name, err, c.want)
			}
		}
	}
	// The analyzer checks blocks where it meets the block size.
	a, err := NewAnalyzer(p, resolve(t, p, "both"), Shape{B: 2, H: 3, SeqQ: 1 << 30, SeqK: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Grid(Options{BlockQ: 1 << 10, BlockK: 1 << 10}); err == nil || !strings.Contains(err.Error(), "2×3×1048576×1048576 blocks of 1024×1024 is more than") {
		t.Errorf("Grid: err = %v", err)
	}
	// A mask that ignores b and h makes one mask whatever B and H are.
	bm, err := Analytic(p, resolve(t, p, "causal"), Shape{B: math.MaxInt, H: 1 << 40, SeqQ: 1000, SeqK: 1000}, Options{})
	if err != nil || bm.B != 1 || bm.H != 1 {
		t.Errorf("causal at B=MaxInt: %v", err)
	}
	if _, err := NewGrid(math.MaxInt, math.MaxInt, MaxSeqLen, MaxSeqLen, 1, 1); err == nil || !strings.Contains(err.Error(), "is more than") {
		t.Errorf("NewGrid at MaxInt: err = %v", err)
	}
}

func TestNumBlocks(t *testing.T) {
	for _, c := range []struct {
		dims []int
		n    int64
		ok   bool
	}{
		{nil, 1, true},
		{[]int{1, 32, 128, 128}, 1 << 19, true},
		{[]int{2, 1 << 15, 1 << 15}, MaxBlocks, true},
		{[]int{3, 1 << 15, 1 << 15}, 0, false},
		{[]int{1 << 40, 1 << 40, 1, 1}, 0, false},
		{[]int{math.MaxInt, math.MaxInt}, 0, false},
		{[]int{1 << 31, 1 << 31, 1 << 31}, 0, false},
		{[]int{4, 0}, 0, false},
		{[]int{-1, -1}, 0, false},
	} {
		if n, ok := numBlocks(c.dims...); n != c.n || ok != c.ok {
			t.Errorf("numBlocks(%v) = %d, %v, want %d, %v", c.dims, n, ok, c.n, c.ok)
		}
	}
}
