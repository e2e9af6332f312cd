package lang_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/parser"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// inputsSrc declares mods with each kind of input: N-D aux tensors with
// declared shapes, run-time parameters, batch and num_heads, and mods
// calling mods that read aux tensors.
const inputsSrc = `
mask doc2d(b, h, q_idx, kv_idx, doc: tensor[i32][batch, seqlen_q]) {
    return doc[b, q_idx] == doc[b, kv_idx]
}

score relbias(s, b, h, q_idx, kv_idx, bias: tensor[f32][num_heads, seqlen_q + seqlen_k - 1]) {
    return s + bias[h, q_idx - kv_idx + seqlen_k - 1]
}

mask per_head(b, h, q_idx, kv_idx, m: tensor[bool][num_heads, seqlen_q, seqlen_k]) {
    return m[h, q_idx, kv_idx]
}

mask offset_causal(b, h, q_idx, kv_idx, offset: i32) {
    return kv_idx <= q_idx + offset
}

mask first_heads(b, h, q_idx, kv_idx) {
    return h < num_heads / 2 || q_idx >= kv_idx
}

// causal_doc calls document, which reads doc: doc becomes causal_doc's.
mask causal_doc(b, h, q_idx, kv_idx) {
    return document(b, h, q_idx, kv_idx) && q_idx >= kv_idx
}

// shared declares doc as document does: one tensor for both.
mask shared(b, h, q_idx, kv_idx, doc: tensor[i32], window: i32) {
    return causal_doc(b, h, q_idx, kv_idx) && doc[kv_idx] >= 0 && offset_causal(b, h, q_idx, kv_idx) && q_idx - kv_idx < window
}
`

func resolve(t *testing.T, prog *lang.Program, expr, kind string) *lang.ModInst {
	t.Helper()
	e, err := parser.ParseExpr("<"+kind+">", expr)
	if err != nil {
		t.Fatal(err)
	}
	m, err := prog.ResolveMod(e, kind)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestModInputs checks what each mod reads, and the parameters flash_fwd
// gets for it: <mod>.<aux> and <mod>.<aux>.len per aux tensor,
// <mod>.<name> per run-time parameter, batch and num_heads when read.
func TestModInputs(t *testing.T) {
	prog, err := attention.Load(map[string]string{"x.fa": inputsSrc})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		expr, kind string
		inputs     string   // aux types, then scalars
		params     []string // flash_fwd's parameters after num_kv_blocks
	}{
		{"doc2d", "mask", "doc: tensor[i32][batch, seqlen_q] (doc2d)", []string{"mask.doc", "mask.doc.len", "batch"}},
		{"relbias", "score", "bias: tensor[f32][num_heads, seqlen_q + seqlen_k - 1] (relbias)", []string{"score.bias", "score.bias.len", "num_heads"}},
		{"per_head", "mask", "m: tensor[bool][num_heads, seqlen_q, seqlen_k] (per_head)", []string{"mask.m", "mask.m.len", "num_heads"}},
		{"offset_causal", "mask", "offset: i32 (offset_causal)", []string{"mask.offset"}},
		{"first_heads", "mask", "", []string{"num_heads"}},
		{"causal_doc", "mask", "doc: tensor[i32] (document)", []string{"mask.doc", "mask.doc.len"}},
		{"and_masks(causal, document)", "mask", "doc: tensor[i32] (document)", []string{"mask.doc", "mask.doc.len"}},
		{"or_masks(not_mask(doc2d), and_masks(offset_causal, noop_mask))", "mask", "doc: tensor[i32][batch, seqlen_q] (doc2d); offset: i32 (offset_causal)",
			[]string{"mask.doc", "mask.doc.len", "mask.offset", "batch"}},
		{"shared", "mask", "doc: tensor[i32] (shared); window: i32 (shared); offset: i32 (offset_causal)",
			[]string{"mask.doc", "mask.doc.len", "mask.window", "mask.offset"}},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			m := resolve(t, prog, c.expr, c.kind)
			var got []string
			for _, a := range m.AuxParams() {
				got = append(got, a.Name+": "+a.Type()+" ("+a.Mod+")")
			}
			for _, s := range m.ScalarParams() {
				e := s.Elem.String()
				got = append(got, s.Name+": "+e+" ("+s.Mod+")")
			}
			if g := strings.Join(got, "; "); g != c.inputs {
				t.Errorf("inputs %q, want %q", g, c.inputs)
			}
			mod, err := prog.Lower(lang.Instance{Kernel: "flash_fwd", Args: map[string]lang.Const{c.kind: {Kind: lang.CMod, Mod: m}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := tir.Verify(mod); err != nil {
				t.Fatal(err)
			}
			var names []string
			seen := false
			for _, p := range mod.Func("flash_fwd").Params {
				if seen {
					names = append(names, p.Name)
				}
				seen = seen || p.Name == "num_kv_blocks"
			}
			if !slices.Equal(names, c.params) {
				t.Errorf("flash_fwd's extra parameters %v, want %v", names, c.params)
			}
		})
	}
}

// TestGatherND evaluates N-D gathers element by element on the reference
// interpreter: row-major, and 0 (false) for any index outside its
// dimension or an element past the tensor's length.
func TestGatherND(t *testing.T) {
	prog, err := attention.Load(map[string]string{"x.fa": inputsSrc})
	if err != nil {
		t.Fatal(err)
	}
	const batch, heads, sq, sk = 2, 3, 4, 5
	call := func(m *lang.ModInst, args ...any) float64 {
		t.Helper()
		mod, err := prog.LowerMod(m)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cpu.Call(mod, m.Kind(), args...)
		if err != nil {
			t.Fatal(err)
		}
		return res[0].Vals[0]
	}
	// relbias: bias[h, q - kv + sk - 1] of a [heads, sq + sk - 1] table.
	bias := make([]float32, heads*(sq+sk-1))
	for i := range bias {
		bias[i] = float32(i)
	}
	rb := resolve(t, prog, "relbias", "score")
	buf := cpu.FromF32("bias", bias)
	for h := -1; h <= heads; h++ {
		for q := range sq {
			for kv := range sk {
				want := 0.0
				if h >= 0 && h < heads {
					want = float64(h*(sq+sk-1) + q - kv + sk - 1)
				}
				got := call(rb, float32(0), 0, h, q, kv, sq, sk, batch, heads, buf, len(bias))
				if got != want {
					t.Fatalf("relbias h=%d q=%d kv=%d: %v, want %v", h, q, kv, got, want)
				}
			}
		}
	}
	// per_head: a [heads, sq, sk] bool tensor; q or kv past the declared
	// dimension reads false, and so does an element past a short buffer.
	m := make([]float64, heads*sq*sk)
	for i := range m {
		m[i] = float64(i % 2)
	}
	ph := resolve(t, prog, "per_head", "mask")
	mb := cpu.FromFloats("m", tir.I1, m)
	short := len(m) - 3
	for h := range heads {
		for q := range sq + 1 {
			for kv := range sk + 1 {
				want := 0.0
				if q < sq && kv < sk {
					want = m[(h*sq+q)*sk+kv]
				}
				if got := call(ph, 0, h, q, kv, sq, sk, batch, heads, mb, len(m)); got != want {
					t.Fatalf("per_head h=%d q=%d kv=%d: %v, want %v", h, q, kv, got, want)
				}
				if (h*sq+q)*sk+kv >= short {
					want = 0
				}
				if got := call(ph, 0, h, q, kv, sq, sk, batch, heads, mb, short); got != want {
					t.Fatalf("per_head, buffer of %d, h=%d q=%d kv=%d: %v, want %v", short, h, q, kv, got, want)
				}
			}
		}
	}
	// offset_causal takes its offset as the last argument.
	oc := resolve(t, prog, "offset_causal", "mask")
	if got := call(oc, 0, 0, 2, 5, sq, sk, batch, heads, 3); got != 1 {
		t.Errorf("offset_causal(q=2, kv=5, offset=3) = %v, want 1", got)
	}
	if got := call(oc, 0, 0, 2, 5, sq, sk, batch, heads, 2); got != 0 {
		t.Errorf("offset_causal(q=2, kv=5, offset=2) = %v, want 0", got)
	}
}
