//go:build gpu

package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/codegen"
)

// TestGPUDimV runs every kernel family with V's head dim unlike Q's on the
// GPU against the float64 reference (inputs rounded to the dtype), within
// 2e-2 (bf16) or 5e-3 (f16) of each output's max |ref|, no NaN (outputs
// are poisoned): the forward (O [B, H, Sq, Dv]) for gpuDimVMods; the
// backward (dQ, dK like Q and K, dV like V) on the device's arch; split-KV
// with PackGQA; sinks, forward and backward; varlen, forward and backward;
// at every pair of gpuDimPairs, those that are not powers of two included.
func TestGPUDimV(t *testing.T) {
	gpu := openTestGPU(t)
	t.Logf("device %s (%s)", gpu.Name, gpu.Arch)
	for _, dtype := range []string{"bf16", "f16"} {
		tol := gpuTol(dtype)
		for pi, p := range gpuDimPairs {
			d, dv := p[0], p[1]
			for ci, mc := range gpuDimVMods {
				m, s := masks[mc.mask], scores[mc.score]
				opts := fac.Options{Mask: m.expr, Score: s.expr, DType: dtype, DimV: dv}
				fwd, err := fac.CompileForward(opts, d)
				if err != nil {
					t.Fatal(err)
				}
				for li, sl := range [][2]int{{127, 127}, {257, 100}, {100, 1000}} {
					sh := dimVShape(2, 4, 2, sl[0], sl[1], d, dv)
					in := inputs(sh, uint64(100*pi+10*ci+li))
					name := fmt.Sprintf("fwd %s/d%d,dv%d/%s/%s/%dx%d", dtype, d, dv, m.expr, s.expr, sl[0], sl[1])
					o, lse, err := fwd.RunCUDA(gpu, only(fwd, in), sh)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					ro, rlse := goReference(roundInputs(in, dtype), sh, m.fn, s.fn)
					checkFlat(t, name, o, lse, ro, rlse, tol)
				}
				bopts := opts
				bopts.Target = codegen.TargetConfig{Arch: gpu.Arch}
				bwd, err := fac.CompileBackward(bopts, d)
				if err != nil {
					t.Fatal(err)
				}
				c := bwdGPUCase{dtype: dtype, dim: d, mi: mc.mask, si: mc.score, bwd: bwd}
				for li, sl := range [][2]int{{127, 127}, {257, 100}, {100, 257}} {
					sh := dimVShape(2, 4, 2, sl[0], sl[1], d, dv)
					name := fmt.Sprintf("bwd %s/d%d,dv%d/%s/%s/%dx%d", dtype, d, dv, m.expr, s.expr, sl[0], sl[1])
					gpuBackwardCase(t, gpu, c, sh, uint64(1000*pi+100*ci+li), name, tol, map[string]float64{})
				}
			}
			// Split-KV and PackGQA: 3 splits, 4 query heads a tile.
			dec, err := fac.CompileForward(fac.Options{Mask: "causal_bottom_right", DType: dtype, DimV: dv, NumSplits: 3, PackGQA: fac.PackGQAOn}, d)
			if err != nil {
				t.Fatal(err)
			}
			for _, sq := range []int{1, 16} {
				sh := dimVShape(2, 8, 2, sq, 1000, d, dv)
				in := inputs(sh, uint64(sq))
				name := fmt.Sprintf("decode %s/d%d,dv%d/%dx1000", dtype, d, dv, sq)
				o, lse, err := dec.RunCUDA(gpu, only(dec, in), sh)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				ro, rlse := goReference(roundInputs(in, dtype), sh, maskFn("causal_bottom_right"), nil)
				checkFlat(t, name, o, lse, ro, rlse, tol)
			}
			// Sinks, forward and backward.
			sfwd, sbwd := mustCompile(t, fac.Options{Mask: "causal_bottom_right", DType: dtype, DimV: dv, Sinks: true}, d)
			sh := dimVShape(2, 4, 2, 257, 100, d, dv)
			in := only(sfwd, inputs(sh, 7))
			in.Sinks = sinkValues(sh.Heads, 7)
			o, lse, err := sfwd.RunCUDA(gpu, in, sh)
			if err != nil {
				t.Fatal(err)
			}
			ro, rlse := sinksReference(roundInputs(in, dtype), sh, maskFn("causal_bottom_right"))
			checkFlat(t, fmt.Sprintf("sinks %s/d%d,dv%d", dtype, d, dv), o, lse, ro, rlse, tol)
			gpuSinksCase(t, gpu, sbwd, dtype, sh, maskFn("causal_bottom_right"), 7, fmt.Sprintf("sinks bwd %s/d%d,dv%d", dtype, d, dv), tol)
			gpuDimVVarlen(t, gpu, dtype, d, dv, tol)
		}
	}
}

// gpuDimVVarlen runs the varlen forward and backward (causal) with V's head
// dim dv beside d on the GPU against the float64 reference per sequence.
func gpuDimVVarlen(t *testing.T, gpu *fac.CUDA, dtype string, d, dv int, tol float64) {
	t.Helper()
	lensQ := []int{1, 0, 127, 300, 64}
	lensK := []int{1, 5, 129, 257, 0}
	cq, ck := cumsum(lensQ), cumsum(lensK)
	tq, tk := int(cq[len(cq)-1]), int(ck[len(ck)-1])
	const heads, kvHeads = 4, 2
	fwd, bwd := mustCompileVarlen(t, fac.Options{Mask: "causal", DType: dtype, DimV: dv}, d)
	round := func(xs []float32) []float32 { return roundInputs(fac.Inputs{Q: xs, K: xs, V: xs}, dtype).Q }
	draw := normals(rand.New(rand.NewPCG(uint64(d), uint64(dv))))
	randn := func(n int) []float32 { return round(draw(n)) }
	in := fac.VarlenInputs{Q: randn(tq * heads * d), K: randn(tk * kvHeads * d), V: randn(tk * kvHeads * dv), CuSeqlensQ: cq, CuSeqlensK: ck}
	name := fmt.Sprintf("varlen %s/d%d,dv%d", dtype, d, dv)
	o, lse, err := fwd.RunCUDA(gpu, in, heads, kvHeads)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	do := randn(len(o))
	ro, rlse, ref := varlenReferenceGrads(in, do, heads, kvHeads, d, dv, maskFn("causal"))
	checkFlat(t, name, o, lse, ro, rlse, tol)
	g, err := bwd.RunCUDAGrads(context.Background(), gpu, fac.VarlenBackwardInputs{VarlenInputs: in, O: o, LSE: lse, DO: do}, heads, kvHeads)
	if err != nil {
		t.Fatalf("%s: backward: %v", name, err)
	}
	dvScale := maxAbs(ref.DV)
	gpuGradCheck(t, name+" dQ", g.DQ, ref.DQ, dvScale, tol)
	gpuGradCheck(t, name+" dK", g.DK, ref.DK, dvScale, tol)
	gpuGradCheck(t, name+" dV", g.DV, ref.DV, 0, tol)
}
