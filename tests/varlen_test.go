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

// varlenReference runs the float64 reference on each sequence alone
// (varlenReferenceGrads without dO, V of Q's head dim): O is
// [total_q, H, D], LSE [H, total_q].
func varlenReference(in fac.VarlenInputs, h, hkv, d int, m goMask) (o, lse []float64) {
	o, lse, _ = varlenReferenceGrads(in, nil, h, hkv, d, d, m)
	return o, lse
}

// varlenReferenceGrads is the float64 forward and, given do, backward of
// each packed sequence alone (its rows gathered to [1, H, S, D], or Dv for
// V, O and dO), with the Go mask made for its lengths and called with b =
// the sequence index: O [total_q, H, Dv], LSE [H, total_q], and the
// gradients in the packed layouts.
func varlenReferenceGrads(in fac.VarlenInputs, do []float32, h, hkv, d, dv int, m goMask) (o, lse []float64, g reference.Grads) {
	totalQ, totalK := len(in.Q)/(h*d), len(in.K)/(hkv*d)
	o, lse = make([]float64, totalQ*h*dv), make([]float64, h*totalQ)
	g = reference.Grads{DQ: make([]float64, len(in.Q)), DK: make([]float64, len(in.K)), DV: make([]float64, totalK*hkv*dv)}
	scale := float64(float32(1 / math.Sqrt(float64(d))))
	for b := 0; b+1 < len(in.CuSeqlensQ); b++ {
		qs, ks := int(in.CuSeqlensQ[b]), int(in.CuSeqlensK[b])
		sq, sk := int(in.CuSeqlensQ[b+1])-qs, int(in.CuSeqlensK[b+1])-ks
		if sq == 0 {
			continue
		}
		mf := seqMask(m, fac.Shape{Batch: 1, Heads: h, KVHeads: hkv, SeqQ: sq, SeqK: sk, Dim: d}, in.Aux, b)
		rsh := reference.Shape{B: 1, H: h, HKV: hkv, Sq: sq, Sk: sk, D: d, DV: dv}
		q, k, v := gatherRows(in.Q, qs, sq, h, d), gatherRows(in.K, ks, sk, hkv, d), gatherRows(in.V, ks, sk, hkv, dv)
		so, slse := reference.Attention(q, k, v, rsh, scale, mf, nil)
		for hh := range h {
			for t := range sq {
				lse[hh*totalQ+qs+t] = slse[hh*sq+t]
			}
		}
		scatterRows(o, so, qs, sq, h, dv)
		if do == nil || sk == 0 {
			continue
		}
		sg := reference.AttentionGrad(q, k, v, gatherRows(do, qs, sq, h, dv), rsh, scale, mf, nil, nil, nil)
		scatterRows(g.DQ, sg.DQ, qs, sq, h, d)
		scatterRows(g.DK, sg.DK, ks, sk, hkv, d)
		scatterRows(g.DV, sg.DV, ks, sk, hkv, dv)
	}
	return o, lse, g
}

// gatherRows is one sequence's rows of a packed [total, heads, w] tensor,
// the n from start, as [1, heads, n, w] in float64.
func gatherRows(xs []float32, start, n, heads, w int) []float64 {
	out := make([]float64, heads*n*w)
	for t := range n {
		for hh := range heads {
			for x := range w {
				out[(hh*n+t)*w+x] = float64(xs[((start+t)*heads+hh)*w+x])
			}
		}
	}
	return out
}

// scatterRows writes xs [1, heads, n, w] back to the packed dst's rows
// from start (gatherRows' inverse).
func scatterRows(dst, xs []float64, start, n, heads, w int) {
	for t := range n {
		for hh := range heads {
			copy(dst[((start+t)*heads+hh)*w:][:w], xs[(hh*n+t)*w:][:w])
		}
	}
}

// seqMask is the Go mask m (nil: none) made for one packed sequence's
// shape seq and called with b = the sequence's index.
func seqMask(m goMask, seq fac.Shape, aux map[string]any, b int) reference.MaskFunc {
	if m == nil {
		return nil
	}
	inner := m(seq, aux)
	return func(_, hh, i, j int) bool { return inner(b, hh, i, j) }
}

func cumsum(lens []int) []int32 {
	out := []int32{0}
	for _, n := range lens {
		out = append(out, out[len(out)-1]+int32(n))
	}
	return out
}

// TestVarlenMatchesNaive runs flash_fwd_varlen on the CPU against the
// reference per sequence: lengths 0 and 1, unaligned ones, q shorter and
// longer than k, GQA; masks that read the sequence's lengths
// (causal_bottom_right) and leave rows empty (an empty k sequence).
func TestVarlenMatchesNaive(t *testing.T) {
	lensQ := []int{5, 0, 1, 100, 70, 3, 1}
	lensK := []int{5, 4, 1, 33, 130, 0, 65}
	for mi, m := range masks {
		switch m.expr {
		case "none", "causal", "causal_bottom_right", "sliding_window(20, 3)":
		default:
			continue
		}
		fwd, err := fac.CompileForwardVarlen(fac.Options{Mask: m.expr}, dim)
		if err != nil {
			t.Fatalf("compile %s: %v", m.expr, err)
		}
		for gi, heads := range [][2]int{{2, 2}, {4, 2}} {
			rng := rand.New(rand.NewPCG(uint64(mi*10+gi), 3))
			randn := normals(rng)
			cq, ck := cumsum(lensQ), cumsum(lensK)
			tq, tk := int(cq[len(cq)-1]), int(ck[len(ck)-1])
			in := fac.VarlenInputs{Q: randn(tq * heads[0] * dim), K: randn(tk * heads[1] * dim), V: randn(tk * heads[1] * dim),
				CuSeqlensQ: cq, CuSeqlensK: ck}
			o, lse, err := fwd.RunCPU(in, heads[0], heads[1])
			if err != nil {
				t.Fatalf("run %s: %v", m.expr, err)
			}
			ro, rlse := varlenReference(in, heads[0], heads[1], dim, m.fn)
			name := fmt.Sprintf("%s/H=%d,Hkv=%d", m.expr, heads[0], heads[1])
			// fac's own reference (mods through the interpreter) agrees.
			fo, flse, err := fwd.Reference(in, heads[0], heads[1])
			if err != nil {
				t.Fatalf("%s: Reference: %v", name, err)
			}
			for i := range fo {
				if math.Abs(fo[i]-ro[i]) > 1e-9 {
					t.Fatalf("%s: Reference O[%d] = %v, Go reference %v", name, i, fo[i], ro[i])
				}
			}
			for i := range flse {
				if flse[i] != rlse[i] && math.Abs(flse[i]-rlse[i]) > 1e-9 {
					t.Fatalf("%s: Reference LSE[%d] = %v, Go reference %v", name, i, flse[i], rlse[i])
				}
			}
			maxErr, maxRef := 0.0, 0.0
			for i := range o {
				if math.IsNaN(float64(o[i])) {
					t.Fatalf("%s: O[%d] is NaN", name, i)
				}
				maxErr = math.Max(maxErr, math.Abs(float64(o[i])-ro[i]))
				maxRef = math.Max(maxRef, math.Abs(ro[i]))
			}
			if maxErr > 1e-5*maxRef {
				t.Errorf("%s: max relative error %.3g", name, maxErr/maxRef)
			}
			empty := 0
			for r, want := range rlse {
				got := float64(lse[r])
				if math.IsInf(want, -1) {
					empty++
					if !math.IsInf(got, -1) {
						t.Errorf("%s: LSE[%d] = %v, want -inf (row keeps nothing)", name, r, got)
					}
					continue
				}
				if math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
					t.Errorf("%s: LSE[%d] = %v, reference %v", name, r, got, want)
				}
			}
			if empty == 0 {
				t.Errorf("%s: no empty rows (the sequence with no keys should give some)", name)
			}
		}
	}
}

// TestVarlenChecksCuSeqlens refuses cu_seqlens that do not describe the
// packed tensors.
func TestVarlenChecksCuSeqlens(t *testing.T) {
	fwd, err := fac.CompileForwardVarlen(fac.Options{Mask: "causal"}, dim)
	if err != nil {
		t.Fatal(err)
	}
	q := make([]float32, 6*2*dim)
	for _, c := range []struct{ cq, ck []int32 }{
		{[]int32{0, 6}, []int32{0, 5}},             // k total wrong
		{[]int32{1, 6}, []int32{0, 6}},             // not from 0
		{[]int32{0, 4, 3, 6}, []int32{0, 2, 4, 6}}, // decreasing
		{[]int32{0, 6}, []int32{0, 3, 6}},          // lengths differ
	} {
		if _, _, err := fwd.RunCPU(fac.VarlenInputs{Q: q, K: q, V: q, CuSeqlensQ: c.cq, CuSeqlensK: c.ck}, 2, 2); err == nil {
			t.Errorf("cu_seqlens %v / %v accepted", c.cq, c.ck)
		}
	}
}

// TestVarlenRefusesSeqlenShapedAux: an aux tensor sized by seqlen_q cannot
// be laid out for sequences of different lengths yet.
func TestVarlenRefusesSeqlenShapedAux(t *testing.T) {
	src := "mask tab_mask(b, h, q_idx, kv_idx, tab: tensor[i32][seqlen_q]) {\n    return tab[q_idx] > 0\n}\n"
	_, err := fac.CompileForwardVarlen(fac.Options{Mask: "tab_mask", Sources: map[string]string{"tab.fa": src}}, dim)
	if err == nil || !strings.Contains(err.Error(), "shaped by the sequence lengths") {
		t.Errorf("err = %v", err)
	}
}
