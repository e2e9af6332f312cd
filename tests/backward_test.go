package tests

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/reference"
)

// goDeriv is a stdlib score mod's derivative written in Go, for the float64
// reference gradients (independent of fac's differentiation pass).
type goDeriv func(sh fac.Shape, aux map[string]any) reference.ScoreDerivFunc

var derivs = map[string]goDeriv{
	"identity": nil,
	"softcap(2.5)": func(fac.Shape, map[string]any) reference.ScoreDerivFunc {
		return func(s float64, b, h, i, j int, _ func(string, int, float64)) float64 {
			t := math.Tanh(s / 2.5)
			return 1 - t*t
		}
	},
	"alibi": func(fac.Shape, map[string]any) reference.ScoreDerivFunc {
		return func(s float64, b, h, i, j int, aux func(string, int, float64)) float64 {
			aux("slopes", h, float64(j-i))
			return 1
		}
	},
}

// bwdSeqlens are the acceptance lengths: 1, 7, 127, 257 and unequal pairs
// both ways (with Sq > Sk, causal_bottom_right empties whole rows).
var bwdSeqlens = [][2]int{{1, 1}, {7, 7}, {127, 127}, {257, 257}, {7, 127}, {257, 127}, {1, 257}, {127, 7}}

const bwdDim = 16

// gradCase is one backward run checked against the float64 reference.
type gradCase struct {
	name  string
	fwd   *fac.Forward
	bwd   *fac.Backward
	sh    fac.Shape
	in    fac.Inputs
	mask  reference.MaskFunc
	score reference.ScoreFunc
	deriv reference.ScoreDerivFunc
	tol   float64
	// auxTol, when set, is the tolerance of the aux gradients.
	auxTol float64
	// worst, when set, collects the largest relative error per gradient.
	worst map[string]float64
	// round, when set, rounds dO to the kernels' element type.
	round func([]float32) []float32
}

func (c gradCase) note(what string, rel float64) {
	if c.worst != nil {
		c.worst[what] = math.Max(c.worst[what], rel)
	}
}

// run runs the forward (for O and LSE) and the backward on the CPU device
// and compares dQ, dK, dV and the aux gradients with the reference; it
// returns the number of query rows that keep nothing.
func (c gradCase) run(t *testing.T, seed uint64) (emptyRows int, g *fac.Grads) {
	t.Helper()
	sh := c.sh
	o, lse, err := c.fwd.RunCPU(c.in, sh)
	if err != nil {
		t.Fatalf("%s: forward: %v", c.name, err)
	}
	rng := rand.New(rand.NewPCG(seed, 11))
	do := make([]float32, len(o))
	for i := range do {
		do[i] = float32(rng.NormFloat64())
	}
	if c.round != nil {
		do = c.round(do)
	}
	bin := fac.BackwardInputs{Q: c.in.Q, K: c.in.K, V: c.in.V, O: o, LSE: lse, DO: do, Aux: c.in.Aux}
	g, err = c.bwd.RunCPUGrads(t.Context(), bin, sh)
	if err != nil {
		t.Fatalf("%s: backward: %v", c.name, err)
	}
	auxLens := map[string]int{}
	for _, a := range c.bwd.AuxGrads() {
		auxLens[a] = len(g.DAux[a])
	}
	scale := float64(float32(1 / math.Sqrt(float64(sh.Dim))))
	ref := reference.AttentionGrad(to64(c.in.Q), to64(c.in.K), to64(c.in.V), to64(do), refShape(sh), scale, c.mask, c.score, c.deriv, auxLens)
	// dQ and dK vanish by cancellation where a row keeps one key (P = 1
	// makes dS = P∘(dP − Δ) = 0): their errors are measured against at
	// least the scale of dV = Pᵀ·dO, which never cancels.
	floor := maxAbs(ref.DV)
	c.note("dQ", compareGrad(t, c.name+" dQ", g.DQ, ref.DQ, floor, c.tol))
	c.note("dK", compareGrad(t, c.name+" dK", g.DK, ref.DK, floor, c.tol))
	c.note("dV", compareGrad(t, c.name+" dV", g.DV, ref.DV, 0, c.tol))
	for _, a := range slices.Sorted(maps.Keys(auxLens)) {
		tol := c.tol
		if c.auxTol != 0 {
			tol = c.auxTol
		}
		c.note("d"+a, compareGrad(t, c.name+" d"+a, g.DAux[a], ref.DAux[a], 0, tol))
	}
	// A row that keeps nothing (LSE = -inf) gets exactly zero gradient.
	for r, l := range lse {
		if !math.IsInf(float64(l), -1) {
			continue
		}
		emptyRows++
		for d := 0; d < sh.Dim; d++ {
			if x := g.DQ[r*sh.Dim+d]; x != 0 {
				t.Fatalf("%s: row %d keeps nothing, dQ[%d] = %v, want 0", c.name, r, d, x)
			}
		}
	}
	return emptyRows, g
}

// compareGrad checks max |got − ref| ≤ tol · max(max |ref|, floor), and
// no NaN or infinity.
func compareGrad(t *testing.T, name string, got []float32, ref []float64, floor, tol float64) float64 {
	t.Helper()
	if len(got) != len(ref) {
		t.Fatalf("%s: %d elements, reference %d", name, len(got), len(ref))
	}
	maxErr, maxRef := 0.0, 0.0
	for i := range got {
		if math.IsNaN(float64(got[i])) || math.IsInf(float64(got[i]), 0) {
			t.Fatalf("%s[%d] = %v", name, i, got[i])
		}
		maxErr = math.Max(maxErr, math.Abs(float64(got[i])-ref[i]))
		maxRef = math.Max(maxRef, math.Abs(ref[i]))
	}
	maxRef = math.Max(maxRef, floor)
	if maxErr > tol*maxRef {
		t.Errorf("%s: max error %.3g, relative to max |ref| %.3g: %.3g > %.g", name, maxErr, maxRef, maxErr/maxRef, tol)
	}
	if maxRef == 0 {
		return 0
	}
	return maxErr / maxRef
}

// mustCompile compiles the forward and the backward of opts at head dim d,
// or fails the test naming them.
func mustCompile(t *testing.T, opts fac.Options, d int) (*fac.Forward, *fac.Backward) {
	t.Helper()
	return compilePair(t, "", opts, d, fac.CompileForward, fac.CompileBackward)
}

// mustCompileBackwardConsts is mustCompile where opts' Consts are the
// backward's alone: the forward compiles with the mods only.
func mustCompileBackwardConsts(t *testing.T, opts fac.Options, d int) (*fac.Forward, *fac.Backward) {
	t.Helper()
	mods := func(o fac.Options, d int) (*fac.Forward, error) {
		return fac.CompileForward(fac.Options{Mask: o.Mask, Score: o.Score}, d)
	}
	return compilePair(t, "", opts, d, mods, fac.CompileBackward)
}

// mustCompileVarlen is mustCompile for the varlen kernels.
func mustCompileVarlen(t *testing.T, opts fac.Options, d int) (*fac.ForwardVarlen, *fac.BackwardVarlen) {
	t.Helper()
	return compilePair(t, "varlen ", opts, d, fac.CompileForwardVarlen, fac.CompileBackwardVarlen)
}

// compilePair compiles opts at head dim d with fwd, then bwd, or fails the
// test naming the kind ("" or "varlen ") and the options' mods.
func compilePair[F, B any](t *testing.T, kind string, opts fac.Options, d int, fwd func(fac.Options, int) (F, error), bwd func(fac.Options, int) (B, error)) (F, B) {
	t.Helper()
	f, err := fwd(opts, d)
	if err != nil {
		t.Fatalf("compile %sforward %s/%s D=%d: %v", kind, opts.Mask, opts.Score, d, err)
	}
	b, err := bwd(opts, d)
	if err != nil {
		t.Fatalf("compile %sbackward %s/%s D=%d: %v", kind, opts.Mask, opts.Score, d, err)
	}
	return f, b
}

func maxAbs(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = math.Max(m, math.Abs(x))
	}
	return m
}

// TestBackwardMatchesReference is the backward issue's CPU acceptance: dQ,
// dK, dV (and the ALiBi slopes' gradient) for every stdlib mask × score ×
// seqlens, with and without grouped-query heads, within 1e-5 (relative to
// the largest gradient) of the float64 reference, whose own correctness
// reference.TestAttentionGradFiniteDifferences checks.
func TestBackwardMatchesReference(t *testing.T) {
	empty := 0
	worst := map[string]float64{}
	for mi, m := range masks {
		for si, s := range scores {
			fwd, bwd := mustCompile(t, fac.Options{Mask: m.expr, Score: s.expr}, bwdDim)
			for li, sl := range bwdSeqlens {
				sh := fac.Shape{Batch: 1, Heads: 2, KVHeads: 2, SeqQ: sl[0], SeqK: sl[1], Dim: bwdDim}
				if (li+mi+si)%2 == 1 {
					sh.KVHeads = 1 // grouped-query (here multi-query) attention
				}
				seed := uint64(mi*100 + si*10 + li)
				in := inputs(sh, seed)
				c := gradCase{name: fmt.Sprintf("%s/%s/Sq=%d,Sk=%d,Hkv=%d", m.expr, s.expr, sl[0], sl[1], sh.KVHeads),
					fwd: fwd, bwd: bwd, sh: sh, in: only(fwd, in), tol: 1e-5, worst: worst}
				if m.fn != nil {
					c.mask = m.fn(sh, in.Aux)
				}
				if s.fn != nil {
					c.score = s.fn(sh, in.Aux)
					c.deriv = derivs[s.expr](sh, in.Aux)
				}
				if s.expr == "alibi" {
					// dslope = Σ dS_ij·(j − i), where Σ_j dS_ij = 0 in every
					// row: f32 keeps about |i|·ε of the cancelling terms.
					// The learned bias below is held to 1e-5.
					c.auxTol = 1e-3
				}
				n, _ := c.run(t, seed)
				empty += n
			}
		}
	}
	if empty == 0 {
		t.Error("no configuration had fully masked rows; their zero-gradient path went untested")
	}
	t.Logf("largest relative errors: %v; %d fully masked rows", worst, empty)
}

// learnedBias is a user score mod with a learned bias table per head and
// relative distance, through a nonlinearity: its table gets a gradient.
const learnedBias = `
score learned_bias(s, b, h, q_idx, kv_idx, bias: tensor[f32]) {
    let dist = min(abs(q_idx - kv_idx), 127)
    let decay = exp(-f32(dist) / 64.0)
    return 4.0 * tanh(s / 4.0) + bias[h * 128 + dist] * decay + select(kv_idx > q_idx, 0.5 * s, 0.0)
}
`

// TestBackwardLearnedBias checks the gradient of a learned bias table (a
// float aux tensor of a user score mod) and dQ, dK, dV against the
// reference, with GQA, unequal seqlens and a mask that empties rows.
func TestBackwardLearnedBias(t *testing.T) {
	opts := fac.Options{Mask: "causal_bottom_right", Score: "learned_bias", Sources: map[string]string{"bias.fa": learnedBias}}
	fwd, bwd := mustCompile(t, opts, bwdDim)
	if got := bwd.AuxGrads(); !slices.Equal(got, []string{"bias"}) {
		t.Fatalf("AuxGrads = %v, want [bias]", got)
	}
	worst := map[string]float64{}
	for _, sl := range [][2]int{{130, 70}, {7, 127}, {257, 257}} {
		sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: sl[0], SeqK: sl[1], Dim: bwdDim}
		in := inputs(sh, 5)
		rng := rand.New(rand.NewPCG(6, 7))
		bias := make([]float32, sh.Heads*128)
		for i := range bias {
			bias[i] = float32(rng.NormFloat64())
		}
		in.Aux = map[string]any{"bias": bias}
		dist := func(i, j int) int { return min(abs(i-j), 127) }
		c := gradCase{name: fmt.Sprintf("learned_bias/Sq=%d,Sk=%d", sl[0], sl[1]), fwd: fwd, bwd: bwd, sh: sh, in: in, tol: 1e-5, worst: worst,
			mask: func(b, h, i, j int) bool { return j <= i+sh.SeqK-sh.SeqQ },
			score: func(s float64, b, h, i, j int) float64 {
				r := 4*math.Tanh(s/4) + float64(bias[h*128+dist(i, j)])*math.Exp(-float64(dist(i, j))/64)
				if j > i {
					r += 0.5 * s
				}
				return r
			},
			deriv: func(s float64, b, h, i, j int, aux func(string, int, float64)) float64 {
				aux("bias", h*128+dist(i, j), math.Exp(-float64(dist(i, j))/64))
				t := math.Tanh(s / 4)
				d := 1 - t*t
				if j > i {
					d += 0.5
				}
				return d
			}}
		_, g := c.run(t, 9)
		nz := 0
		for _, x := range g.DAux["bias"] {
			if x != 0 {
				nz++
			}
		}
		if nz == 0 {
			t.Errorf("%s: the bias gradient is all zero", c.name)
		}
	}
	t.Logf("largest relative errors: %v", worst)
}

// TestBackwardDeterministic checks the DETERMINISTIC mode (dQ without
// atomics, by flash_bwd_dq): the same results as the reference, the same
// bits on every run, and a clear error when aux gradients (atomics) are
// asked for too.
func TestBackwardDeterministic(t *testing.T) {
	opts := fac.Options{Mask: "sliding_window(20, 3)", Score: "softcap(2.5)", Consts: map[string]string{"DETERMINISTIC": "true"}}
	fwd, err := fac.CompileForward(fac.Options{Mask: opts.Mask, Score: opts.Score}, bwdDim)
	if err != nil {
		t.Fatal(err)
	}
	bwd, err := fac.CompileBackward(opts, bwdDim)
	if err != nil {
		t.Fatal(err)
	}
	if !bwd.Deterministic() || len(bwd.Kernels()) != 3 || bwd.Kernels()[2].Kernel != "flash_bwd_dq" {
		t.Fatalf("deterministic backward runs %d kernels", len(bwd.Kernels()))
	}
	sh := fac.Shape{Batch: 1, Heads: 4, KVHeads: 2, SeqQ: 257, SeqK: 200, Dim: bwdDim}
	in := only(fwd, inputs(sh, 3))
	c := gradCase{name: "deterministic", fwd: fwd, bwd: bwd, sh: sh, in: in, tol: 1e-5,
		mask:  func(b, h, i, j int) bool { return i-20 <= j && j <= i+3 },
		score: func(s float64, b, h, i, j int) float64 { return 2.5 * math.Tanh(s/2.5) },
		deriv: derivs["softcap(2.5)"](sh, nil)}
	_, g1 := c.run(t, 4)
	_, g2 := c.run(t, 4)
	for name, pair := range map[string][2][]float32{"dQ": {g1.DQ, g2.DQ}, "dK": {g1.DK, g2.DK}, "dV": {g1.DV, g2.DV}} {
		for i := range pair[0] {
			if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
				t.Fatalf("%s[%d] differs between runs: %v, %v", name, i, pair[0][i], pair[1][i])
			}
		}
	}
	_, err = fac.CompileBackward(fac.Options{Score: "alibi", Consts: map[string]string{"DETERMINISTIC": "true"}}, bwdDim)
	if err == nil {
		t.Error("deterministic mode with aux gradients compiled")
	}
	if _, err := fac.CompileBackward(fac.Options{Score: "alibi", Consts: map[string]string{"DETERMINISTIC": "true", "AUX_GRAD": "false"}}, bwdDim); err != nil {
		t.Errorf("deterministic without aux gradients: %v", err)
	}
}

// TestBackwardErrors checks that a score mod the compiler cannot
// differentiate is a compile error naming the op, at its source line.
func TestBackwardErrors(t *testing.T) {
	src := "score looped(s, b, h, q_idx, kv_idx) {\n    var x = s\n    for i in range(0, 3) {\n        x = x * s\n    }\n    return x\n}\n"
	_, err := fac.CompileBackward(fac.Options{Score: "looped", Sources: map[string]string{"looped.fa": src}}, bwdDim)
	want := "looped.fa:3:5: grad of score looped"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "cannot differentiate for") {
		t.Fatalf("error %v, want one at %s naming the for", err, want)
	}
	if _, err := fac.CompileBackward(fac.Options{Consts: map[string]string{"BLOCK_Q": "64"}}, bwdDim); err == nil {
		t.Error("an unknown compile-time parameter was accepted")
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestBackwardBF16 runs the bf16 kernels (P and dS rounded to bf16 for the
// products, as on the GPU) against the reference on the same bf16 inputs.
func TestBackwardBF16(t *testing.T) {
	fwd, bwd := mustCompile(t, fac.Options{Mask: "causal", Score: "softcap(2.5)", DType: "bf16"}, bwdDim)
	sh := fac.Shape{Batch: 1, Heads: 4, KVHeads: 2, SeqQ: 127, SeqK: 100, Dim: bwdDim}
	in := only(fwd, inputs(sh, 8))
	bf := func(xs []float32) []float32 { return fac.BF16s(fac.F32sToBF16(xs)) }
	in.Q, in.K, in.V = bf(in.Q), bf(in.K), bf(in.V)
	c := gradCase{name: "bf16", fwd: fwd, bwd: bwd, sh: sh, in: in, tol: 1e-2, round: bf,
		mask:  func(b, h, i, j int) bool { return i >= j },
		score: func(s float64, b, h, i, j int) float64 { return 2.5 * math.Tanh(s/2.5) },
		deriv: derivs["softcap(2.5)"](sh, nil)}
	c.run(t, 12)
}

// TestBackwardTiles runs kernel tiles smaller than the mask blocks (four
// 32-row q tiles and eight 16-key kv tiles per 128×128 block), atomic and
// deterministic, against the reference.
func TestBackwardTiles(t *testing.T) {
	for _, det := range []string{"false", "true"} {
		opts := fac.Options{Mask: "document", Score: "softcap(2.5)", Consts: map[string]string{"BLOCK_M": "32", "BLOCK_N": "16", "DETERMINISTIC": det}}
		fwd, bwd := mustCompileBackwardConsts(t, opts, bwdDim)
		sh := fac.Shape{Batch: 2, Heads: 2, KVHeads: 1, SeqQ: 200, SeqK: 150, Dim: bwdDim}
		in := only(fwd, inputs(sh, 21))
		doc := in.Aux["doc"].([]int32)
		at := func(i int) int32 {
			if i < len(doc) {
				return doc[i]
			}
			return 0
		}
		c := gradCase{name: "tiles/deterministic=" + det, fwd: fwd, bwd: bwd, sh: sh, in: in, tol: 1e-5,
			mask:  func(b, h, i, j int) bool { return at(i) == at(j) },
			score: func(s float64, b, h, i, j int) float64 { return 2.5 * math.Tanh(s/2.5) },
			deriv: derivs["softcap(2.5)"](sh, nil)}
		c.run(t, 22)
	}
}

// TestBackwardReference checks Backward.Reference, whose mods and score
// derivative run on the interpreter (the derivative from the mod's own
// tile IR), against the float64 reference with the derivatives written in
// Go: a stdlib mask and score with an aux gradient (ALiBi's slopes), and
// the learned bias table through a nonlinearity.
func TestBackwardReference(t *testing.T) {
	type refCase struct {
		name string
		opts fac.Options
		sh   fac.Shape
		aux  func(sh fac.Shape, in fac.Inputs) map[string]any
		mask reference.MaskFunc
		sc   func(aux map[string]any) (reference.ScoreFunc, reference.ScoreDerivFunc)
	}
	sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 37, SeqK: 29, Dim: bwdDim}
	cases := []refCase{
		{name: "causal/alibi", opts: fac.Options{Mask: "causal", Score: "alibi"}, sh: sh,
			aux:  func(_ fac.Shape, in fac.Inputs) map[string]any { return map[string]any{"slopes": in.Aux["slopes"]} },
			mask: func(b, h, i, j int) bool { return i >= j },
			sc: func(aux map[string]any) (reference.ScoreFunc, reference.ScoreDerivFunc) {
				return scores[2].fn(sh, aux), derivs["alibi"](sh, aux)
			}},
		{name: "none/softcap", opts: fac.Options{Score: "softcap(2.5)"}, sh: sh,
			aux: func(fac.Shape, fac.Inputs) map[string]any { return map[string]any{} },
			sc: func(aux map[string]any) (reference.ScoreFunc, reference.ScoreDerivFunc) {
				return scores[1].fn(sh, aux), derivs["softcap(2.5)"](sh, aux)
			}},
		{name: "causal_bottom_right/learned_bias", sh: sh,
			opts: fac.Options{Mask: "causal_bottom_right", Score: "learned_bias", Sources: map[string]string{"bias.fa": learnedBias}},
			aux: func(sh fac.Shape, _ fac.Inputs) map[string]any {
				rng := rand.New(rand.NewPCG(6, 7))
				bias := make([]float32, sh.Heads*128)
				for i := range bias {
					bias[i] = float32(rng.NormFloat64())
				}
				return map[string]any{"bias": bias}
			},
			mask: func(b, h, i, j int) bool { return j <= i+sh.SeqK-sh.SeqQ },
			sc: func(aux map[string]any) (reference.ScoreFunc, reference.ScoreDerivFunc) {
				bias := aux["bias"].([]float32)
				dist := func(i, j int) int { return min(abs(i-j), 127) }
				return func(s float64, b, h, i, j int) float64 {
						r := 4*math.Tanh(s/4) + float64(bias[h*128+dist(i, j)])*math.Exp(-float64(dist(i, j))/64)
						if j > i {
							r += 0.5 * s
						}
						return r
					}, func(s float64, b, h, i, j int, aux func(string, int, float64)) float64 {
						aux("bias", h*128+dist(i, j), math.Exp(-float64(dist(i, j))/64))
						t := math.Tanh(s / 4)
						d := 1 - t*t
						if j > i {
							d += 0.5
						}
						return d
					}
			}},
	}
	for _, c := range cases {
		bwd, err := fac.CompileBackward(c.opts, bwdDim)
		if err != nil {
			t.Fatal(err)
		}
		in := inputs(c.sh, 31)
		aux := c.aux(c.sh, in)
		rng := rand.New(rand.NewPCG(3, 4))
		do := make([]float32, len(in.Q))
		for i := range do {
			do[i] = float32(rng.NormFloat64())
		}
		got, err := bwd.Reference(fac.BackwardInputs{Q: in.Q, K: in.K, V: in.V, DO: do, Aux: aux}, c.sh)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		score, deriv := c.sc(aux)
		lens := map[string]int{}
		for _, a := range bwd.AuxGrads() {
			lens[a] = len(aux[a].([]float32))
		}
		rsh := reference.Shape{B: c.sh.Batch, H: c.sh.Heads, HKV: c.sh.KV(), Sq: c.sh.SeqQ, Sk: c.sh.SeqK, D: c.sh.Dim}
		scale := float64(float32(1 / math.Sqrt(float64(c.sh.Dim))))
		want := reference.AttentionGrad(to64(in.Q), to64(in.K), to64(in.V), to64(do), rsh, scale, c.mask, score, deriv, lens)
		// The interpreter evaluates the mods in f32.
		for _, p := range []struct {
			name      string
			got, want []float64
		}{{"dQ", got.DQ, want.DQ}, {"dK", got.DK, want.DK}, {"dV", got.DV, want.DV}} {
			compareGrad(t, c.name+" "+p.name, narrow(p.got), p.want, 0, 1e-5)
		}
		for a := range lens {
			if len(got.DAux[a]) != lens[a] {
				t.Fatalf("%s: DAux[%s] has %d elements, want %d", c.name, a, len(got.DAux[a]), lens[a])
			}
			compareGrad(t, c.name+" d"+a, narrow(got.DAux[a]), want.DAux[a], 0, 1e-5)
		}
	}
}

// narrow rounds float64 values to float32, for compareGrad.
func narrow(xs []float64) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = float32(x)
	}
	return out
}

// TestBackwardDQFrag runs the backward with dQ's accumulator in
// dq_accum.fa's tiles (DQ_FRAG) against the reference: 64-query tiles
// (offsets known at compile time), 32-query tiles (half a tile each) and
// the deterministic mode (which keeps no accumulator), with lengths that
// are not multiples of 64 and GQA.
func TestBackwardDQFrag(t *testing.T) {
	for _, c := range []map[string]string{{"BLOCK_M": "64"}, {"BLOCK_M": "32"}, {"DETERMINISTIC": "true"}} {
		c["DQ_FRAG"] = "true"
		causalSoftcapGrads(t, "dq_frag", c, 31)
	}
}

// causalSoftcapGrads checks flash_bwd compiled with consts against the
// float64 gradients, under causal + softcap(2.5), GQA and unequal odd
// lengths (inputs seeded by seed).
func causalSoftcapGrads(t *testing.T, name string, consts map[string]string, seed uint64) {
	t.Helper()
	opts := fac.Options{Mask: "causal", Score: "softcap(2.5)", Consts: consts}
	fwd, bwd := mustCompileBackwardConsts(t, opts, bwdDim)
	sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 157, SeqK: 140, Dim: bwdDim}
	in := only(fwd, inputs(sh, seed))
	gc := gradCase{name: fmt.Sprintf("%s/%v", name, consts), fwd: fwd, bwd: bwd, sh: sh, in: in, tol: 1e-5,
		mask:  func(b, h, i, j int) bool { return i >= j },
		score: func(s float64, b, h, i, j int) float64 { return 2.5 * math.Tanh(s/2.5) },
		deriv: derivs["softcap(2.5)"](sh, nil)}
	gc.run(t, 32)
}

// TestBackwardDQRows: flash_bwd with DQ_ROWS (dQ = dS·K, queries down the
// rows) into the row-major accumulator and into DQ_FRAG's tiles, on the
// default tiles and on 128×128 (D = 64's candidate on two warpgroups).
func TestBackwardDQRows(t *testing.T) {
	for _, c := range []map[string]string{{}, {"DQ_FRAG": "true"}, {"BLOCK_M": "128", "BLOCK_N": "128"}} {
		c["DQ_ROWS"] = "true"
		causalSoftcapGrads(t, "dq_rows", c, 37)
	}
}

// TestBackwardDQFragRefused: the varlen backward, whose main kernel keeps
// dQ's accumulator in rows, refuses DQ_FRAG rather than pair it with a
// tiled postprocess; the sinks backward (flash_bwd, then flash_bwd_sinks,
// which reads no dQ) takes it.
func TestBackwardDQFragRefused(t *testing.T) {
	consts := map[string]string{"DQ_FRAG": "true"}
	if _, err := fac.CompileBackward(fac.Options{Mask: "causal", Sinks: true, Consts: consts}, bwdDim); err != nil {
		t.Errorf("sinks backward with DQ_FRAG: %v", err)
	}
	if _, err := fac.CompileBackwardVarlen(fac.Options{Mask: "causal", Consts: consts}, bwdDim); err == nil || !strings.Contains(err.Error(), "DQ_FRAG") {
		t.Errorf("varlen backward with DQ_FRAG: %v", err)
	}
}
