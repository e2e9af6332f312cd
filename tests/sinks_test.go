package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/reference"
)

// sinkValues are per-head sink logits: one far above any score (the sink
// takes almost all the mass), one far below (it takes none), the rest
// N(0, 2²).
func sinkValues(heads int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 11))
	out := make([]float32, heads)
	for h := range out {
		out[h] = float32(2 * rng.NormFloat64())
	}
	out[0] = 12
	if heads > 1 {
		out[1] = -30
	}
	return out
}

func sinksReference(in fac.Inputs, sh fac.Shape, m goMask) (o, lse []float64) {
	var mf reference.MaskFunc
	if m != nil {
		mf = m(sh, in.Aux)
	}
	scale := 1 / math.Sqrt(float64(sh.Dim))
	return reference.AttentionSinks(to64(in.Q), to64(in.K), to64(in.V), refShape(sh), float64(float32(scale)), mf, nil, to64(in.Sinks))
}

// TestSinksMatchNaive runs flash_fwd_sinks on the CPU against the float64
// reference with sinks, over masks with and without block skipping, GQA,
// and rows that keep nothing (Sq > Sk with bottom-right causal, and the
// window past the keys): those must give O = 0 exactly and LSE = the sink.
func TestSinksMatchNaive(t *testing.T) {
	lens := [][2]int{{1, 1}, {7, 100}, {100, 7}, {257, 100}, {64, 257}}
	empty := 0
	for mi, m := range masks {
		switch m.expr {
		case "none", "causal", "causal_bottom_right", "sliding_window(20, 3)", "document":
		default:
			continue
		}
		fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, Sinks: true}, dim)
		if err != nil {
			t.Fatalf("compile %s: %v", m.expr, err)
		}
		for li, sl := range lens {
			sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 4, SeqQ: sl[0], SeqK: sl[1], Dim: dim}
			if li%2 == 1 {
				sh.KVHeads = 2 // grouped-query attention
			}
			in := only(fwd, inputs(sh, uint64(1000+mi*10+li)))
			in.Sinks = sinkValues(sh.Heads, uint64(mi*10+li))
			o, lse, err := fwd.RunCPU(in, sh)
			if err != nil {
				t.Fatalf("run %s %v: %v", m.expr, sl, err)
			}
			name := fmt.Sprintf("%s/Sq=%d,Sk=%d", m.expr, sl[0], sl[1])
			ro, rlse := sinksReference(in, sh, m.fn)
			check(t, name, o, lse, ro, rlse, sh, 1e-5)
			// Rows that keep no key: the reference without sinks says -inf.
			_, plain := goReference(in, sh, m.fn, nil)
			for r, x := range plain {
				if !math.IsInf(x, -1) {
					continue
				}
				empty++
				h := r / sh.SeqQ % sh.Heads
				if got, want := lse[r], in.Sinks[h]; math.Abs(float64(got-want)) > 1e-5*math.Max(1, math.Abs(float64(want))) {
					t.Errorf("%s: row %d keeps nothing, LSE = %v, want the sink %v", name, r, got, want)
				}
				for d := 0; d < sh.Dim; d++ {
					if o[r*sh.Dim+d] != 0 {
						t.Fatalf("%s: row %d keeps nothing, O[%d] = %v, want 0", name, r, d, o[r*sh.Dim+d])
					}
				}
			}
		}
	}
	if empty == 0 {
		t.Error("no configuration had rows that keep nothing; the O = 0 / LSE = sink path went untested")
	}
}

// TestSinksSplitKVMatchNaive runs the sinks forward as decoding does,
// split over the keys with the sinks added when the splits are merged
// (flash_fwd_splitkv + flash_fwd_combine_sinks), with and without query
// heads packed per tile, against the float64 reference with sinks: every
// split keeping nothing (a window before the keys) must still give O = 0
// and LSE = the sink.
func TestSinksSplitKVMatchNaive(t *testing.T) {
	for mi, m := range masks {
		switch m.expr {
		case "none", "causal_bottom_right", "sliding_window(20, 3)":
		default:
			continue
		}
		for _, pack := range []fac.PackGQA{fac.PackGQAAuto, fac.PackGQAOff} {
			fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, Sinks: true, NumSplits: 3, PackGQA: pack}, dim)
			if err != nil {
				t.Fatalf("compile %s: %v", m.expr, err)
			}
			for li, sl := range [][2]int{{1, 300}, {3, 77}, {2, 1}} {
				sh := fac.Shape{Batch: 2, Heads: 8, KVHeads: 2, SeqQ: sl[0], SeqK: sl[1], Dim: dim}
				plan, err := fwd.Plan(sh, 0)
				if err != nil || !plan.SplitKV || plan.Kernels()[1] != "flash_fwd_combine_sinks" {
					t.Fatalf("%s: plan %v (%v), %v: want split-KV merged by flash_fwd_combine_sinks", m.expr, plan, plan.Kernels(), err)
				}
				in := only(fwd, inputs(sh, uint64(2000+mi*10+li)))
				in.Sinks = sinkValues(sh.Heads, uint64(mi*10+li))
				o, lse, err := fwd.RunCPU(in, sh)
				if err != nil {
					t.Fatalf("run %s %v: %v", m.expr, sl, err)
				}
				name := fmt.Sprintf("%s/%v/Sq=%d,Sk=%d", m.expr, pack, sl[0], sl[1])
				ro, rlse := sinksReference(in, sh, m.fn)
				check(t, name, o, lse, ro, rlse, sh, 1e-5)
			}
		}
	}
}

// TestSinksMinusInf: sinks of -inf add nothing, so the result is
// flash_fwd's, empty rows (O = 0, LSE = -inf) included.
func TestSinksMinusInf(t *testing.T) {
	sh := fac.Shape{Batch: 1, Heads: 2, KVHeads: 1, SeqQ: 70, SeqK: 33, Dim: dim}
	opts := fac.Options{Mask: "causal_bottom_right"}
	plain, err := fac.CompileForward(opts, dim)
	if err != nil {
		t.Fatal(err)
	}
	opts.Sinks = true
	sinks, err := fac.CompileForward(opts, dim)
	if err != nil {
		t.Fatal(err)
	}
	in := only(plain, inputs(sh, 5))
	o0, lse0, err := plain.RunCPU(in, sh)
	if err != nil {
		t.Fatal(err)
	}
	in.Sinks = []float32{float32(math.Inf(-1)), float32(math.Inf(-1))}
	o1, lse1, err := sinks.RunCPU(in, sh)
	if err != nil {
		t.Fatal(err)
	}
	for i := range o0 {
		if math.Abs(float64(o0[i]-o1[i])) > 1e-6 || math.IsNaN(float64(o1[i])) {
			t.Fatalf("O[%d] = %v with -inf sinks, %v without", i, o1[i], o0[i])
		}
	}
	for i := range lse0 {
		if lse0[i] != lse1[i] && math.Abs(float64(lse0[i]-lse1[i])) > 1e-6 {
			t.Fatalf("LSE[%d] = %v with -inf sinks, %v without", i, lse1[i], lse0[i])
		}
	}
}

// TestSinksInputsChecked: a sinks kernel needs one sink per head, and a
// plain kernel refuses sinks rather than ignoring them.
func TestSinksInputsChecked(t *testing.T) {
	sh := fac.Shape{Batch: 1, Heads: 2, KVHeads: 2, SeqQ: 4, SeqK: 4, Dim: dim}
	plain, err := fac.CompileForward(fac.Options{}, dim)
	if err != nil {
		t.Fatal(err)
	}
	withSinks, err := fac.CompileForward(fac.Options{Sinks: true}, dim)
	if err != nil {
		t.Fatal(err)
	}
	in := only(plain, inputs(sh, 3))
	in.Sinks = []float32{1}
	if _, _, err := withSinks.RunCPU(in, sh); err == nil || !strings.Contains(err.Error(), "one per head") {
		t.Errorf("1 sink for 2 heads: err = %v", err)
	}
	in.Sinks = []float32{1, 2}
	if _, _, err := plain.RunCPU(in, sh); err == nil || !strings.Contains(err.Error(), "without them") {
		t.Errorf("sinks to a plain kernel: err = %v", err)
	}
	if _, _, err := withSinks.RunCPU(in, sh); err != nil {
		t.Errorf("2 sinks for 2 heads: %v", err)
	}
}
