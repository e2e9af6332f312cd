package blockmask

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/launch"
)

// inputMasks read run-time parameters, batch and num_heads, and N-D aux
// tensors with declared shapes.
const inputMasks = `
mask offset_window(b, h, q_idx, kv_idx, offset: i32, width: i32) {
    return kv_idx <= q_idx + offset && q_idx + offset - kv_idx < width
}

mask heads_window(b, h, q_idx, kv_idx) {
    return kv_idx <= q_idx && (q_idx - kv_idx < 32 * (h + 1) || h == num_heads - 1)
}

mask batch_half(b, h, q_idx, kv_idx) {
    return select(b < batch / 2, q_idx >= kv_idx, true)
}

mask per_head(b, h, q_idx, kv_idx, m: tensor[bool][num_heads, seqlen_q, seqlen_k]) {
    return m[h, q_idx, kv_idx]
}

mask padded(b, h, q_idx, kv_idx, lens: tensor[i32][batch], offset: i32) {
    return kv_idx < lens[b] && kv_idx <= q_idx + offset
}
`

// TestAnalyticInputs checks that the analytic builder takes run-time
// parameters, batch and num_heads as the constants they are for a call,
// and stays exact: it agrees with brute force for every value tried.
func TestAnalyticInputs(t *testing.T) {
	p := loadProg(t, map[string]string{"inputs.fa": inputMasks})
	sh := Shape{B: 3, H: 4, SeqQ: 300, SeqK: 260}
	opts := Options{BlockQ: 32, BlockK: 64}
	for _, c := range []struct {
		mask string
		vals map[string]any
	}{
		{"offset_window", map[string]any{"offset": 0, "width": 64}},
		{"offset_window", map[string]any{"offset": -40, "mask.width": int64(300)}},
		{"offset_window", map[string]any{"offset": int32(100), "width": 1}},
		{"heads_window", nil},
		{"batch_half", nil},
		{"and_masks(heads_window, not_mask(offset_window))", map[string]any{"offset": 7, "width": 50}},
	} {
		mi := resolve(t, p, c.mask)
		a, err := NewAnalyzerWith(p, mi, sh, c.vals)
		if err != nil {
			t.Fatalf("%s %v: %v", c.mask, c.vals, err)
		}
		g, err := a.Grid(opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := FromClasses(g)
		if err != nil {
			t.Fatal(err)
		}
		want, err := BruteForce(p, mi, sh, opts, c.vals)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(want) {
			t.Errorf("%s %v: analytic and brute force differ", c.mask, c.vals)
		}
		ev, err := EvaluateCPU(p, mi, sh, opts, c.vals)
		if err != nil {
			t.Fatal(err)
		}
		if !ev.Equal(want) {
			t.Errorf("%s %v: evaluated and brute force differ", c.mask, c.vals)
		}
		if _, method, err := Build(p, mi, sh, opts, c.vals); err != nil || method != MethodAnalytic {
			t.Errorf("%s %v: Build used %v (%v), want analytic", c.mask, c.vals, method, err)
		}
	}
	// Without the values, the analyzer declines (the evaluated builders
	// need them).
	mi := resolve(t, p, "offset_window")
	if _, err := NewAnalyzer(p, mi, sh); !errors.Is(err, ErrNotAnalyzable) || !strings.Contains(err.Error(), "run-time parameter offset") {
		t.Errorf("NewAnalyzer without values: %v", err)
	}
	if _, err := EvaluateCPU(p, mi, sh, opts, map[string]any{"offset": 1}); err == nil || !strings.Contains(err.Error(), "reads run-time parameter width") {
		t.Errorf("EvaluateCPU without width: %v", err)
	}
	// A mask reading num_heads (batch) has a block mask per head (batch
	// entry), so that every builder, the GPU's included, evaluates it with
	// the call's sizes.
	for _, c := range []struct {
		mask         string
		usesB, usesH bool
	}{{"heads_window", false, true}, {"batch_half", true, false}} {
		b, h, err := UsesBH(p, resolve(t, p, c.mask), 100, 100)
		if err != nil || b != c.usesB || h != c.usesH {
			t.Errorf("UsesBH(%s) = %v %v %v", c.mask, b, h, err)
		}
	}
}

// TestEvaluatedNDAux builds block masks of masks reading N-D aux tensors,
// given as flat slices and as launch.Array values of other element types,
// and compares them with the masks written in Go.
func TestEvaluatedNDAux(t *testing.T) {
	p := loadProg(t, map[string]string{"inputs.fa": inputMasks})
	sh := Shape{B: 2, H: 3, SeqQ: 100, SeqK: 90}
	opts := Options{BlockQ: 16, BlockK: 32}
	rng := rand.New(rand.NewPCG(1, 2))
	m := make([]uint8, sh.H*sh.SeqQ*sh.SeqK)
	for i := range m {
		// Mostly-false rows with some true runs: every class of block.
		if (i/sh.SeqK)%7 < 3 && rng.IntN(4) > 0 || (i%sh.SeqK) < 20 {
			m[i] = 1
		}
	}
	lens := []int64{90, 33}
	cases := []struct {
		mask string
		vals map[string]any
		fn   func(b, h, q, kv int) bool
		b, h int // the block mask's B and H
	}{
		{"per_head", map[string]any{"m": launch.Array{Shape: []int{3, 100, 90}, Data: m}},
			func(b, h, q, kv int) bool { return m[(h*sh.SeqQ+q)*sh.SeqK+kv] == 1 }, 1, 3},
		{"padded", map[string]any{"lens": lens, "offset": 4},
			func(b, h, q, kv int) bool { return int64(kv) < lens[b] && kv <= q+4 }, 2, 1},
	}
	for _, c := range cases {
		mi := resolve(t, p, c.mask)
		want, err := BruteForceFunc(Shape{B: c.b, H: c.h, SeqQ: sh.SeqQ, SeqK: sh.SeqK}, opts, c.fn)
		if err != nil {
			t.Fatal(err)
		}
		for name, build := range map[string]func() (*BlockMask, error){
			"evaluated":   func() (*BlockMask, error) { return EvaluateCPU(p, mi, sh, opts, c.vals) },
			"brute force": func() (*BlockMask, error) { return BruteForce(p, mi, sh, opts, c.vals) },
		} {
			got, err := build()
			if err != nil {
				t.Fatalf("%s %s: %v", c.mask, name, err)
			}
			if !got.Equal(want) {
				t.Errorf("%s %s: differs from the Go mask", c.mask, name)
			}
		}
	}
	// Declared shapes are checked; 0/1 integers convert to bools.
	mi := resolve(t, p, "per_head")
	for _, c := range []struct {
		v    any
		want string
	}{
		{launch.Array{Shape: []int{2, 100, 90}, Data: make([]bool, 2*100*90)}, "has 2 rows (dimension 0, num_heads), the call has num_heads 3"},
		{make([]bool, 10), "has 10 elements; for this call it is [3 100 90], 27000 elements"},
		{append(make([]int32, 26999), 2), "element 26999 is 2; a bool tensor takes 0 or 1"},
	} {
		_, err := EvaluateCPU(p, mi, sh, opts, map[string]any{"m": c.v})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("per_head with %T: %v, want %q", c.v, err, c.want)
		}
	}
	if _, err := EvaluateCPU(p, mi, sh, opts, map[string]any{"m": make([]int32, 27000)}); err != nil {
		t.Errorf("per_head with int32 zeros: %v", err)
	}
}
