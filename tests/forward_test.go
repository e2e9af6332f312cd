// Package tests holds end-to-end tests: the stock forward kernel, compiled
// with every stdlib mask and score, run on the CPU reference device and
// compared with naive float64 attention whose mods are written here in Go.
package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/passes"
	"github.com/fac-compiler/fac/reference"
	"github.com/fac-compiler/fac/tir"
)

// goMask and goScore are the stdlib mods written independently in Go.
type goMask func(sh fac.Shape, aux map[string]any) reference.MaskFunc
type goScore func(sh fac.Shape, aux map[string]any) reference.ScoreFunc

var masks = []struct {
	expr string
	fn   goMask
}{
	{"none", nil},
	{"causal", func(fac.Shape, map[string]any) reference.MaskFunc {
		return func(b, h, i, j int) bool { return i >= j }
	}},
	{"causal_bottom_right", func(sh fac.Shape, _ map[string]any) reference.MaskFunc {
		return func(b, h, i, j int) bool { return j <= i+sh.SeqK-sh.SeqQ }
	}},
	{"sliding_window(20, 3)", func(fac.Shape, map[string]any) reference.MaskFunc {
		return func(b, h, i, j int) bool { return i-20 <= j && j <= i+3 }
	}},
	{"prefix_lm(40)", func(fac.Shape, map[string]any) reference.MaskFunc {
		return func(b, h, i, j int) bool { return j < 40 || i >= j }
	}},
	{"document", func(_ fac.Shape, aux map[string]any) reference.MaskFunc {
		doc := aux["doc"].([]int32)
		at := func(i int) int32 {
			if i < len(doc) {
				return doc[i]
			}
			return 0
		}
		return func(b, h, i, j int) bool { return at(i) == at(j) }
	}},
	{"chunked(16)", func(fac.Shape, map[string]any) reference.MaskFunc {
		return func(b, h, i, j int) bool { return j/16 <= i/16 }
	}},
}

var scores = []struct {
	expr string
	fn   goScore
}{
	{"identity", nil},
	{"softcap(2.5)", func(fac.Shape, map[string]any) reference.ScoreFunc {
		return func(s float64, b, h, i, j int) float64 { return 2.5 * math.Tanh(s/2.5) }
	}},
	{"alibi", func(_ fac.Shape, aux map[string]any) reference.ScoreFunc {
		sl := aux["slopes"].([]float32)
		return func(s float64, b, h, i, j int) float64 { return s + float64(sl[h])*float64(j-i) }
	}},
}

// seqlens covers 1, tile-unaligned lengths, and seqlen_q != seqlen_k both ways.
var seqlens = [][2]int{{1, 1}, {7, 7}, {64, 64}, {100, 100}, {257, 257},
	{1, 257}, {257, 1}, {7, 100}, {100, 7}, {64, 257}, {257, 100}}

const dim = 32

// normals draws n standard normal float32s from rng per call.
func normals(rng *rand.Rand) func(n int) []float32 {
	return func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
}

func inputs(sh fac.Shape, seed uint64) fac.Inputs {
	rng := rand.New(rand.NewPCG(seed, 7))
	randn := normals(rng)
	nq, nk, nv := sh.Batch*sh.Heads*sh.SeqQ*sh.Dim, sh.Batch*sh.KVHeads*sh.SeqK*sh.Dim, sh.Batch*sh.KVHeads*sh.SeqK*sh.VDim()
	n := max(sh.SeqQ, sh.SeqK)
	doc := make([]int32, n)
	for i := range doc {
		doc[i] = int32(i / 23) // documents of 23 tokens: many tile-crossing boundaries
	}
	slopes := make([]float32, sh.Heads)
	for h := range slopes {
		slopes[h] = float32(math.Exp2(-8 * float64(h+1) / float64(sh.Heads)))
	}
	return fac.Inputs{Q: randn(nq), K: randn(nk), V: randn(nv), Aux: map[string]any{"doc": doc, "slopes": slopes}}
}

// only keeps the aux tensors fwd's mods read: a kernel refuses others.
func only(fwd *fac.Forward, in fac.Inputs) fac.Inputs {
	aux := map[string]any{}
	for _, name := range fwd.AuxTensors() {
		aux[name] = in.Aux[name]
	}
	in.Aux = aux
	return in
}

// check compares a run with the Go reference: relative error, no NaN, and
// rows that keep nothing must be exactly O = 0, LSE = -inf.
func check(t *testing.T, name string, o, lse []float32, ro, rlse []float64, sh fac.Shape, tol float64) (emptyRows int) {
	t.Helper()
	maxErr, maxRef := 0.0, 0.0
	for i := range o {
		if math.IsNaN(float64(o[i])) {
			t.Fatalf("%s: O[%d] is NaN", name, i)
		}
		maxErr = math.Max(maxErr, math.Abs(float64(o[i])-ro[i]))
		maxRef = math.Max(maxRef, math.Abs(ro[i]))
	}
	if maxRef > 0 && maxErr/maxRef > tol {
		t.Errorf("%s: max relative error %.3g > %.g", name, maxErr/maxRef, tol)
	}
	for r := range lse {
		x := float64(lse[r])
		if math.IsNaN(x) {
			t.Fatalf("%s: LSE[%d] is NaN", name, r)
		}
		if math.IsInf(rlse[r], -1) {
			emptyRows++
			if !math.IsInf(x, -1) {
				t.Errorf("%s: row %d keeps nothing, LSE = %v, want -inf", name, r, x)
			}
			for d := 0; d < sh.VDim(); d++ {
				if o[r*sh.VDim()+d] != 0 {
					t.Fatalf("%s: row %d keeps nothing, O[%d] = %v, want 0", name, r, d, o[r*sh.VDim()+d])
				}
			}
			continue
		}
		if e := math.Abs(x - rlse[r]); e > tol*math.Max(1, math.Abs(rlse[r])) {
			t.Errorf("%s: LSE[%d] = %v, reference %v", name, r, x, rlse[r])
		}
	}
	return emptyRows
}

func goReference(in fac.Inputs, sh fac.Shape, m goMask, s goScore) ([]float64, []float64) {
	var mf reference.MaskFunc
	var sf reference.ScoreFunc
	if m != nil {
		mf = m(sh, in.Aux)
	}
	if s != nil {
		sf = s(sh, in.Aux)
	}
	q, k, v := to64(in.Q), to64(in.K), to64(in.V)
	scale := 1 / math.Sqrt(float64(sh.Dim))
	return reference.Attention(q, k, v, refShape(sh), float64(float32(scale)), mf, sf)
}

// refShape is sh as the float64 reference takes it.
func refShape(sh fac.Shape) reference.Shape {
	return reference.Shape{B: sh.Batch, H: sh.Heads, HKV: sh.KV(), Sq: sh.SeqQ, Sk: sh.SeqK, D: sh.Dim, DV: sh.VDim()}
}

func to64(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// TestForwardMatchesNaive is acceptance point 1 of the tile-language issue.
func TestForwardMatchesNaive(t *testing.T) {
	empty := 0
	for mi, m := range masks {
		for si, s := range scores {
			fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, Score: s.expr}, dim)
			if err != nil {
				t.Fatalf("compile %s/%s: %v", m.expr, s.expr, err)
			}
			for li, sl := range seqlens {
				sh := fac.Shape{Batch: 2, Heads: 3, KVHeads: 3, SeqQ: sl[0], SeqK: sl[1], Dim: dim}
				if li%2 == 1 {
					sh.Heads, sh.KVHeads = 4, 2 // grouped-query attention too
				}
				in := inputs(sh, uint64(mi*100+si*10+li))
				o, lse, err := fwd.RunCPU(only(fwd, in), sh)
				if err != nil {
					t.Fatalf("run %s/%s %v: %v", m.expr, s.expr, sl, err)
				}
				ro, rlse := goReference(in, sh, m.fn, s.fn)
				empty += check(t, fmt.Sprintf("%s/%s/Sq=%d,Sk=%d", m.expr, s.expr, sl[0], sl[1]), o, lse, ro, rlse, sh, 1e-5)
			}
		}
	}
	if empty == 0 {
		t.Error("no configuration had fully masked rows; the O = 0 / LSE = -inf path went untested")
	}
}

// TestModsMatchGo checks the interpreter's evaluation of each stdlib mod
// (used by fac's own reference) against the Go definitions above.
func TestModsMatchGo(t *testing.T) {
	sh := fac.Shape{Batch: 1, Heads: 4, KVHeads: 4, SeqQ: 50, SeqK: 70, Dim: dim}
	in := inputs(sh, 99)
	for _, m := range masks {
		for _, s := range scores {
			fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, Score: s.expr}, dim)
			if err != nil {
				t.Fatal(err)
			}
			o1, l1, err := fwd.Reference(in, sh)
			if err != nil {
				t.Fatal(err)
			}
			o2, l2 := goReference(in, sh, m.fn, s.fn)
			for i := range o1 {
				if math.Abs(o1[i]-o2[i]) > 1e-5 {
					t.Fatalf("%s/%s: interpreted mods differ from Go at O[%d]: %v vs %v", m.expr, s.expr, i, o1[i], o2[i])
				}
			}
			for i := range l1 {
				if l1[i] != l2[i] && math.Abs(l1[i]-l2[i]) > 1e-5 {
					t.Fatalf("%s/%s: LSE[%d] %v vs %v", m.expr, s.expr, i, l1[i], l2[i])
				}
			}
		}
	}
}

// upTo returns pass options that stop after the named pass ("" = lowering only).
func upTo(last string) passes.Options {
	o := passes.Options{Disable: map[string]bool{}, VerifyEach: true}
	after := last == ""
	for _, p := range passes.Table {
		if after {
			o.Disable[p.Name] = true
		}
		if p.Name == last {
			after = true
		}
	}
	return o
}

// TestEveryPassKeepsMeaning is acceptance points 2 and 3: the IR after each
// target-independent pass still computes attention, and prints and parses
// back to the same text.
func TestEveryPassKeepsMeaning(t *testing.T) {
	stages := []string{""}
	for _, p := range passes.Table {
		if p.TargetIndependent {
			stages = append(stages, p.Name)
		}
	}
	subsetMasks := []int{0, 2, 3, 5}
	subsetSeq := [][2]int{{100, 7}, {7, 100}, {257, 64}}
	for _, stage := range stages {
		for _, mi := range subsetMasks {
			m := masks[mi]
			for si, s := range scores {
				name := fmt.Sprintf("after %q: %s/%s", stage, m.expr, s.expr)
				fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, Score: s.expr, Passes: upTo(stage)}, dim)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				roundTrip(t, name, fwd.Module())
				for li, sl := range subsetSeq {
					sh := fac.Shape{Batch: 2, Heads: 2, KVHeads: 2, SeqQ: sl[0], SeqK: sl[1], Dim: dim}
					in := inputs(sh, uint64(li+7*si))
					o, lse, err := fwd.RunCPU(only(fwd, in), sh)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					ro, rlse := goReference(in, sh, m.fn, s.fn)
					check(t, fmt.Sprintf("%s Sq=%d Sk=%d", name, sl[0], sl[1]), o, lse, ro, rlse, sh, 1e-5)
					// The mask-free variant, given a block mask where every
					// block is full, equals attention with no mask.
					if full, err := fwd.FullVariant(); err == nil {
						dense, err := fac.CompileForward(fac.Options{Score: s.expr, Passes: upTo(stage)}, dim)
						if err != nil {
							t.Fatal(err)
						}
						fin := in
						if fin.BlockMask, _, err = dense.BuildBlockMask(sh, in.Aux); err != nil {
							t.Fatal(err)
						}
						o, lse, err := full.RunCPU(only(full, fin), sh)
						if err != nil {
							t.Fatalf("%s (full variant): %v", name, err)
						}
						ro, rlse := goReference(in, sh, nil, s.fn)
						check(t, name+" full variant", o, lse, ro, rlse, sh, 1e-5)
					}
				}
			}
		}
	}
}

func roundTrip(t *testing.T, name string, m *tir.Module) {
	t.Helper()
	text := m.String()
	m2, err := tir.Parse("roundtrip.tir", text)
	if err != nil {
		t.Fatalf("%s: printed IR does not parse: %v", name, err)
	}
	if err := tir.Verify(m2); err != nil {
		t.Fatalf("%s: parsed IR does not verify: %v", name, err)
	}
	if text2 := m2.String(); text2 != text {
		t.Fatalf("%s: print → parse → print differs:\n%s\n---\n%s", name, text, text2)
	}
}

// checkFlat compares a run flattened by row (O, LSE) with the float64
// reference: no NaN, max |O - ref| within tol of max |ref|, LSE within
// 1e-2, -inf exactly where the reference has it.
func checkFlat(t *testing.T, name string, o, lse []float32, ro, rlse []float64, tol float64) {
	t.Helper()
	maxErr, maxRef, lseErr := 0.0, 0.0, 0.0
	for i := range o {
		if math.IsNaN(float64(o[i])) {
			t.Errorf("%s: O[%d] is NaN", name, i)
			return
		}
		maxErr = math.Max(maxErr, math.Abs(float64(o[i])-ro[i]))
		maxRef = math.Max(maxRef, math.Abs(ro[i]))
	}
	for i := range lse {
		x := float64(lse[i])
		if math.IsNaN(x) {
			t.Errorf("%s: LSE[%d] is NaN", name, i)
			return
		}
		if math.IsInf(rlse[i], -1) || math.IsInf(x, -1) {
			if x != rlse[i] {
				lseErr = math.Inf(1)
			}
			continue
		}
		lseErr = math.Max(lseErr, math.Abs(x-rlse[i]))
	}
	rel := maxErr / math.Max(maxRef, 1e-30)
	t.Logf("%s: rel %.2e, lse %.2e", name, rel, lseErr)
	if rel > tol || lseErr > 1e-2 {
		t.Errorf("%s: max |O-ref|/max|ref| = %.3g (tol %.g), max |LSE-ref| = %.3g", name, rel, tol, lseErr)
	}
}
