package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/reference"
)

// varlenGradReference is the float64 backward of varlen attention, each
// sequence alone (reference.AttentionGrad with the Go mods made for its
// lengths and called with b = its index), in the packed layouts.
func varlenGradReference(in fac.VarlenInputs, do []float32, h, hkv, d int, m goMask, s goScore, deriv goDeriv, auxLens map[string]int) reference.Grads {
	g := reference.Grads{DQ: make([]float64, len(in.Q)), DK: make([]float64, len(in.K)), DV: make([]float64, len(in.V)), DAux: map[string][]float64{}}
	for a, n := range auxLens {
		g.DAux[a] = make([]float64, n)
	}
	scale := float64(float32(1 / math.Sqrt(float64(d))))
	for b := 0; b+1 < len(in.CuSeqlensQ); b++ {
		qs, ks := int(in.CuSeqlensQ[b]), int(in.CuSeqlensK[b])
		sq, sk := int(in.CuSeqlensQ[b+1])-qs, int(in.CuSeqlensK[b+1])-ks
		if sq == 0 || sk == 0 {
			continue
		}
		seq := fac.Shape{Batch: len(in.CuSeqlensQ) - 1, Heads: h, KVHeads: hkv, SeqQ: sq, SeqK: sk, Dim: d}
		mf := seqMask(m, seq, in.Aux, b)
		var sf reference.ScoreFunc
		var df reference.ScoreDerivFunc
		if s != nil {
			inner, dinner := s(seq, in.Aux), deriv(seq, in.Aux)
			sf = func(x float64, _, hh, i, j int) float64 { return inner(x, b, hh, i, j) }
			df = func(x float64, _, hh, i, j int, aux func(string, int, float64)) float64 {
				return dinner(x, b, hh, i, j, aux)
			}
		}
		sg := reference.AttentionGrad(gatherRows(in.Q, qs, sq, h, d), gatherRows(in.K, ks, sk, hkv, d), gatherRows(in.V, ks, sk, hkv, d),
			gatherRows(do, qs, sq, h, d), reference.Shape{B: 1, H: h, HKV: hkv, Sq: sq, Sk: sk, D: d}, scale, mf, sf, df, auxLens)
		scatterRows(g.DQ, sg.DQ, qs, sq, h, d)
		scatterRows(g.DK, sg.DK, ks, sk, hkv, d)
		scatterRows(g.DV, sg.DV, ks, sk, hkv, d)
		for a, xs := range sg.DAux {
			for i, x := range xs {
				g.DAux[a][i] += x
			}
		}
	}
	return g
}

// TestVarlenBackwardMatchesReference runs the varlen forward and backward
// (flash_bwd_preprocess, flash_bwd_varlen, flash_bwd_postprocess) on the
// CPU device and compares dQ, dK, dV (and ALiBi's slope gradient) with the
// float64 gradients per sequence: masks causal, sliding window,
// bottom-right causal, document (aux), user masks reading the lengths and
// a run-time parameter, h, and b; scores identity, softcap and alibi;
// lengths 1 to 300 with empty sequences on either side, GQA; every other
// mask with packed_loads (tiles read past their sequence, up to the
// packed tensor's end: sm_90a's tuned set, for TMA). Within 1e-5
// of the largest gradient (slopes 1e-3: their sum cancels, as for the
// dense backward); Backward.Reference agrees with the Go reference.
func TestVarlenBackwardMatchesReference(t *testing.T) {
	lensQ := []int{1, 0, 7, 127, 129, 0, 300, 33, 64, 5}
	lensK := []int{1, 5, 7, 127, 128, 0, 257, 64, 0, 90}
	cq, ck := cumsum(lensQ), cumsum(lensK)
	tq, tk := int(cq[len(cq)-1]), int(ck[len(ck)-1])
	const d = 16
	worst := map[string]float64{}
	for ci, c := range varlenSparseCases {
		if c.expr == "none" {
			continue
		}
		for si, s := range scores {
			if (ci+si)%2 == 1 && s.expr != "identity" {
				continue // every mask with identity, each score with half the masks
			}
			heads, kvHeads := 4, 2
			if ci%2 == 1 {
				kvHeads = 1
			}
			name := fmt.Sprintf("%s/%s/Hkv=%d", c.expr, s.expr, kvHeads)
			opts := fac.Options{Mask: c.expr, Score: s.expr, Sources: map[string]string{"varlen_mods.fa": varlenMods}}
			if ci%2 == 0 {
				name += "/packed"
				opts.Consts = map[string]string{"packed_loads": "true"}
			}
			fwd, bwd := mustCompileVarlen(t, opts, d)
			rng := rand.New(rand.NewPCG(uint64(ci*10+si), 8))
			randn := normals(rng)
			in := fac.VarlenInputs{Q: randn(tq * heads * d), K: randn(tk * kvHeads * d), V: randn(tk * kvHeads * d), CuSeqlensQ: cq, CuSeqlensK: ck,
				Scalars: c.scalars, Aux: map[string]any{}}
			all := inputs(fac.Shape{Batch: 1, Heads: heads, KVHeads: kvHeads, SeqQ: 300, SeqK: 300, Dim: d}, 1).Aux
			for _, a := range fwd.AuxTensors() {
				in.Aux[a] = all[a]
			}
			if _, ok := in.Aux["doc"]; ok {
				in.Aux["doc"] = varlenDoc(300)
			}
			o, lse, err := fwd.RunCPU(in, heads, kvHeads)
			if err != nil {
				t.Fatalf("%s: forward: %v", name, err)
			}
			do := randn(len(o))
			bin := fac.VarlenBackwardInputs{VarlenInputs: in, O: o, LSE: lse, DO: do}
			g, err := bwd.RunCPU(bin, heads, kvHeads)
			if err != nil {
				t.Fatalf("%s: backward: %v", name, err)
			}
			auxLens := map[string]int{}
			for _, a := range bwd.AuxGrads() {
				auxLens[a] = len(g.DAux[a])
			}
			ref := varlenGradReference(in, do, heads, kvHeads, d, c.fn, s.fn, derivs[s.expr], auxLens)
			floor := maxAbs(ref.DV)
			for _, p := range []struct {
				what      string
				got       []float32
				want      []float64
				floor     float64
				tolerance float64
			}{{"dQ", g.DQ, ref.DQ, floor, 1e-5}, {"dK", g.DK, ref.DK, floor, 1e-5}, {"dV", g.DV, ref.DV, 0, 1e-5},
				{"dslopes", g.DAux["slopes"], ref.DAux["slopes"], 0, 1e-3}} {
				if p.want == nil {
					continue
				}
				worst[p.what] = math.Max(worst[p.what], compareGrad(t, name+" "+p.what, p.got, p.want, p.floor, p.tolerance))
			}
			if ci%3 == 0 {
				fr, err := bwd.Reference(bin, heads, kvHeads)
				if err != nil {
					t.Fatalf("%s: Reference: %v", name, err)
				}
				// The score mods run in f32 on the interpreter there.
				top := maxAbs(ref.DK)
				for i := range fr.DK {
					if math.Abs(fr.DK[i]-ref.DK[i]) > 1e-6*top {
						t.Fatalf("%s: Reference dK[%d] = %v, Go reference %v", name, i, fr.DK[i], ref.DK[i])
					}
				}
			}
		}
	}
	t.Logf("largest relative errors: %v", worst)
}

// TestVarlenBackwardRefusals: no DETERMINISTIC or sinks yet; sizes of O,
// LSE and dO are checked; a call with no query gives zero gradients.
func TestVarlenBackwardRefusals(t *testing.T) {
	for _, opts := range []fac.Options{{Mask: "causal", Sinks: true}, {Mask: "causal", Consts: map[string]string{"DETERMINISTIC": "true"}}} {
		if _, err := fac.CompileBackwardVarlen(opts, 16); err == nil {
			t.Errorf("%+v accepted", opts)
		}
	}
	bwd, err := fac.CompileBackwardVarlen(fac.Options{Mask: "causal"}, 16)
	if err != nil {
		t.Fatal(err)
	}
	in := fac.VarlenInputs{Q: make([]float32, 3*16), K: make([]float32, 4*16), V: make([]float32, 4*16),
		CuSeqlensQ: []int32{0, 3}, CuSeqlensK: []int32{0, 4}}
	if _, err := bwd.RunCPU(fac.VarlenBackwardInputs{VarlenInputs: in, O: make([]float32, 3*16), LSE: make([]float32, 2), DO: make([]float32, 3*16)}, 1, 1); err == nil {
		t.Error("LSE of the wrong length accepted")
	}
	in.Q, in.CuSeqlensQ = nil, []int32{0, 0}
	g, err := bwd.RunCPU(fac.VarlenBackwardInputs{VarlenInputs: in, O: nil, LSE: nil, DO: nil}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.DQ) != 0 || len(g.DK) != 4*16 || g.DK[0] != 0 {
		t.Errorf("no queries: dQ %d, dK %d values", len(g.DQ), len(g.DK))
	}
}
