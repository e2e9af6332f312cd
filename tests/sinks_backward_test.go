package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/reference"
)

// TestSinksBackwardMatchesReference runs the forward with sinks
// (flash_fwd_sinks) and the backward compiled with Options.Sinks on the
// CPU device, and compares dQ, dK, dV and dsinks with the float64
// gradients of attention with sinks (reference.AttentionGradSinks, checked
// by finite differences in the reference package): masks causal, sliding
// window, document and bottom-right causal, GQA groups of 1 and 4, lengths
// 1, 7, 127 and unequal ones both ways; Sq > Sk empties rows (P_sink = 1
// there: dQ exactly 0, nothing added to dsinks).
func TestSinksBackwardMatchesReference(t *testing.T) {
	lens := [][2]int{{1, 1}, {7, 7}, {127, 127}, {7, 127}, {127, 7}, {1, 127}}
	empty := 0
	worst := map[string]float64{}
	for mi, m := range masks {
		switch m.expr {
		case "causal", "sliding_window(20, 3)", "document", "causal_bottom_right":
		default:
			continue
		}
		fwd, bwd := mustCompile(t, fac.Options{Mask: m.expr, Sinks: true}, bwdDim)
		for li, sl := range lens {
			for _, kvHeads := range []int{4, 1} { // groups of 1 and 4
				sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: kvHeads, SeqQ: sl[0], SeqK: sl[1], Dim: bwdDim}
				seed := uint64(mi*100 + li*10 + kvHeads)
				name := fmt.Sprintf("%s/Sq=%d,Sk=%d,Hkv=%d", m.expr, sl[0], sl[1], kvHeads)
				n, g := sinksGradCase(t, fwd, bwd, sh, m.fn, seed, name, 1e-5, worst)
				empty += n
				if len(g.DSinks) != sh.Heads {
					t.Fatalf("%s: DSinks has %d values", name, len(g.DSinks))
				}
			}
		}
	}
	if empty == 0 {
		t.Error("no configuration had fully masked rows; P_sink = 1 went untested")
	}
	t.Logf("largest relative errors: %v; %d fully masked rows", worst, empty)
}

// sinksGradCase runs one forward and backward with sinks on the CPU and
// checks them against the float64 reference; it returns the number of
// rows that keep nothing and the gradients.
func sinksGradCase(t *testing.T, fwd *fac.Forward, bwd *fac.Backward, sh fac.Shape, m goMask, seed uint64, name string, tol float64,
	worst map[string]float64) (int, *fac.Grads) {
	t.Helper()
	in := only(fwd, inputs(sh, seed))
	in.Sinks = sinkValues(sh.Heads, seed)
	in.Sinks[sh.Heads-1] = 0.5 // a sink near the scores: a large dsink
	o, lse, err := fwd.RunCPU(in, sh)
	if err != nil {
		t.Fatalf("%s: forward: %v", name, err)
	}
	rng := rand.New(rand.NewPCG(seed, 13))
	do := make([]float32, len(o))
	for i := range do {
		do[i] = float32(rng.NormFloat64())
	}
	bin := fac.BackwardInputs{Q: in.Q, K: in.K, V: in.V, O: o, LSE: lse, DO: do, Aux: in.Aux, Sinks: in.Sinks}
	g, err := bwd.RunCPUGrads(t.Context(), bin, sh)
	if err != nil {
		t.Fatalf("%s: backward: %v", name, err)
	}
	var mf reference.MaskFunc
	if m != nil {
		mf = m(sh, in.Aux)
	}
	scale := float64(float32(1 / math.Sqrt(float64(sh.Dim))))
	ref := reference.AttentionGradSinks(to64(in.Q), to64(in.K), to64(in.V), to64(do), refShape(sh), scale, mf, nil, nil, nil, to64(in.Sinks))
	floor := maxAbs(ref.DV)
	for _, c := range []struct {
		what  string
		got   []float32
		ref   []float64
		floor float64
	}{{"dQ", g.DQ, ref.DQ, floor}, {"dK", g.DK, ref.DK, floor}, {"dV", g.DV, ref.DV, 0}, {"dsinks", g.DSinks, ref.DSinks, 0}} {
		rel := compareGrad(t, name+" "+c.what, c.got, c.ref, c.floor, tol)
		if worst != nil {
			worst[c.what] = math.Max(worst[c.what], rel)
		}
	}
	// Rows that keep nothing have LSE = the sink: exactly zero dQ.
	_, plain := goReference(in, sh, m, nil)
	empty := 0
	for r, x := range plain {
		if !math.IsInf(x, -1) {
			continue
		}
		empty++
		for d := 0; d < sh.Dim; d++ {
			if x := g.DQ[r*sh.Dim+d]; x != 0 {
				t.Fatalf("%s: row %d keeps nothing, dQ[%d] = %v, want 0", name, r, d, x)
			}
		}
	}
	return empty, g
}

// TestSinksBackwardAPI: Backward.Reference with sinks agrees with the Go
// reference, the DETERMINISTIC mode gives the same dsinks bits twice,
// sinks of -inf give the plain backward's gradients and zero dsinks, and
// sinks are refused where they do not belong.
func TestSinksBackwardAPI(t *testing.T) {
	sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 40, SeqK: 33, Dim: bwdDim}
	opts := fac.Options{Mask: "causal_bottom_right", Sinks: true, Consts: map[string]string{"DETERMINISTIC": "true"}}
	fwd, err := fac.CompileForward(fac.Options{Mask: opts.Mask, Sinks: true}, bwdDim)
	if err != nil {
		t.Fatal(err)
	}
	bwd, err := fac.CompileBackward(opts, bwdDim)
	if err != nil {
		t.Fatal(err)
	}
	if !bwd.HasSinks() || len(bwd.Kernels()) != 4 || bwd.Kernels()[3].Kernel != "flash_bwd_sinks" {
		t.Fatalf("kernels of a sinks backward: %d", len(bwd.Kernels()))
	}
	var m goMask
	for _, x := range masks {
		if x.expr == opts.Mask {
			m = x.fn
		}
	}
	_, g := sinksGradCase(t, fwd, bwd, sh, m, 7, "deterministic", 1e-5, nil)

	in := only(fwd, inputs(sh, 7))
	in.Sinks = sinkValues(sh.Heads, 7)
	in.Sinks[sh.Heads-1] = 0.5
	o, lse, err := fwd.RunCPU(in, sh)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 13))
	do := make([]float32, len(o))
	for i := range do {
		do[i] = float32(rng.NormFloat64())
	}
	bin := fac.BackwardInputs{Q: in.Q, K: in.K, V: in.V, O: o, LSE: lse, DO: do, Sinks: in.Sinks}
	g2, err := bwd.RunCPUGrads(t.Context(), bin, sh)
	if err != nil {
		t.Fatal(err)
	}
	for h := range g.DSinks {
		if math.Float32bits(g.DSinks[h]) != math.Float32bits(g2.DSinks[h]) {
			t.Errorf("dsinks[%d]: %v then %v", h, g.DSinks[h], g2.DSinks[h])
		}
	}
	ref, err := bwd.Reference(bin, sh)
	if err != nil {
		t.Fatal(err)
	}
	compareGrad(t, "Reference dsinks", g.DSinks, ref.DSinks, 0, 1e-5)
	compareGrad(t, "Reference dK", g.DK, ref.DK, maxAbs(ref.DV), 1e-5)

	// Sinks of -inf: the plain kernels' gradients, dsinks 0.
	plainF, err := fac.CompileForward(fac.Options{Mask: opts.Mask}, bwdDim)
	if err != nil {
		t.Fatal(err)
	}
	plainB, err := fac.CompileBackward(fac.Options{Mask: opts.Mask, Consts: opts.Consts}, bwdDim)
	if err != nil {
		t.Fatal(err)
	}
	in0 := in
	in0.Sinks = nil
	o0, lse0, err := plainF.RunCPU(in0, sh)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plainB.RunCPUGrads(t.Context(), fac.BackwardInputs{Q: in.Q, K: in.K, V: in.V, O: o0, LSE: lse0, DO: do}, sh)
	if err != nil {
		t.Fatal(err)
	}
	inf := float32(math.Inf(-1))
	bin.Sinks = []float32{inf, inf, inf, inf}
	if bin.O, bin.LSE, err = fwd.RunCPU(fac.Inputs{Q: in.Q, K: in.K, V: in.V, Sinks: bin.Sinks}, sh); err != nil {
		t.Fatal(err)
	}
	gi, err := bwd.RunCPUGrads(t.Context(), bin, sh)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.DQ {
		if p.DQ[i] != gi.DQ[i] {
			t.Fatalf("-inf sinks: dQ[%d] = %v, without sinks %v", i, gi.DQ[i], p.DQ[i])
		}
	}
	for h, x := range gi.DSinks {
		if x != 0 || math.IsNaN(float64(x)) {
			t.Errorf("-inf sink %d: gradient %v, want 0", h, x)
		}
	}
	if p.DSinks != nil {
		t.Error("a backward without sinks returned DSinks")
	}

	// Refusals: sinks missing, of the wrong length, or given to a
	// backward compiled without them.
	for _, c := range []struct {
		b     *fac.Backward
		sinks []float32
	}{{bwd, nil}, {bwd, []float32{1, 2}}, {plainB, in.Sinks}} {
		bin.Sinks = c.sinks
		if _, err := c.b.RunCPUGrads(t.Context(), bin, sh); err == nil {
			t.Errorf("sinks %v accepted (compiled with sinks: %v)", c.sinks, c.b.HasSinks())
		}
	}
}
