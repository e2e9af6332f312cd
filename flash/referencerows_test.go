package flash

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestReferenceRows: the sampled reference gives, for each row it is
// asked for, exactly what the full reference gives (it shares its
// arithmetic and evaluates the mods a chunk of keys at a time), with masks
// and scores that read positions, aux tensors and run-time parameters,
// GQA, sinks, bf16 inputs, a mask that ignores kv and key counts past one
// chunk.
func TestReferenceRows(t *testing.T) {
	user := map[string]string{"u.fa": `
mask rows_only(b, h, q_idx, kv_idx) {
    return q_idx % 3 != 1
}
mask offset_causal(b, h, q_idx, kv_idx, offset: i32) {
    return kv_idx <= q_idx + offset
}
`}
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		mask, score, dtype string
		sh                 Shape
		sinks              bool
		vals               map[string]any
	}{
		{mask: "causal", sh: Shape{Batch: 2, Heads: 2, SeqQ: 33, SeqK: 1500, Dim: 16}},
		{mask: "sliding_window(100, 7)", score: "softcap(20.0)", dtype: "bf16", sh: Shape{Batch: 1, Heads: 4, KVHeads: 2, SeqQ: 40, SeqK: 300, Dim: 8}},
		{mask: "document", score: "alibi", sh: Shape{Batch: 1, Heads: 3, SeqQ: 64, SeqK: 64, Dim: 8}},
		{mask: "rows_only", sh: Shape{Batch: 1, Heads: 1, SeqQ: 20, SeqK: 2100, Dim: 4}, sinks: true},
		{mask: "offset_causal", sh: Shape{Batch: 1, Heads: 2, SeqQ: 10, SeqK: 90, Dim: 4}, vals: map[string]any{"offset": 50}},
		{mask: "none", sh: Shape{Batch: 1, Heads: 1, SeqQ: 5, SeqK: 7, Dim: 4}},
	} {
		fwd, err := CompileForward(Options{Mask: c.mask, Score: c.score, DType: c.dtype, Sources: user, Sinks: c.sinks}, c.sh.Dim)
		if err != nil {
			t.Fatal(err)
		}
		sh := c.sh
		in := Inputs{Aux: map[string]any{}, Scalars: c.vals}
		for _, x := range []*[]float32{&in.Q, &in.K, &in.V} {
			n := sh.Batch * sh.KV() * sh.SeqK * sh.Dim
			if x == &in.Q {
				n = sh.Batch * sh.Heads * sh.SeqQ * sh.Dim
			}
			*x = make([]float32, n)
			for i := range *x {
				(*x)[i] = float32(r.NormFloat64())
			}
		}
		if c.mask == "document" {
			doc := make([]int32, max(sh.SeqQ, sh.SeqK))
			for i := range doc {
				doc[i] = int32(i / 10)
			}
			in.Aux["doc"] = doc
		}
		if c.score == "alibi" {
			in.Aux["slopes"] = []float32{0.5, 0.25, 0.125}
		}
		if c.sinks {
			in.Sinks = []float32{0.3}
		}
		o, lse, err := fwd.Reference(in, sh)
		if err != nil {
			t.Fatalf("%s: %v", c.mask, err)
		}
		var rows []RefRow
		for b := range sh.Batch {
			for h := range sh.Heads {
				for i := range sh.SeqQ {
					if (b+h+i)%3 == 0 || i == sh.SeqQ-1 {
						rows = append(rows, RefRow{B: b, H: h, I: i})
					}
				}
			}
		}
		ro, rlse, err := fwd.ReferenceRows(in, sh, rows)
		if err != nil {
			t.Fatalf("%s: %v", c.mask, err)
		}
		d := sh.Dim
		for n, row := range rows {
			at := (row.B*sh.Heads+row.H)*sh.SeqQ + row.I
			same := lse[at] == rlse[n] || math.IsNaN(lse[at]) && math.IsNaN(rlse[n])
			for k := range d {
				same = same && o[at*d+k] == ro[n*d+k]
			}
			if !same {
				t.Errorf("%s row %v: lse %v vs %v, o %v vs %v", c.mask, row, lse[at], rlse[n], o[at*d:][:d], ro[n*d:][:d])
				break
			}
		}
	}
	fwd, _ := CompileForward(Options{Mask: "causal"}, 4)
	sh := Shape{Batch: 1, Heads: 1, SeqQ: 4, SeqK: 4, Dim: 4}
	in := Inputs{Q: make([]float32, 16), K: make([]float32, 16), V: make([]float32, 16)}
	if _, _, err := fwd.ReferenceRows(in, sh, []RefRow{{I: 4}}); err == nil {
		t.Error("a row past seqlen_q accepted")
	}
}
