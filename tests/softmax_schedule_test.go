package tests

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/reference"
)

// TestSoftmaxSchedules runs the forward with lazy_rescale and fold_scale
// (alone and together, with and without sinks) on the CPU device against
// float64 attention at scales that make rows rescale mid-row (8: scores
// spread over about 130 in log2 units), the default, and a negative one
// (fold_scale's other arm), and against the kernel without them.
func TestSoftmaxSchedules(t *testing.T) {
	sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 150, SeqK: 203, Dim: dim}
	in := inputs(sh, 11)
	schedules := []map[string]string{
		{"lazy_rescale": "true"},
		{"fold_scale": "true"},
		{"lazy_rescale": "true", "fold_scale": "true"},
	}
	for _, m := range masks {
		if !slices.Contains([]string{"none", "causal", "sliding_window(20, 3)", "document"}, m.expr) {
			continue
		}
		for _, scale := range []float32{0, 8, -0.3} {
			for _, sinks := range []bool{false, true} {
				args := func(fwd *fac.Forward) fac.Inputs {
					a := only(fwd, in)
					a.Scale = scale
					if sinks {
						a.Sinks = []float32{12, -30, 0.5, -1}
					}
					return a
				}
				plain, err := fac.CompileForward(fac.Options{Mask: m.expr, Sinks: sinks}, dim)
				if err != nil {
					t.Fatal(err)
				}
				po, plse, err := plain.RunCPU(args(plain), sh)
				if err != nil {
					t.Fatal(err)
				}
				for _, consts := range schedules {
					name := fmt.Sprintf("%s/scale=%v/sinks=%v/%v", m.expr, scale, sinks, consts)
					fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, Sinks: sinks, Consts: consts}, dim)
					if err != nil {
						t.Fatal(err)
					}
					o, lse, err := fwd.RunCPU(args(fwd), sh)
					if err != nil {
						t.Fatal(err)
					}
					if !sinks {
						ro, rlse := scaledReference(in, sh, m.fn, scale)
						// exp2 of scores as large as scale·|q·k| carries
						// their f32 rounding: the plain kernel's error too.
						check(t, name, o, lse, ro, rlse, sh, 1e-5*max(1, math.Abs(float64(scale))))
					}
					for i := range o {
						if d := math.Abs(float64(o[i] - po[i])); d > 1e-5*(1+math.Abs(float64(po[i]))) {
							t.Fatalf("%s: O[%d] = %v, without the schedule %v", name, i, o[i], po[i])
						}
					}
					for i := range lse {
						if d := math.Abs(float64(lse[i] - plse[i])); d > 1e-4*(1+math.Abs(float64(plse[i]))) || math.IsInf(float64(lse[i]), -1) != math.IsInf(float64(plse[i]), -1) {
							t.Fatalf("%s: LSE[%d] = %v, without the schedule %v", name, i, lse[i], plse[i])
						}
					}
				}
			}
		}
	}
}

// scaledReference is goReference at softmax scale scale (0: 1/sqrt(D)).
func scaledReference(in fac.Inputs, sh fac.Shape, m goMask, scale float32) ([]float64, []float64) {
	if scale == 0 {
		return goReference(in, sh, m, nil)
	}
	var mf reference.MaskFunc
	if m != nil {
		mf = m(sh, in.Aux)
	}
	return reference.Attention(to64(in.Q), to64(in.K), to64(in.V),
		reference.Shape{B: sh.Batch, H: sh.Heads, HKV: sh.KVHeads, Sq: sh.SeqQ, Sk: sh.SeqK, D: sh.Dim}, float64(scale), mf, nil)
}

// TestBackwardFoldScale runs the backward (atomic dQ, and the
// DETERMINISTIC mode's flash_bwd_dq) with fold_scale, whose P =
// exp2(s·log2e − lse) then takes the scale in its factor, against the
// float64 gradients.
func TestBackwardFoldScale(t *testing.T) {
	for _, m := range masks {
		if !slices.Contains([]string{"causal", "sliding_window(20, 3)", "document"}, m.expr) {
			continue
		}
		for _, det := range []string{"false", "true"} {
			consts := map[string]string{"fold_scale": "true", "DETERMINISTIC": det}
			fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, Consts: map[string]string{"fold_scale": "true"}}, bwdDim)
			if err != nil {
				t.Fatal(err)
			}
			bwd, err := fac.CompileBackward(fac.Options{Mask: m.expr, Consts: consts}, bwdDim)
			if err != nil {
				t.Fatal(err)
			}
			sh := fac.Shape{Batch: 1, Heads: 4, KVHeads: 2, SeqQ: 157, SeqK: 203, Dim: bwdDim}
			in := inputs(sh, 21)
			c := gradCase{name: fmt.Sprintf("%s/deterministic=%s", m.expr, det), fwd: fwd, bwd: bwd, sh: sh, in: only(fwd, in), tol: 1e-5}
			if m.fn != nil {
				c.mask = m.fn(sh, in.Aux)
			}
			c.run(t, 22)
		}
	}
}
