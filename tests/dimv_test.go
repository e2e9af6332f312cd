package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/compiler"
)

// dimPairs are (D, Dv) pairs, Q's and K's head dim beside V's and O's: V
// narrower and wider than Q, odd sizes, and DeepSeek's (192, 128). Any pair
// runs on the CPU device and the GPU (pad-dims computes a dim that is not
// a power of two in the next one).
var dimPairs = [][2]int{{40, 24}, {16, 32}, {24, 8}, {192, 128}}

// gpuDimPairs are the (D, Dv) pairs of the GPU suite (TestGPUDimV): V's
// head dim unlike Q's and K's, and head dims that are not powers of two
// (computed padded: pad-dims), DeepSeek's (192, 128) among them; the test
// bundle holds their kernels (suiteJobs).
var gpuDimPairs = [][2]int{{128, 64}, {64, 32}, {96, 96}, {80, 80}, {192, 128}}

// gpuDimVMods are the masks and scores TestGPUDimV runs at each pair, by
// index into masks and scores: none, causal + softcap, sliding window,
// document (an aux tensor) + ALiBi (an aux gradient).
var gpuDimVMods = []struct{ mask, score int }{{0, 0}, {1, 1}, {3, 0}, {5, 2}}

// dimVShape is a problem with V's head dim dv beside Q's and K's d.
func dimVShape(b, h, hkv, sq, sk, d, dv int) fac.Shape {
	return fac.Shape{Batch: b, Heads: h, KVHeads: hkv, SeqQ: sq, SeqK: sk, Dim: d, DimV: dv}
}

// TestDimVForwardMatchesNaive: flash_fwd with HEAD_DIM_V ≠ HEAD_DIM on
// the CPU device against the float64 reference, for every (D, Dv) of
// dimPairs × masks (rows that keep nothing included) × scores, with GQA and
// unaligned lengths, and random pairs of a seeded property run: O is
// [B, H, Sq, Dv].
func TestDimVForwardMatchesNaive(t *testing.T) {
	type fcase struct {
		d, dv, mi, si int
		sl            [2]int
		hkv           int
	}
	var cases []fcase
	for pi, p := range dimPairs {
		for mi, m := range masks {
			switch m.expr {
			case "none", "causal_bottom_right", "sliding_window(20, 3)", "document":
			default:
				continue
			}
			for si := range scores {
				sl := seqlens[(pi+mi+si)%len(seqlens)]
				if p[0] == 192 {
					sl = [2]int{37, 70} // a few tiles: the reference is O(Sq·Sk·D)
				}
				cases = append(cases, fcase{p[0], p[1], mi, si, sl, 1 + (mi+si)%2})
			}
		}
	}
	// The property run: random pairs, lengths, masks and scores.
	rng := rand.New(rand.NewPCG(44, 2))
	for range 12 {
		cases = append(cases, fcase{1 + rng.IntN(64), 1 + rng.IntN(64), rng.IntN(len(masks)), rng.IntN(len(scores)),
			[2]int{1 + rng.IntN(130), 1 + rng.IntN(130)}, 1 + rng.IntN(2)})
	}
	empty := 0
	for ci, c := range cases {
		m, s := masks[c.mi], scores[c.si]
		fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, Score: s.expr, DimV: c.dv}, c.d)
		if err != nil {
			t.Fatalf("compile %s/%s D=%d Dv=%d: %v", m.expr, s.expr, c.d, c.dv, err)
		}
		sh := dimVShape(2, 4, 4/(c.hkv*c.hkv), c.sl[0], c.sl[1], c.d, c.dv)
		in := inputs(sh, uint64(ci))
		o, lse, err := fwd.RunCPU(only(fwd, in), sh)
		if err != nil {
			t.Fatalf("run %s/%s D=%d Dv=%d %v: %v", m.expr, s.expr, c.d, c.dv, c.sl, err)
		}
		if want := sh.Batch * sh.Heads * sh.SeqQ * c.dv; len(o) != want {
			t.Fatalf("O has %d elements, want B·H·Sq·Dv = %d", len(o), want)
		}
		ro, rlse := goReference(in, sh, m.fn, s.fn)
		empty += check(t, fmt.Sprintf("%s/%s/D=%d,Dv=%d/Sq=%d,Sk=%d", m.expr, s.expr, c.d, c.dv, c.sl[0], c.sl[1]), o, lse, ro, rlse, sh, 1e-5)
	}
	if empty == 0 {
		t.Error("no configuration had fully masked rows")
	}
}

// TestDimVBackwardMatchesReference: the backward kernels with HEAD_DIM_V ≠
// HEAD_DIM on the CPU device against the float64 gradients (whose own
// correctness with DV ≠ D reference.TestAttentionGradFiniteDifferences
// checks by finite differences): dQ [B, H, Sq, D], dK [B, Hkv, Sk, D],
// dV [B, Hkv, Sk, Dv], for masks × scores (ALiBi's slope gradient too),
// GQA, the DETERMINISTIC mode (flash_bwd_dq), and DeepSeek's (192, 128).
func TestDimVBackwardMatchesReference(t *testing.T) {
	lens := [][2]int{{7, 7}, {37, 70}, {70, 37}, {1, 40}}
	empty := 0
	for pi, p := range dimPairs {
		for mi, m := range masks {
			switch m.expr {
			case "causal", "causal_bottom_right", "document":
			default:
				continue
			}
			for si, s := range scores {
				if p[0] == 192 && si > 0 {
					continue
				}
				for _, det := range []bool{false, true} {
					if det && s.expr == "alibi" {
						continue // aux gradients need atomics
					}
					opts := fac.Options{Mask: m.expr, Score: s.expr, DimV: p[1]}
					fwd, err := fac.CompileForward(opts, p[0])
					if err != nil {
						t.Fatal(err)
					}
					if det {
						opts.Consts = map[string]string{"DETERMINISTIC": "true"}
					}
					bwd, err := fac.CompileBackward(opts, p[0])
					if err != nil {
						t.Fatalf("compile backward %s/%s D=%d Dv=%d: %v", m.expr, s.expr, p[0], p[1], err)
					}
					sl := lens[(pi+mi+si)%len(lens)]
					sh := dimVShape(2, 4, 2, sl[0], sl[1], p[0], p[1])
					in := only(fwd, inputs(sh, uint64(pi*100+mi*10+si)))
					c := gradCase{name: fmt.Sprintf("%s/%s/D=%d,Dv=%d/det=%v/Sq=%d,Sk=%d", m.expr, s.expr, p[0], p[1], det, sl[0], sl[1]),
						fwd: fwd, bwd: bwd, sh: sh, in: in, tol: 1e-5, auxTol: 1e-3}
					if m.fn != nil {
						c.mask = m.fn(sh, in.Aux)
					}
					if s.fn != nil {
						c.score = s.fn(sh, in.Aux)
						c.deriv = derivs[s.expr](sh, in.Aux)
					}
					n, g := c.run(t, uint64(pi+mi+si))
					empty += n
					if len(g.DQ) != len(in.Q) || len(g.DK) != len(in.K) || len(g.DV) != len(in.V) {
						t.Fatalf("%s: gradients have %d, %d, %d elements; Q, K, V %d, %d, %d", c.name, len(g.DQ), len(g.DK), len(g.DV), len(in.Q), len(in.K), len(in.V))
					}
				}
			}
		}
	}
	if empty == 0 {
		t.Error("no configuration had fully masked rows")
	}
}

// TestDimVDecode: split-KV (flash_fwd_splitkv, then flash_fwd_combine,
// both with HEAD_DIM_V) and PackGQA with V's head dim unlike Q's, on the
// CPU device against the float64 reference and against flash_fwd alone.
func TestDimVDecode(t *testing.T) {
	for _, p := range [][2]int{{40, 24}, {16, 64}, {192, 128}} {
		for ci, c := range decodeCases {
			if c.mask != "causal_bottom_right" && c.mask != "head_lookback" && c.mask != "odd_rows" {
				continue
			}
			for _, sq := range []int{1, 7} {
				sh := dimVShape(2, 8, 2, sq, 300, p[0], p[1])
				opts := fac.Options{Mask: c.mask, Score: c.score, Sources: map[string]string{"decode.fa": decodeSrc}, DimV: p[1],
					NumSplits: 3, PackGQA: fac.PackGQAOn}
				fwd, err := fac.CompileForward(opts, p[0])
				if err != nil {
					t.Fatal(err)
				}
				plan, err := fwd.Plan(sh, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !plan.SplitKV || plan.NumSplits != 3 || plan.Pack != 4 {
					t.Fatalf("plan %v, want 3 splits and 4 heads a tile", plan)
				}
				in := decodeInputs(c, sh, uint64(ci+sq))
				o, lse, err := fwd.RunCPU(in, sh)
				if err != nil {
					t.Fatalf("%s D=%d Dv=%d: %v", c.mask, p[0], p[1], err)
				}
				ro, rlse := goReference(in, sh, c.fn, c.sfn)
				name := fmt.Sprintf("%s/D=%d,Dv=%d/Sq=%d/%v", c.mask, p[0], p[1], sq, plan)
				check(t, name, o, lse, ro, rlse, sh, 1e-5)
				opts.NumSplits, opts.PackGQA = 1, fac.PackGQAOff
				alone, err := fac.CompileForward(opts, p[0])
				if err != nil {
					t.Fatal(err)
				}
				o1, lse1, err := alone.RunCPU(in, sh)
				if err != nil {
					t.Fatal(err)
				}
				check(t, name+"/flash_fwd", o1, lse1, ro, rlse, sh, 1e-5)
			}
		}
	}
}

// TestDimVSinks: flash_fwd_sinks and the backward with sinks
// (flash_bwd_sinks, whose dsinks reads Δ = rowsum(dO∘O) over V's head dim)
// with HEAD_DIM_V ≠ HEAD_DIM against the float64 reference with sinks.
func TestDimVSinks(t *testing.T) {
	for pi, p := range dimPairs {
		for mi, m := range masks {
			if m.expr != "causal_bottom_right" && m.expr != "sliding_window(20, 3)" {
				continue
			}
			fwd, bwd := mustCompile(t, fac.Options{Mask: m.expr, Sinks: true, DimV: p[1]}, p[0])
			for li, sl := range [][2]int{{37, 70}, {70, 37}} {
				sh := dimVShape(2, 4, 2, sl[0], sl[1], p[0], p[1])
				seed := uint64(pi*100 + mi*10 + li)
				name := fmt.Sprintf("%s/D=%d,Dv=%d/Sq=%d,Sk=%d", m.expr, p[0], p[1], sl[0], sl[1])
				in := only(fwd, inputs(sh, seed))
				in.Sinks = sinkValues(sh.Heads, seed)
				o, lse, err := fwd.RunCPU(in, sh)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				ro, rlse := sinksReference(in, sh, m.fn)
				for r, x := range rlse {
					if math.Abs(float64(lse[r])-x) > 1e-5*math.Max(1, math.Abs(x)) {
						t.Fatalf("%s: LSE[%d] = %v, reference %v", name, r, lse[r], x)
					}
				}
				checkFlat(t, name, o, lse, ro, rlse, 1e-5)
				sinksGradCase(t, fwd, bwd, sh, m.fn, seed, name, 1e-5, nil)
			}
		}
	}
}

// TestDimVVarlen: flash_fwd_varlen and the varlen backward with
// HEAD_DIM_V ≠ HEAD_DIM on packed sequences (empty and one-token ones, q
// shorter and longer than k, GQA) against the float64 reference of each
// sequence; a V of the wrong head dim is refused with the shapes wanted.
func TestDimVVarlen(t *testing.T) {
	lensQ := []int{5, 0, 1, 70, 40, 3}
	lensK := []int{5, 4, 1, 33, 90, 0}
	cuQ, cuK := cumsum(lensQ), cumsum(lensK)
	totalQ, totalK := int(cuQ[len(cuQ)-1]), int(cuK[len(cuK)-1])
	const h, hkv = 4, 2
	for pi, p := range dimPairs {
		for mi, m := range masks {
			if m.expr != "causal_bottom_right" && m.expr != "sliding_window(20, 3)" {
				continue
			}
			d, dv := p[0], p[1]
			fwd, bwd := mustCompileVarlen(t, fac.Options{Mask: m.expr, DimV: dv}, d)
			rng := rand.New(rand.NewPCG(uint64(pi), uint64(mi)))
			randn := normals(rng)
			in := fac.VarlenInputs{Q: randn(totalQ * h * d), K: randn(totalK * hkv * d), V: randn(totalK * hkv * dv), CuSeqlensQ: cuQ, CuSeqlensK: cuK}
			o, lse, err := fwd.RunCPU(in, h, hkv)
			if err != nil {
				t.Fatalf("%s D=%d Dv=%d: %v", m.expr, d, dv, err)
			}
			do := randn(len(o))
			ro, rlse, rg := varlenReferenceGrads(in, do, h, hkv, d, dv, m.fn)
			name := fmt.Sprintf("varlen %s/D=%d,Dv=%d", m.expr, d, dv)
			checkFlat(t, name, o, lse, ro, rlse, 1e-5)
			g, err := bwd.RunCPU(fac.VarlenBackwardInputs{VarlenInputs: in, O: o, LSE: lse, DO: do}, h, hkv)
			if err != nil {
				t.Fatalf("%s: backward: %v", name, err)
			}
			floor := maxAbs(rg.DV)
			compareGrad(t, name+" dQ", g.DQ, rg.DQ, floor, 1e-5)
			compareGrad(t, name+" dK", g.DK, rg.DK, floor, 1e-5)
			compareGrad(t, name+" dV", g.DV, rg.DV, 0, 1e-5)
			// V with Q's head dim is another tensor than the kernel's.
			bad := in
			bad.V = randn(totalK * hkv * d)
			if _, _, err := fwd.RunCPU(bad, h, hkv); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("[total_k, %d, %d]", hkv, dv)) {
				t.Errorf("%s: V of head dim %d: err = %v", name, d, err)
			}
		}
	}
}

// TestDimVBlockMask: one block mask, built by the forward or given,
// serves the forward and the backward of a pair (block masks know no head
// dim), with the same results as a mask built per call.
func TestDimVBlockMask(t *testing.T) {
	opts := fac.Options{Mask: "sliding_window(20, 3)", DimV: 24}
	fwd := mustForward(t, opts, 40)
	bwd, err := fac.CompileBackward(opts, 40)
	if err != nil {
		t.Fatal(err)
	}
	sh := dimVShape(2, 4, 2, 150, 170, 40, 24)
	in := inputs(sh, 3)
	in.Aux = nil
	o, lse, err := fwd.RunCPU(in, sh)
	if err != nil {
		t.Fatal(err)
	}
	bm, _, err := fwd.BuildBlockMask(sh, nil)
	if err != nil {
		t.Fatal(err)
	}
	given := in
	given.BlockMask = bm
	o2, lse2, err := fwd.RunCPU(given, sh)
	if err != nil {
		t.Fatal(err)
	}
	for i := range o {
		if o[i] != o2[i] {
			t.Fatalf("O[%d] = %v with the block mask given, %v built", i, o2[i], o[i])
		}
	}
	do := normals(rand.New(rand.NewPCG(3, 3)))(len(o))
	bin := fac.BackwardInputs{Q: in.Q, K: in.K, V: in.V, O: o, LSE: lse, DO: do}
	g, err := bwd.RunCPUGrads(t.Context(), bin, sh)
	if err != nil {
		t.Fatal(err)
	}
	bin.O, bin.LSE, bin.BlockMask = o2, lse2, bm
	g2, err := bwd.RunCPUGrads(t.Context(), bin, sh)
	if err != nil {
		t.Fatal(err)
	}
	for i := range g.DV {
		if g.DV[i] != g2.DV[i] {
			t.Fatalf("dV[%d] = %v with the block mask given, %v built", i, g2.DV[i], g.DV[i])
		}
	}
}

// TestDimVDefaultsAndErrors: DimV 0, DimV = dim and Consts HEAD_DIM_V = dim
// compile the same kernel (one identity); another DimV is another kernel,
// named by HEAD_DIM_V; a call whose Shape.DimV is not the kernel's is told
// so; contradicting settings and out-of-range values are refused.
func TestDimVDefaultsAndErrors(t *testing.T) {
	ident := func(opts fac.Options, d int) string {
		t.Helper()
		f, err := fac.CompileForward(opts, d)
		if err != nil {
			t.Fatal(err)
		}
		return compiler.Identity(f.Result(), "sm_80", nil).PortableKey()
	}
	base := ident(fac.Options{Mask: "causal"}, 32)
	for _, o := range []fac.Options{{Mask: "causal", DimV: 32}, {Mask: "causal", Consts: map[string]string{"HEAD_DIM_V": "32"}}} {
		if got := ident(o, 32); got != base {
			t.Errorf("%+v: identity %s, want the default's %s", o, got, base)
		}
	}
	if ident(fac.Options{Mask: "causal", DimV: 16}, 32) == base {
		t.Error("DimV 16 has the identity of DimV 32")
	}
	f, err := fac.CompileForward(fac.Options{Mask: "causal", DimV: 16}, 32)
	if err != nil {
		t.Fatal(err)
	}
	if id := f.Result().Ident; id.Consts["HEAD_DIM_V"] != "16" || id.Consts["HEAD_DIM"] != "32" {
		t.Errorf("identity consts %v, want HEAD_DIM 32, HEAD_DIM_V 16", id.Consts)
	}
	if id := compiler.Identity(mustForward(t, fac.Options{}, 32).Result(), "sm_80", nil); id.Consts["HEAD_DIM_V"] != "32" {
		t.Errorf("a default HEAD_DIM_V is named in the identity by its value: consts %v", id.Consts)
	}
	// A call that leaves Shape.DimV at 0 for a kernel compiled with DimV.
	sh := fac.Shape{Batch: 1, Heads: 2, KVHeads: 2, SeqQ: 9, SeqK: 9, Dim: 32}
	in := inputs(dimVShape(1, 2, 2, 9, 9, 32, 16), 1)
	if _, _, err := f.RunCPU(in, sh); err == nil || !strings.Contains(err.Error(), "value head dim 32") || !strings.Contains(err.Error(), "compiled for 16") {
		t.Errorf("Shape.DimV 0 against a DimV 16 kernel: err = %v", err)
	}
	for _, c := range []struct {
		opts fac.Options
		want string
	}{
		{fac.Options{DimV: 16, Consts: map[string]string{"HEAD_DIM_V": "8"}}, "HEAD_DIM_V=8 contradicts Options.DimV 16"},
		{fac.Options{DimV: 512}, "unsupported value head dim 512"},
		{fac.Options{DimV: -1}, "unsupported value head dim -1"},
		{fac.Options{Consts: map[string]string{"HEAD_DIM_V": "x"}}, "HEAD_DIM_V=x"},
	} {
		if _, err := fac.CompileForward(c.opts, 32); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want %q", c.opts, err, c.want)
		}
		if _, err := fac.CompileBackward(c.opts, 32); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("backward %+v: err = %v, want %q", c.opts, err, c.want)
		}
	}
	if err := dimVShape(1, 1, 1, 1, 1, 8, -2).Validate(); err == nil || !strings.Contains(err.Error(), "value head dim must be positive") {
		t.Errorf("Shape.DimV -2: %v", err)
	}
}

func mustForward(t *testing.T, opts fac.Options, d int) *fac.Forward {
	t.Helper()
	f, err := fac.CompileForward(opts, d)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestDimVTunedSets: the tuned sets were measured with V's head dim equal
// to Q's: a pair they were not measured for keeps the kernels' defaults
// (64×64 tiles, no producer warpgroup) on sm_90a, while DimV equal to the
// head dim is the plain request and takes the set.
func TestDimVTunedSets(t *testing.T) {
	target := codegen.TargetConfig{Arch: "sm_90a"}
	for _, c := range []struct {
		dimV   int
		blockM string
	}{{0, "128"}, {128, "128"}, {64, "64"}} {
		f := mustForward(t, fac.Options{Mask: "causal", DType: "bf16", DimV: c.dimV, Target: target}, 128)
		if got := f.Result().Ident.Consts["BLOCK_M"]; got != c.blockM {
			t.Errorf("forward DimV %d: BLOCK_M %s, want %s", c.dimV, got, c.blockM)
		}
		b, err := fac.CompileBackward(fac.Options{Mask: "causal", DType: "bf16", DimV: c.dimV, Target: target}, 128)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"128": "64", "64": "64"}[c.blockM]
		wantN := map[string]string{"128": "128", "64": "64"}[c.blockM]
		for _, k := range b.Kernels() {
			if k.Kernel == "flash_bwd" && (k.Ident.Consts["BLOCK_M"] != want || k.Ident.Consts["BLOCK_N"] != wantN) {
				t.Errorf("backward DimV %d: flash_bwd tiles %s×%s, want %s×%s", c.dimV, k.Ident.Consts["BLOCK_M"], k.Ident.Consts["BLOCK_N"], want, wantN)
			}
		}
	}
}
