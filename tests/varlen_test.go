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

// varlenReference runs the float64 reference on each sequence alone: its
// q, k, v rows gathered to [1, H, S, D], the Go mask made for its lengths
// and called with b = the sequence index. O is [total_q, H, D], LSE
// [H, total_q].
func varlenReference(in fac.VarlenInputs, h, hkv, d int, m goMask) (o, lse []float64) {
	totalQ := len(in.Q) / (h * d)
	o = make([]float64, len(in.Q))
	lse = make([]float64, h*totalQ)
	gather := func(xs []float32, start, n, heads int) []float64 {
		out := make([]float64, heads*n*d)
		for t := 0; t < n; t++ {
			for hh := 0; hh < heads; hh++ {
				for x := 0; x < d; x++ {
					out[(hh*n+t)*d+x] = float64(xs[((start+t)*heads+hh)*d+x])
				}
			}
		}
		return out
	}
	scale := float64(float32(1 / math.Sqrt(float64(d))))
	for b := 0; b+1 < len(in.CuSeqlensQ); b++ {
		qs, ks := int(in.CuSeqlensQ[b]), int(in.CuSeqlensK[b])
		sq, sk := int(in.CuSeqlensQ[b+1])-qs, int(in.CuSeqlensK[b+1])-ks
		if sq == 0 {
			continue
		}
		var mf reference.MaskFunc
		if m != nil {
			inner := m(fac.Shape{Batch: 1, Heads: h, KVHeads: hkv, SeqQ: sq, SeqK: sk, Dim: d}, in.Aux)
			mf = func(_, hh, i, j int) bool { return inner(b, hh, i, j) }
		}
		so, slse := reference.Attention(gather(in.Q, qs, sq, h), gather(in.K, ks, sk, hkv), gather(in.V, ks, sk, hkv),
			reference.Shape{B: 1, H: h, HKV: hkv, Sq: sq, Sk: sk, D: d}, scale, mf, nil)
		for hh := 0; hh < h; hh++ {
			for t := 0; t < sq; t++ {
				lse[hh*totalQ+qs+t] = slse[hh*sq+t]
				for x := 0; x < d; x++ {
					o[((qs+t)*h+hh)*d+x] = so[(hh*sq+t)*d+x]
				}
			}
		}
	}
	return o, lse
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
