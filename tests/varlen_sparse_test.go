package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/reference"
)

// varlenMods are user masks for the block-sparse varlen tests: one reading
// the sequence's lengths and a run-time parameter (a bottom-right window),
// one reading h (a window per head: rows per head), one reading b (its
// sequences are listed all-partial).
const varlenMods = `
mask tail_window(b, h, q_idx, kv_idx, w: i32) {
    let d = q_idx + seqlen_k - seqlen_q - kv_idx
    return d >= 0 && d < w
}

mask head_window(b, h, q_idx, kv_idx) {
    return q_idx >= kv_idx && q_idx - kv_idx < 100 * (h + 1)
}

mask seq_parity(b, h, q_idx, kv_idx) {
    return q_idx >= kv_idx && (b % 2 == 0 || q_idx - kv_idx < 30)
}
`

// varlenSparseCase is a mask of the block-sparse varlen tests: fac's
// expression, the Go mask (made per sequence), run-time parameters.
type varlenSparseCase struct {
	expr    string
	fn      goMask
	scalars map[string]any
	// skips: the block mask must leave blocks out; evaluated: the number
	// of sequences listed all-partial (the mask reads b).
	skips     bool
	evaluated bool
}

var varlenSparseCases = []varlenSparseCase{
	{expr: "none"},
	{expr: "causal", fn: varlenMaskFn("causal"), skips: true},
	{expr: "sliding_window(200, 0)", fn: func(fac.Shape, map[string]any) reference.MaskFunc {
		return func(b, h, i, j int) bool { return i-200 <= j && j <= i }
	}, skips: true},
	{expr: "causal_bottom_right", fn: varlenMaskFn("causal_bottom_right"), skips: true},
	{expr: "document", fn: varlenMaskFn("document"), skips: true},
	{expr: "tail_window", scalars: map[string]any{"w": 150}, fn: func(sh fac.Shape, _ map[string]any) reference.MaskFunc {
		return func(b, h, i, j int) bool { d := i + sh.SeqK - sh.SeqQ - j; return d >= 0 && d < 150 }
	}, skips: true},
	{expr: "head_window", fn: func(fac.Shape, map[string]any) reference.MaskFunc {
		return func(b, h, i, j int) bool { return i >= j && i-j < 100*(h+1) }
	}, skips: true},
	{expr: "seq_parity", fn: func(fac.Shape, map[string]any) reference.MaskFunc {
		return func(b, h, i, j int) bool { return i >= j && (b%2 == 0 || i-j < 30) }
	}, evaluated: true},
}

// varlenDoc are document ids by position within a sequence: documents of
// 1 to 400 tokens.
func varlenDoc(n int) []int32 {
	rng := rand.New(rand.NewPCG(9, 9))
	doc := make([]int32, n)
	id, left := int32(0), 0
	for i := range doc {
		if left == 0 {
			id++
			left = 1 + rng.IntN(400)
		}
		doc[i] = id
		left--
	}
	return doc
}

// TestVarlenBlockSparseMatchesNaive is the varlen block-sparsity
// acceptance on the CPU device: each sequence's own block mask (built on
// the host), lengths 1 to 4096, empty sequences (repeated cu_seqlens
// values, on either side), q and k lengths that differ, GQA; causal,
// sliding window, bottom-right causal, a document mask reading an aux
// tensor, and user masks reading the lengths and a run-time parameter, h,
// and b. Within 1e-5 of the float64 reference; rows that keep nothing give
// O = 0 and LSE = -inf exactly; the masks with structure skip blocks.
func TestVarlenBlockSparseMatchesNaive(t *testing.T) {
	const heads, kvHeads, d = 2, 1, 16
	doc := varlenDoc(4096)
	for ci, c := range varlenSparseCases {
		t.Run(c.expr, func(t *testing.T) {
			// One sequence of 4096 where the mask skips blocks (the
			// interpreter pays for every kept block: 1024 otherwise).
			long := 4096
			if !c.skips || testing.Short() {
				long = 1024
			}
			lensQ := []int{1, 0, 7, 127, 128, 129, 0, 300, long, 33, 0, 1000, 64}
			lensK := []int{1, 5, 7, 127, 128, 129, 0, 257, long, 64, 0, 999, 0}
			cq, ck := cumsum(lensQ), cumsum(lensK)
			tq, tk := int(cq[len(cq)-1]), int(ck[len(ck)-1])
			rng := rand.New(rand.NewPCG(21, uint64(ci)))
			randn := normals(rng)
			q, k, v := randn(tq*heads*d), randn(tk*kvHeads*d), randn(tk*kvHeads*d)
			opts := fac.Options{Mask: c.expr, Sources: map[string]string{"varlen_mods.fa": varlenMods}}
			fwd, err := fac.CompileForwardVarlen(opts, d)
			if err != nil {
				t.Fatal(err)
			}
			in := fac.VarlenInputs{Q: q, K: k, V: v, CuSeqlensQ: cq, CuSeqlensK: ck, Scalars: c.scalars}
			if len(fwd.AuxTensors()) > 0 {
				in.Aux = map[string]any{"doc": doc}
			}
			bm, err := fwd.BlockMask(in, heads)
			if err != nil {
				t.Fatal(err)
			}
			partial, full := bm.Counts()
			t.Logf("%d partial and %d full of %d blocks (per mask head); %d sequences evaluated", partial, full, bm.Blocks(), bm.EvaluatedSequences())
			if c.skips && c.expr != "head_window" && partial+full >= bm.Blocks() {
				t.Errorf("the block mask skips nothing: %d partial + %d full of %d", partial, full, bm.Blocks())
			}
			if c.evaluated != (bm.EvaluatedSequences() > 0) {
				t.Errorf("%d sequences listed all-partial", bm.EvaluatedSequences())
			}
			if c.expr == "none" && partial != 0 {
				t.Errorf("no mask: %d partial blocks", partial)
			}
			in.BlockMask = bm
			o, lse, err := fwd.RunCPU(in, heads, kvHeads)
			if err != nil {
				t.Fatal(err)
			}
			ro, rlse := varlenReference(in, heads, kvHeads, d, c.fn)
			maxErr, maxRef := 0.0, 0.0
			for i := range o {
				if math.IsNaN(float64(o[i])) {
					t.Fatalf("O[%d] is NaN", i)
				}
				maxErr = math.Max(maxErr, math.Abs(float64(o[i])-ro[i]))
				maxRef = math.Max(maxRef, math.Abs(ro[i]))
			}
			if maxErr > 1e-5*maxRef {
				t.Errorf("O: max error %.3g, relative %.3g", maxErr, maxErr/maxRef)
			}
			empty := 0
			for r, want := range rlse {
				got := float64(lse[r])
				if math.IsInf(want, -1) {
					empty++
					if !math.IsInf(got, -1) {
						t.Fatalf("LSE[%d] = %v, want -inf (row keeps nothing)", r, got)
					}
					tok, h := r%tq, r/tq
					for x := range d {
						if o[(tok*heads+h)*d+x] != 0 {
							t.Fatalf("row %d keeps nothing, O = %v", r, o[(tok*heads+h)*d+x])
						}
					}
					continue
				}
				if math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
					t.Fatalf("LSE[%d] = %v, reference %v", r, got, want)
				}
			}
			if empty == 0 {
				t.Error("no empty rows (the sequence with no keys should give some)")
			}
		})
	}
}

// TestVarlenBlockMaskReuse: a block mask serves the calls it was built
// for and is refused by others (cu_seqlens, heads, run-time parameters,
// another mask's kernel); the result with it equals the one built per
// call.
func TestVarlenBlockMaskReuse(t *testing.T) {
	const heads, d = 2, 16
	src := map[string]string{"varlen_mods.fa": varlenMods}
	fwd, err := fac.CompileForwardVarlen(fac.Options{Mask: "tail_window", Sources: src}, d)
	if err != nil {
		t.Fatal(err)
	}
	other, err := fac.CompileForwardVarlen(fac.Options{Mask: "causal"}, d)
	if err != nil {
		t.Fatal(err)
	}
	cq, ck := cumsum([]int{100, 0, 200}), cumsum([]int{150, 3, 180})
	rng := rand.New(rand.NewPCG(2, 2))
	randn := normals(rng)
	in := fac.VarlenInputs{Q: randn(300 * heads * d), K: randn(333 * heads * d), V: randn(333 * heads * d), CuSeqlensQ: cq, CuSeqlensK: ck,
		Scalars: map[string]any{"w": 64}}
	o1, _, err := fwd.RunCPU(in, heads, heads)
	if err != nil {
		t.Fatal(err)
	}
	bm, err := fwd.BlockMask(in, heads)
	if err != nil {
		t.Fatal(err)
	}
	in.BlockMask = bm
	o2, _, err := fwd.RunCPU(in, heads, heads)
	if err != nil {
		t.Fatal(err)
	}
	for i := range o1 {
		if o1[i] != o2[i] {
			t.Fatalf("O[%d] = %v with the reused block mask, %v built per call", i, o2[i], o1[i])
		}
	}
	for name, bad := range map[string]func(fac.VarlenInputs) (fac.VarlenInputs, int, *fac.ForwardVarlen){
		"cu_seqlens": func(x fac.VarlenInputs) (fac.VarlenInputs, int, *fac.ForwardVarlen) {
			x.CuSeqlensK = cumsum([]int{150, 4, 179})
			return x, heads, fwd
		},
		"heads": func(x fac.VarlenInputs) (fac.VarlenInputs, int, *fac.ForwardVarlen) {
			x.Q, x.K, x.V = x.Q[:300*d], x.K[:333*d], x.V[:333*d]
			return x, 1, fwd
		},
		"params": func(x fac.VarlenInputs) (fac.VarlenInputs, int, *fac.ForwardVarlen) {
			x.Scalars = map[string]any{"w": 65}
			return x, heads, fwd
		},
		"mask": func(x fac.VarlenInputs) (fac.VarlenInputs, int, *fac.ForwardVarlen) {
			x.Scalars = nil
			return x, heads, other
		},
	} {
		x, h, f := bad(in)
		if _, _, err := f.RunCPU(x, h, h); err == nil {
			t.Errorf("%s: a block mask built for another call was accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestVarlenBlockSizes: SPARSE_Q × SPARSE_K other than the default, and
// tiles smaller than the blocks, give the same attention.
func TestVarlenBlockSizes(t *testing.T) {
	const heads, d = 2, 16
	lens := []int{130, 0, 64, 257, 1}
	cq := cumsum(lens)
	tot := int(cq[len(cq)-1])
	rng := rand.New(rand.NewPCG(4, 4))
	randn := normals(rng)
	in := fac.VarlenInputs{Q: randn(tot * heads * d), K: randn(tot * heads * d), V: randn(tot * heads * d), CuSeqlensQ: cq, CuSeqlensK: cq}
	ro, _ := varlenReference(in, heads, heads, d, varlenMaskFn("causal"))
	for _, consts := range []map[string]string{
		{"SPARSE_Q": "64", "SPARSE_K": "64"},
		{"SPARSE_Q": "256", "SPARSE_K": "128", "BLOCK_M": "32", "BLOCK_N": "32"},
		{"SPARSE_Q": "64", "SPARSE_K": "256", "BLOCK_N": "128"},
	} {
		fwd, err := fac.CompileForwardVarlen(fac.Options{Mask: "causal", Consts: consts}, d)
		if err != nil {
			t.Fatal(err)
		}
		o, _, err := fwd.RunCPU(in, heads, heads)
		if err != nil {
			t.Fatalf("%v: %v", consts, err)
		}
		maxErr := 0.0
		for i := range o {
			maxErr = math.Max(maxErr, math.Abs(float64(o[i])-ro[i]))
		}
		if maxErr > 1e-5 {
			t.Errorf("%v: max error %.3g", consts, maxErr)
		}
	}
	bad, err := fac.CompileForwardVarlen(fac.Options{Mask: "causal", Consts: map[string]string{"SPARSE_Q": "32"}}, d)
	if err == nil {
		_, _, err = bad.RunCPU(in, heads, heads)
	}
	if err == nil {
		t.Error("SPARSE_Q = 32 < BLOCK_M = 64 accepted")
	}
}

// varlenMaskFn is the Go mask of a stdlib mask expression.
func varlenMaskFn(expr string) goMask {
	for _, m := range masks {
		if m.expr == expr {
			return m.fn
		}
	}
	panic(fmt.Sprintf("no Go mask %s", expr))
}

// TestVarlenPackedLoads runs flash_fwd_varlen with packed_loads (its tiles
// read past a sequence's end into the next one, as its TMA copies do) on
// the CPU device: for every varlen case the outputs are bit for bit those
// of packed_loads=false (a key past the sequence scores -inf, so its
// probability is exactly 0; a row past it is never stored), on lengths
// where tiles run into a neighbour both ways (Q and K), and within 1e-5 of
// the float64 reference.
func TestVarlenPackedLoads(t *testing.T) {
	const heads, kvHeads, d = 2, 1, 16
	lensQ := []int{1, 0, 7, 100, 129, 0, 300, 65, 64}
	lensK := []int{1, 5, 7, 130, 127, 0, 257, 64, 200}
	cq, ck := cumsum(lensQ), cumsum(lensK)
	tq, tk := int(cq[len(cq)-1]), int(ck[len(ck)-1])
	rng := rand.New(rand.NewPCG(27, 1))
	randn := normals(rng)
	q, k, v := randn(tq*heads*d), randn(tk*kvHeads*d), randn(tk*kvHeads*d)
	for _, c := range varlenSparseCases {
		t.Run(c.expr, func(t *testing.T) {
			run := func(consts map[string]string) (o, lse []float32, in fac.VarlenInputs) {
				fwd, err := fac.CompileForwardVarlen(fac.Options{Mask: c.expr, Consts: consts, Sources: map[string]string{"varlen_mods.fa": varlenMods}}, d)
				if err != nil {
					t.Fatal(err)
				}
				in = fac.VarlenInputs{Q: q, K: k, V: v, CuSeqlensQ: cq, CuSeqlensK: ck, Scalars: c.scalars}
				if len(fwd.AuxTensors()) > 0 {
					in.Aux = map[string]any{"doc": varlenDoc(300)}
				}
				o, lse, err = fwd.RunCPU(in, heads, kvHeads)
				if err != nil {
					t.Fatal(err)
				}
				return o, lse, in
			}
			// 64×64 tiles (the CPU device's defaults) over 128-wide mask blocks.
			o0, lse0, _ := run(varlenUnpacked)
			o1, lse1, in := run(map[string]string{"packed_loads": "true"})
			for i := range o0 {
				if math.Float32bits(o0[i]) != math.Float32bits(o1[i]) {
					t.Fatalf("O[%d] = %v with packed_loads, %v without", i, o1[i], o0[i])
				}
			}
			for i := range lse0 {
				if math.Float32bits(lse0[i]) != math.Float32bits(lse1[i]) {
					t.Fatalf("LSE[%d] = %v with packed_loads, %v without", i, lse1[i], lse0[i])
				}
			}
			ro, _ := varlenReference(in, heads, kvHeads, d, c.fn)
			maxErr, maxRef := 0.0, 0.0
			for i := range o1 {
				maxErr = math.Max(maxErr, math.Abs(float64(o1[i])-ro[i]))
				maxRef = math.Max(maxRef, math.Abs(ro[i]))
			}
			if maxErr > 1e-5*maxRef {
				t.Errorf("O: max error %.3g, relative %.3g", maxErr, maxErr/maxRef)
			}
		})
	}
}
