//go:build gpu

package tests

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/reference"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// TestGPUSinksBackward runs the backward of flash_fwd_sinks on the GPU
// (flash_bwd_preprocess, flash_bwd, flash_bwd_postprocess or flash_bwd_dq,
// flash_bwd_sinks) for causal, sliding window, document and bottom-right
// causal masks × {bf16, f16} × D {64, 128} × odd and unequal lengths, GQA
// groups of 1 and 4, and compares dQ, dK, dV and dsinks with the float64
// gradients of attention with sinks (inputs rounded to the dtype; O and
// LSE from float64 attention with sinks, O rounded as the forward stores
// it), each within 2e-2 (bf16) or 5e-3 (f16) of its max |ref| (dsinks, a
// sum over B·Sq rows, 4× that), no NaN (outputs are poisoned). The
// DETERMINISTIC mode gives the same dsinks (and dQ) bits twice.
func TestGPUSinksBackward(t *testing.T) {
	gpu := openTestGPU(t)
	for _, dtype := range []string{"bf16", "f16"} {
		tol := gpuTol(dtype)
		for _, d := range []int{64, 128} {
			for mi, m := range masks {
				switch m.expr {
				case "causal", "sliding_window(20, 3)", "document", "causal_bottom_right":
				default:
					continue
				}
				bwd, err := fac.CompileBackward(fac.Options{Mask: m.expr, DType: dtype, Sinks: true}, d)
				if err != nil {
					t.Fatal(err)
				}
				for li, sl := range [][2]int{{1, 1}, {127, 127}, {257, 100}, {100, 257}} {
					sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 4, SeqQ: sl[0], SeqK: sl[1], Dim: d}
					if li%2 == 1 {
						sh.KVHeads = 1
					}
					name := fmt.Sprintf("%s/d%d/%s/%dx%d/hkv%d", dtype, d, m.expr, sl[0], sl[1], sh.KVHeads)
					gpuSinksCase(t, gpu, bwd, dtype, sh, m.fn, uint64(100*mi+10*li+d), name, tol)
				}
			}
		}
	}
	bwd, err := fac.CompileBackward(fac.Options{Mask: "causal_bottom_right", DType: "bf16", Sinks: true,
		Consts: map[string]string{"DETERMINISTIC": "true"}}, 64)
	if err != nil {
		t.Fatal(err)
	}
	sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 300, SeqK: 200, Dim: 64}
	a := gpuSinksCase(t, gpu, bwd, "bf16", sh, maskFn("causal_bottom_right"), 3, "deterministic", 2e-2)
	b := gpuSinksCase(t, gpu, bwd, "bf16", sh, maskFn("causal_bottom_right"), 3, "deterministic again", 2e-2)
	for i := range a.DSinks {
		if math.Float32bits(a.DSinks[i]) != math.Float32bits(b.DSinks[i]) {
			t.Errorf("dsinks[%d] differs between runs: %v, %v", i, a.DSinks[i], b.DSinks[i])
		}
	}
	for i := range a.DQ {
		if math.Float32bits(a.DQ[i]) != math.Float32bits(b.DQ[i]) {
			t.Fatalf("deterministic dQ[%d] differs between runs: %v, %v", i, a.DQ[i], b.DQ[i])
		}
	}
}

// gpuSinksCase runs one sinks backward on the GPU and checks it.
func gpuSinksCase(t *testing.T, gpu *fac.CUDA, bwd *fac.Backward, dtype string, sh fac.Shape, m goMask, seed uint64, name string, tol float64) *fac.Grads {
	t.Helper()
	in := roundInputs(onlyBackward(bwd, inputs(sh, seed)), dtype)
	round := func(xs []float32) []float32 { return roundInputs(fac.Inputs{Q: xs, K: xs, V: xs}, dtype).Q }
	sinks := sinkValues(sh.Heads, seed)
	sinks[sh.Heads-1] = 0.5
	rng := rand.New(rand.NewPCG(seed, 17))
	do := make([]float32, sh.Batch*sh.Heads*sh.SeqQ*sh.VDim()) // like O
	for i := range do {
		do[i] = float32(rng.NormFloat64())
	}
	do = round(do)
	var mask reference.MaskFunc
	if m != nil {
		mask = m(sh, in.Aux)
	}
	rsh := refShape(sh)
	scale := float64(float32(1 / math.Sqrt(float64(sh.Dim))))
	q, k, v := to64(in.Q), to64(in.K), to64(in.V)
	ro, rlse := reference.AttentionSinks(q, k, v, rsh, scale, mask, nil, to64(sinks))
	o, lse := make([]float32, len(ro)), make([]float32, len(rlse))
	for i, x := range ro {
		o[i] = float32(x)
	}
	o = round(o)
	for i, x := range rlse {
		lse[i] = float32(x)
	}
	g, err := bwd.RunCUDAGrads(context.Background(), gpu, fac.BackwardInputs{Q: in.Q, K: in.K, V: in.V, O: o, LSE: lse, DO: do,
		Aux: in.Aux, Sinks: sinks}, sh)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ref := reference.AttentionGradSinks(q, k, v, to64(do), rsh, scale, mask, nil, nil, nil, to64(sinks))
	dvScale := maxAbs(ref.DV)
	line := name + ":"
	for _, p := range []struct {
		what  string
		got   []float32
		want  []float64
		floor float64
		tol   float64
	}{{"dQ", g.DQ, ref.DQ, dvScale, tol}, {"dK", g.DK, ref.DK, dvScale, tol}, {"dV", g.DV, ref.DV, 0, tol},
		{"dsinks", g.DSinks, ref.DSinks, 0, 4 * tol}} {
		line += fmt.Sprintf(" %s %.2e", p.what, gpuGradCheck(t, name+" "+p.what, p.got, p.want, p.floor, p.tol))
	}
	t.Log(line)
	return g
}

// TestGPUSinksBackwardLaunch runs Backward.LaunchCUDA with sinks on
// caller-owned, poisoned device buffers (contiguous, bf16) and checks dK,
// dV and dsinks against RunCUDAGrads' bits (neither uses atomics) and dQ
// within f32 rounding.
func TestGPUSinksBackwardLaunch(t *testing.T) {
	gpu := openTestGPU(t)
	sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 200, SeqK: 150, Dim: 64}
	bwd, err := fac.CompileBackward(fac.Options{Mask: "causal", DType: "bf16", Sinks: true}, sh.Dim)
	if err != nil {
		t.Fatal(err)
	}
	in := roundInputs(inputs(sh, 4), "bf16")
	round := func(xs []float32) []float32 { return roundInputs(fac.Inputs{Q: xs, K: xs, V: xs}, "bf16").Q }
	o, do := make([]float32, len(in.Q)), make([]float32, len(in.Q))
	for i := range o {
		o[i], do[i] = in.Q[i]/4, in.Q[len(in.Q)-1-i]
	}
	o = round(o)
	lse := make([]float32, sh.Batch*sh.Heads*sh.SeqQ)
	for i := range lse {
		lse[i] = 2 + float32(i%5)/10
	}
	sinks := []float32{0.5, -1, 2, -30}
	want, err := bwd.RunCUDAGrads(context.Background(), gpu, fac.BackwardInputs{Q: in.Q, K: in.K, V: in.V, O: o, LSE: lse, DO: do, Sinks: sinks}, sh)
	if err != nil {
		t.Fatal(err)
	}
	bf := func(x []float32) []uint16 {
		out := make([]uint16, len(x))
		for i, v := range x {
			out[i] = half.F32ToBF16(v)
		}
		return out
	}
	up := func(x any, bytes int) uintptr {
		p, err := cuda.MemAlloc(bytes)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cuda.MemFree(p) })
		switch x := x.(type) {
		case []uint16:
			err = cuda.HtoD(p, x)
		case []float32:
			err = cuda.HtoD(p, x)
		}
		if err != nil {
			t.Fatal(err)
		}
		return uintptr(p)
	}
	poison16 := func(n int) []uint16 {
		x := make([]uint16, n)
		for i := range x {
			x[i] = 0xffff
		}
		return x
	}
	nq, nk := len(in.Q), len(in.K)
	nan := float32(math.NaN())
	dev := fac.BackwardDeviceTensors{Q: up(bf(in.Q), 2*nq), K: up(bf(in.K), 2*nk), V: up(bf(in.V), 2*nk), O: up(bf(o), 2*nq),
		DO: up(bf(do), 2*nq), LSE: up(lse, 4*len(lse)), Sinks: up(sinks, 16),
		DQ: up(poison16(nq), 2*nq), DK: up(poison16(nk), 2*nk), DV: up(poison16(nk), 2*nk), DSinks: up([]float32{nan, nan, nan, nan}, 16)}
	if err := bwd.LaunchCUDA(gpu, dev, sh, cuda.Stream{}); err != nil {
		t.Fatal(err)
	}
	if err := gpu.Ctx.Synchronize(); err != nil {
		t.Fatal(err)
	}
	read := func(p uintptr, n int) []float32 {
		x := make([]uint16, n)
		if err := cuda.DtoH(x, cuda.DevicePtr(p)); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, n)
		for i, v := range x {
			out[i] = half.BF16ToF32(v)
		}
		return out
	}
	dsinks := make([]float32, 4)
	if err := cuda.DtoH(dsinks, cuda.DevicePtr(dev.DSinks)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		what      string
		got, want []float32
	}{{"dK", read(dev.DK, nk), want.DK}, {"dV", read(dev.DV, nk), want.DV}, {"dsinks", dsinks, want.DSinks}} {
		for i := range p.got {
			if math.Float32bits(p.got[i]) != math.Float32bits(p.want[i]) {
				t.Fatalf("%s[%d] = %v, RunCUDAGrads %v", p.what, i, p.got[i], p.want[i])
			}
		}
	}
	gpuGradCheck(t, "dQ", read(dev.DQ, nq), to64(want.DQ), 0, 1e-2)
	dev.Sinks = 0
	if err := bwd.LaunchCUDA(gpu, dev, sh, cuda.Stream{}); err == nil {
		t.Error("LaunchCUDA without Sinks accepted")
	}
}

// TestGPUVarlenMatchesReference runs the block-sparse varlen forward on
// the GPU (each sequence's own block mask; the tuned schedule, on sm_90a
// loads bounded by the packed tensor, on TMA) for the CPU acceptance's masks
// (causal, sliding window, bottom-right causal, document with aux, user
// masks reading the lengths and a run-time parameter, h, and b) × {bf16,
// f16} × D {64, 128}, lengths 1 to 2048 with empty sequences on either
// side and GQA, against the float64 reference per sequence (inputs
// rounded to the dtype): O within 2e-2 (bf16) or 5e-3 (f16) of max |ref|,
// LSE within 1e-2, no NaN (outputs are poisoned), and rows that keep
// nothing O = 0, LSE = -inf.
func TestGPUVarlenMatchesReference(t *testing.T) {
	gpuVarlenMatchesReference(t, nil)
}

// TestGPUVarlenUnpacked is TestGPUVarlenMatchesReference on the schedule
// whose loads never leave the sequence (varlenUnpacked: cp.async), the
// tuned default's alternative.
func TestGPUVarlenUnpacked(t *testing.T) {
	gpuVarlenMatchesReference(t, varlenUnpacked)
}

// TestGPUVarlenNoProducer is TestGPUVarlenMatchesReference with the
// consumers issuing the packed loads (varlenNoProducer).
func TestGPUVarlenNoProducer(t *testing.T) {
	gpuVarlenMatchesReference(t, varlenNoProducer)
}

func gpuVarlenMatchesReference(t *testing.T, consts map[string]string) {
	gpu := openTestGPU(t)
	lensQ := []int{1, 0, 7, 127, 128, 129, 0, 300, 2048, 33, 0, 1000, 64}
	lensK := []int{1, 5, 7, 127, 128, 129, 0, 257, 2048, 64, 0, 999, 0}
	cq, ck := cumsum(lensQ), cumsum(lensK)
	tq, tk := int(cq[len(cq)-1]), int(ck[len(ck)-1])
	const heads, kvHeads = 4, 2
	doc := varlenDoc(2048)
	for _, dtype := range []string{"bf16", "f16"} {
		tol := gpuTol(dtype)
		for _, d := range []int{64, 128} {
			rng := rand.New(rand.NewPCG(uint64(d), 5))
			randn := normals(rng)
			r := roundInputs(fac.Inputs{Q: randn(tq * heads * d), K: randn(tk * kvHeads * d), V: randn(tk * kvHeads * d)}, dtype)
			for _, c := range varlenSparseCases {
				fwd, err := fac.CompileForwardVarlen(fac.Options{Mask: c.expr, DType: dtype, Consts: consts, Sources: map[string]string{"varlen_mods.fa": varlenMods}}, d)
				if err != nil {
					t.Fatal(err)
				}
				in := fac.VarlenInputs{Q: r.Q, K: r.K, V: r.V, CuSeqlensQ: cq, CuSeqlensK: ck, Scalars: c.scalars}
				if len(fwd.AuxTensors()) > 0 {
					in.Aux = map[string]any{"doc": doc}
				}
				o, lse, err := fwd.RunCUDA(gpu, in, heads, kvHeads)
				if err != nil {
					t.Fatalf("%s %s d%d: %v", dtype, c.expr, d, err)
				}
				ro, rlse := varlenReference(in, heads, kvHeads, d, c.fn)
				name := fmt.Sprintf("varlen %s/d%d/%s", dtype, d, c.expr)
				checkFlat(t, name, o, lse, ro, rlse, tol)
				for row, want := range rlse {
					if !math.IsInf(want, -1) {
						continue
					}
					tok, h := row%tq, row/tq
					for x := range d {
						if got := o[(tok*heads+h)*d+x]; got != 0 {
							t.Fatalf("%s: row %d keeps nothing, O = %v", name, row, got)
						}
					}
				}
			}
		}
	}
}

// TestGPUVarlenLong runs the varlen forward on issue 11's longest varlen
// sequences: 4096 tokens beside empty and one-token sequences, with Sq and
// Sk unequal (4096 × 3000), for causal, sliding window and document
// (its aux tensor 4096 long), bf16, D = 128, GQA 2, on the default
// schedule (packed loads, a producer), on varlenUnpacked and on
// varlenNoProducer, against the float64 reference per sequence.
func TestGPUVarlenLong(t *testing.T) {
	gpu := openTestGPU(t)
	lensQ := []int{4096, 0, 1, 4096, 3000, 0}
	lensK := []int{4096, 7, 1, 3000, 4096, 0}
	cq, ck := cumsum(lensQ), cumsum(lensK)
	tq, tk := int(cq[len(cq)-1]), int(ck[len(ck)-1])
	const heads, kvHeads, d = 4, 2, 128
	rng := rand.New(rand.NewPCG(4096, 5))
	randn := normals(rng)
	r := roundInputs(fac.Inputs{Q: randn(tq * heads * d), K: randn(tk * kvHeads * d), V: randn(tk * kvHeads * d)}, "bf16")
	for _, c := range varlenSparseCases {
		if c.expr != "causal" && c.expr != "sliding_window(200, 0)" && c.expr != "document" {
			continue
		}
		var ro, rlse []float64
		for _, consts := range []map[string]string{nil, varlenUnpacked, varlenNoProducer} {
			fwd, err := fac.CompileForwardVarlen(fac.Options{Mask: c.expr, DType: "bf16", Consts: consts, Sources: map[string]string{"varlen_mods.fa": varlenMods}}, d)
			if err != nil {
				t.Fatal(err)
			}
			in := fac.VarlenInputs{Q: r.Q, K: r.K, V: r.V, CuSeqlensQ: cq, CuSeqlensK: ck, Scalars: c.scalars}
			if len(fwd.AuxTensors()) > 0 {
				in.Aux = map[string]any{"doc": varlenDoc(4096)}
			}
			o, lse, err := fwd.RunCUDA(gpu, in, heads, kvHeads)
			if err != nil {
				t.Fatalf("%s %v: %v", c.expr, consts, err)
			}
			if ro == nil {
				ro, rlse = varlenReference(in, heads, kvHeads, d, c.fn)
			}
			name := fmt.Sprintf("varlen long bf16/d128/%s %v", c.expr, consts)
			checkFlat(t, name, o, lse, ro, rlse, 2e-2)
			t.Logf("%s: checked", name)
		}
	}
}

// TestGPUVarlenBackward runs the varlen backward on the GPU
// (flash_bwd_preprocess, flash_bwd_varlen, flash_bwd_postprocess) for
// causal, document, bottom-right causal and the user masks × {identity,
// alibi} × {bf16, f16} × D {64, 128}, with O and LSE from the GPU forward,
// and compares dQ, dK, dV (and ALiBi's slope gradient, 4× the tolerance)
// with the float64 gradients per sequence of the rounded inputs, within
// 2e-2 (bf16) or 5e-3 (f16) of each gradient's max |ref|, no NaN.
func TestGPUVarlenBackward(t *testing.T) {
	gpu := openTestGPU(t)
	lensQ := []int{1, 0, 7, 127, 129, 0, 300, 1000, 64, 5}
	lensK := []int{1, 5, 7, 127, 128, 0, 257, 999, 0, 90}
	cq, ck := cumsum(lensQ), cumsum(lensK)
	tq, tk := int(cq[len(cq)-1]), int(ck[len(ck)-1])
	const heads, kvHeads = 4, 2
	for _, dtype := range []string{"bf16", "f16"} {
		tol := gpuTol(dtype)
		round := func(xs []float32) []float32 { return roundInputs(fac.Inputs{Q: xs, K: xs, V: xs}, dtype).Q }
		for _, d := range []int{64, 128} {
			for _, c := range varlenSparseCases {
				switch c.expr {
				case "causal", "document", "causal_bottom_right", "tail_window", "head_window", "seq_parity":
				default:
					continue
				}
				for si, s := range scores {
					if s.expr == "softcap(2.5)" {
						continue
					}
					fwd, bwd := mustCompileVarlen(t, fac.Options{Mask: c.expr, Score: s.expr, DType: dtype, Sources: map[string]string{"varlen_mods.fa": varlenMods}}, d)
					rng := rand.New(rand.NewPCG(uint64(d+si), 6))
					draw := normals(rng)
					randn := func(n int) []float32 { return round(draw(n)) }
					in := fac.VarlenInputs{Q: randn(tq * heads * d), K: randn(tk * kvHeads * d), V: randn(tk * kvHeads * d), CuSeqlensQ: cq, CuSeqlensK: ck,
						Scalars: c.scalars, Aux: map[string]any{}}
					all := inputs(fac.Shape{Batch: 1, Heads: heads, KVHeads: kvHeads, SeqQ: 1000, SeqK: 1000, Dim: d}, 1).Aux
					for _, a := range fwd.AuxTensors() {
						in.Aux[a] = all[a]
					}
					if _, ok := in.Aux["doc"]; ok {
						in.Aux["doc"] = varlenDoc(1000)
					}
					name := fmt.Sprintf("varlen bwd %s/d%d/%s/%s", dtype, d, c.expr, s.expr)
					o, lse, err := fwd.RunCUDA(gpu, in, heads, kvHeads)
					if err != nil {
						t.Fatalf("%s: forward: %v", name, err)
					}
					do := randn(len(o))
					bin := fac.VarlenBackwardInputs{VarlenInputs: in, O: o, LSE: lse, DO: do}
					g, err := bwd.RunCUDAGrads(context.Background(), gpu, bin, heads, kvHeads)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if c.expr == "causal" && si == 0 {
						// fac bench --varlen-len --backward's timing, on the same call.
						ms, err := bwd.BenchCUDA(gpu, bin, heads, kvHeads, 1, 2)
						if err != nil || len(ms) != 2 || ms[0] <= 0 || ms[1] <= 0 {
							t.Errorf("%s: BenchCUDA %v, %v", name, ms, err)
						}
					}
					lens := map[string]int{}
					for _, a := range bwd.AuxGrads() {
						lens[a] = len(g.DAux[a])
					}
					ref := varlenGradReference(in, do, heads, kvHeads, d, c.fn, s.fn, derivs[s.expr], lens)
					dvScale := maxAbs(ref.DV)
					line := name + ":"
					for _, p := range []struct {
						what  string
						got   []float32
						want  []float64
						floor float64
						tol   float64
					}{{"dQ", g.DQ, ref.DQ, dvScale, tol}, {"dK", g.DK, ref.DK, dvScale, tol}, {"dV", g.DV, ref.DV, 0, tol},
						{"dslopes", g.DAux["slopes"], ref.DAux["slopes"], 0, 4 * tol}} {
						if p.want == nil {
							continue
						}
						line += fmt.Sprintf(" %s %.2e", p.what, gpuGradCheck(t, name+" "+p.what, p.got, p.want, p.floor, p.tol))
					}
					t.Log(line)
				}
			}
		}
	}
}

// TestGPUSinksDecode decodes with sinks on the GPU (flash_fwd_splitkv with
// PackGQA, merged by flash_fwd_combine_sinks) against the float64
// reference with sinks: bf16, GQA 4, Sq 1 and 3, bottom-right causal and
// a window that leaves some rows nothing (O = 0, LSE = the sink).
func TestGPUSinksDecode(t *testing.T) {
	gpu := openTestGPU(t)
	for mi, m := range masks {
		switch m.expr {
		case "causal_bottom_right", "sliding_window(20, 3)":
		default:
			continue
		}
		fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, DType: "bf16", Sinks: true}, 128)
		if err != nil {
			t.Fatal(err)
		}
		for li, sq := range []int{1, 3} {
			sh := fac.Shape{Batch: 2, Heads: 16, KVHeads: 4, SeqQ: sq, SeqK: 3000, Dim: 128}
			plan, err := fwd.PlanCUDA(gpu, sh)
			if err != nil {
				t.Fatal(err)
			}
			in := only(fwd, inputs(sh, uint64(300+10*mi+li)))
			in.Sinks = sinkValues(sh.Heads, uint64(mi*10+li))
			o, lse, err := fwd.RunCUDA(gpu, in, sh)
			if err != nil {
				t.Fatalf("%s Sq=%d (%v): %v", m.expr, sq, plan, err)
			}
			ro, rlse := sinksReference(in, sh, m.fn)
			check(t, fmt.Sprintf("%s/Sq=%d/%v", m.expr, sq, plan), o, lse, ro, rlse, sh, 2e-2)
		}
	}
}
