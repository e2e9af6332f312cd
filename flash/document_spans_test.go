package flash

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/reference"
)

// segSources is a user's mask of document's form over ids named seg,
// and segForms its declaration.
var (
	segSources = map[string]string{"seg.fa": "mask seg_mask(b, h, q_idx, kv_idx, seg: tensor[i32]) {\n    return seg[q_idx] == seg[kv_idx]\n}\n" +
		"mask other_seg(b, h, q_idx, kv_idx, part: tensor[i32]) {\n    return part[q_idx] == part[kv_idx]\n}\n" +
		"mask no_ids(b, h, q_idx, kv_idx) {\n    return q_idx >= kv_idx\n}\n"}
	segForms = map[string]MaskForm{"seg_mask": {EqualIDs: "seg"}, "other_seg": {EqualIDs: "part"}}
)

func TestSpansExpr(t *testing.T) {
	for _, c := range []struct{ mask, want, ids string }{
		{"document", "document_spans", "doc"},
		{"and_masks(causal, document)", "and_masks(causal, document_spans)", "doc"},
		{"or_masks(sliding_window(4, 0), and_masks(document, prefix_lm(3)))", "or_masks(sliding_window(4, 0), and_masks(document_spans, prefix_lm(3)))", "doc"},
		{"causal", "", ""},
		{"sliding_window(4, 0)", "", ""},
		// A user's masks declared EqualIDs, alone, beside document, and
		// two of different ids (no one span form for both).
		{"seg_mask", "document_spans", "seg"},
		{"and_masks(seg_mask, not_mask(causal))", "and_masks(document_spans, not_mask(causal))", "seg"},
		{"and_masks(seg_mask, document)", "", ""},
		{"and_masks(seg_mask, other_seg)", "", ""},
		{"no_ids", "", ""},
	} {
		f, err := CompileForward(Options{Mask: c.mask, Sources: segSources, MaskForms: segForms}, 16)
		if err != nil {
			t.Fatal(err)
		}
		got, ids, ok := spansExpr(f.Mask(), spansByQuery, segForms)
		if c.want == "" && ok || c.want != "" && (got != c.want || ids != c.ids) {
			t.Errorf("%s: %q, %q, %v; want %q, %q", c.mask, got, ids, ok, c.want, c.ids)
		}
		// Undeclared, a user's mask is run as written.
		if got, _, ok := spansExpr(f.Mask(), spansByQuery, nil); ok && !strings.Contains(c.mask, "document") {
			t.Errorf("%s undeclared: %q", c.mask, got)
		}
	}
	// A user's mask that calls document is rewritten inside the call only
	// through the combinators: its own body is compiled as written.
	f, err := CompileForward(Options{Mask: "mine", Sources: map[string]string{"m.fa": "mask mine(b, h, q_idx, kv_idx, doc: tensor[i32]) {\n    return document(b, h, q_idx, kv_idx) && q_idx >= kv_idx\n}\n"}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, ok := spansExpr(f.Mask(), spansByQuery, nil); ok {
		t.Errorf("user mask: %q rewritten", got)
	}
}

// TestMaskFormsChecked: a declaration must name a mask of the caller's
// with an integer aux tensor of the ids' name.
func TestMaskFormsChecked(t *testing.T) {
	for _, c := range []struct {
		mask  string
		forms map[string]MaskForm
		want  string
	}{
		{"seg_mask", map[string]MaskForm{"sag_mask": {EqualIDs: "seg"}}, "no mask sag_mask"},
		{"document", map[string]MaskForm{"document": {EqualIDs: "doc"}}, "stdlib mask"},
		{"seg_mask", map[string]MaskForm{"seg_mask": {EqualIDs: "ids"}}, `declares ids "ids"`},
		{"and_masks(causal, no_ids)", map[string]MaskForm{"no_ids": {EqualIDs: "seg"}}, `declares ids "seg"`},
	} {
		for _, backward := range []bool{false, true} {
			opts := Options{Mask: c.mask, Sources: segSources, MaskForms: c.forms}
			var err error
			if backward {
				_, err = CompileBackward(opts, 16)
			} else {
				_, err = CompileForward(opts, 16)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %v (backward %v): %v, want %q", c.mask, c.forms, backward, err, c.want)
			}
		}
	}
}

func TestDocumentSpans(t *testing.T) {
	start, end, ok := DocumentSpans([]int32{7, 7, 3, 9, 9, 9})
	if !ok || fmt.Sprint(start, end) != "[0 0 2 3 3 3] [2 2 3 6 6 6]" {
		t.Errorf("runs: %v %v %v", start, end, ok)
	}
	if _, _, ok := DocumentSpans([]int32{0, 0, 1, 0}); ok {
		t.Error("an id in two runs passed")
	}
	if _, _, ok := DocumentSpans(nil); !ok {
		t.Error("no ids: want ok")
	}
}

func TestSpansAux(t *testing.T) {
	doc := []int32{0, 0, 1, 1, 1, 2}
	aux, ok := spansAux(map[string]any{"doc": doc, "slopes": []float32{1}}, "doc", 5, []string{"doc_start", "doc_end", "slopes"})
	if !ok || aux["doc"] != nil || aux["slopes"] == nil || fmt.Sprint(aux["doc_start"], aux["doc_end"]) != "[0 0 2 2 2] [2 2 5 5 5]" {
		t.Errorf("doc: %v %v", aux, ok)
	}
	// Only the first n ids matter: a reused id past them is no obstacle.
	if _, ok := spansAux(map[string]any{"doc": []int32{0, 1, 0}}, "doc", 2, nil); !ok {
		t.Error("ids past n spoiled the runs")
	}
	if aux, ok := spansAux(map[string]any{"doc": []int{4, 4, 2}}, "doc", 3, nil); !ok || fmt.Sprint(aux["doc_end"]) != "[2 2 3]" {
		t.Errorf("[]int ids: %v %v", aux, ok)
	}
	if aux, ok := spansAux(map[string]any{"mask.doc": doc}, "doc", 6, []string{"doc_start", "doc_end", "doc"}); !ok || aux["mask.doc"] == nil || aux["mask.doc_start"] == nil {
		t.Errorf("mask.doc, read elsewhere too: %v %v", aux, ok)
	}
	// A user's ids tensor, by its own name.
	if aux, ok := spansAux(map[string]any{"seg": doc, "doc": []int32{9}}, "seg", 6, []string{"doc_start", "doc_end", "doc"}); !ok || aux["seg"] != nil || fmt.Sprint(aux["doc"], aux["doc_end"]) != "[9] [2 2 5 5 5 6]" {
		t.Errorf("seg: %v %v", aux, ok)
	}
	for name, aux := range map[string]map[string]any{
		"short":             {"doc": doc},
		"not runs":          {"doc": []int32{0, 1, 0, 1, 0, 1, 0}},
		"not i32":           {"doc": []int64{0, 0, 0, 0, 0, 0, 1 << 40}},
		"taken":             {"doc": []int32{0, 0, 0, 0, 0, 0, 0}, "doc_start": []int32{0}},
		"taken by the mask": {"doc": []int32{0, 0, 0, 0, 0, 0, 0}, "mask.doc_end": []int32{0}},
		"absent":            {"slopes": []float32{1}},
	} {
		if _, ok := spansAux(aux, "doc", 7, nil); ok {
			t.Errorf("%s: spans taken", name)
		}
	}
}

// TestDocumentSpansMatchReference: document (alone and under a combinator)
// on random ids runs as spans exactly when the ids are runs, and the
// forward and the backward match the float64 reference either way.
func TestDocumentSpansMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 1))
	type tc struct {
		mask   string
		runs   bool
		sh     Shape
		causal bool
	}
	cases := []tc{
		{"document", true, Shape{Batch: 1, Heads: 2, KVHeads: 1, SeqQ: 150, SeqK: 150, Dim: 16}, false},
		{"document", false, Shape{Batch: 1, Heads: 2, KVHeads: 2, SeqQ: 97, SeqK: 130, Dim: 16}, false},
		{"and_masks(causal, document)", true, Shape{Batch: 2, Heads: 2, KVHeads: 1, SeqQ: 130, SeqK: 77, Dim: 16}, true},
		{"document", true, Shape{Batch: 1, Heads: 1, KVHeads: 1, SeqQ: 1, SeqK: 200, Dim: 16}, false},
		// A user's masks declared EqualIDs (segForms).
		{"seg_mask", true, Shape{Batch: 1, Heads: 2, KVHeads: 1, SeqQ: 150, SeqK: 150, Dim: 16}, false},
		{"seg_mask", false, Shape{Batch: 1, Heads: 2, KVHeads: 2, SeqQ: 97, SeqK: 130, Dim: 16}, false},
		{"and_masks(causal, seg_mask)", true, Shape{Batch: 2, Heads: 2, KVHeads: 1, SeqQ: 130, SeqK: 77, Dim: 16}, true},
	}
	for _, c := range cases {
		n := max(c.sh.SeqQ, c.sh.SeqK)
		doc := make([]int32, n)
		if c.runs {
			id, left := int32(5), 1
			for i := range doc {
				if left == 0 {
					id, left = id+1+rng.Int32N(3), 1+rng.IntN(60)
					if rng.IntN(4) == 0 {
						left = 1 // one-token documents
					}
				}
				doc[i], left = id, left-1
			}
		} else {
			for i := range doc {
				doc[i] = rng.Int32N(3)
			}
		}
		name := fmt.Sprintf("%s/runs=%v/%dx%d", c.mask, c.runs, c.sh.SeqQ, c.sh.SeqK)
		t.Run(name, func(t *testing.T) {
			opts, ids := Options{Mask: c.mask}, "doc"
			if strings.Contains(c.mask, "seg_mask") {
				opts.Sources, opts.MaskForms, ids = segSources, segForms, "seg"
			}
			f, err := CompileForward(opts, c.sh.Dim)
			if err != nil {
				t.Fatal(err)
			}
			in := Inputs{Q: randF32(rng, c.sh.Batch*c.sh.Heads*c.sh.SeqQ*c.sh.Dim), K: randF32(rng, c.sh.Batch*c.sh.KV()*c.sh.SeqK*c.sh.Dim),
				V: randF32(rng, c.sh.Batch*c.sh.KV()*c.sh.SeqK*c.sh.Dim), Aux: map[string]any{ids: doc}}
			if g, _ := f.withSpans(in, c.sh); (g != f) != c.runs {
				t.Fatalf("span form taken: %v, ids are runs: %v", g != f, c.runs)
			}
			o, lse, err := f.RunCPU(in, c.sh)
			if err != nil {
				t.Fatal(err)
			}
			rsh := reference.Shape{B: c.sh.Batch, H: c.sh.Heads, HKV: c.sh.KV(), Sq: c.sh.SeqQ, Sk: c.sh.SeqK, D: c.sh.Dim}
			mask := func(b, h, i, j int) bool { return doc[i] == doc[j] && (!c.causal || i >= j) }
			scale := 1 / math.Sqrt(float64(c.sh.Dim))
			ro, rlse := reference.Attention(f64(in.Q), f64(in.K), f64(in.V), rsh, scale, mask, nil)
			if d := maxDiff(o, ro); d > 1e-4 {
				t.Errorf("O off by %g", d)
			}
			if d := maxDiff(lse, rlse); d > 1e-4 {
				t.Errorf("LSE off by %g", d)
			}
			bw, err := CompileBackward(opts, c.sh.Dim)
			if err != nil {
				t.Fatal(err)
			}
			bin := BackwardInputs{Q: in.Q, K: in.K, V: in.V, O: o, LSE: lse, DO: randF32(rng, len(o)), Aux: in.Aux}
			if g, _ := bw.withSpans(bin, c.sh); (g != bw) != c.runs {
				t.Fatalf("backward: span form taken: %v, ids are runs: %v", g != bw, c.runs)
			}
			dq, dk, dv, err := bw.RunCPU(bin, c.sh)
			if err != nil {
				t.Fatal(err)
			}
			rg := reference.AttentionGrad(f64(in.Q), f64(in.K), f64(in.V), f64(bin.DO), rsh, scale, mask, nil, nil, nil)
			for _, p := range []struct {
				name string
				got  []float32
				want []float64
			}{{"dQ", dq, rg.DQ}, {"dK", dk, rg.DK}, {"dV", dv, rg.DV}} {
				if d := maxDiff(p.got, p.want); d > 1e-4 {
					t.Errorf("%s off by %g", p.name, d)
				}
			}
		})
	}
}

// TestDeclaredSpansSameKernels: a user's mask declared EqualIDs runs as
// spans on the very kernels the stdlib's document does (one identity),
// forward and backward.
func TestDeclaredSpansSameKernels(t *testing.T) {
	user := Options{Mask: "seg_mask", Sources: segSources, MaskForms: segForms, DType: "bf16"}
	std := Options{Mask: "document", DType: "bf16"}
	var keys [2][]string
	for i, opts := range []Options{std, user} {
		f, err := CompileForward(opts, 64)
		if err != nil {
			t.Fatal(err)
		}
		bw, err := CompileBackward(opts, 64)
		if err != nil {
			t.Fatal(err)
		}
		g, ok := f.spanVariant()
		gb, okb := bw.spanVariant()
		if !ok || !okb {
			t.Fatalf("%s: no span variant (forward %v, backward %v)", opts.Mask, ok, okb)
		}
		keys[i] = append(keys[i], g.res.Ident.Key())
		for _, r := range gb.Kernels() {
			keys[i] = append(keys[i], r.Ident.Key())
		}
	}
	if fmt.Sprint(keys[0]) != fmt.Sprint(keys[1]) {
		t.Errorf("span kernels of document %v, of a declared user mask %v", keys[0], keys[1])
	}
}

func randF32(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64())
	}
	return out
}

func f64(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// maxDiff is the largest |got − want|, treating equal infinities as equal.
func maxDiff(got []float32, want []float64) float64 {
	d := 0.0
	for i, g := range got {
		if float64(g) == want[i] {
			continue
		}
		d = max(d, math.Abs(float64(g)-want[i]))
	}
	return d
}
