//go:build gpu

package tests

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/reference"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// openTestGPU opens GPU 0 with the bundle named by FAC_BUNDLE and those
// in FAC_BUNDLE_EXTRA (a list, like PATH), for every GPU test.
func openTestGPU(t *testing.T) *fac.CUDA {
	t.Helper()
	gpu, err := fac.OpenCUDA(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range testBundlePaths() {
		b, err := bundle.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		gpu.AddBundle(b)
	}
	return gpu
}

// testBundlePaths are the bundles the GPU tests load: FAC_BUNDLE_EXTRA's,
// then FAC_BUNDLE.
func testBundlePaths() []string {
	paths := filepath.SplitList(os.Getenv("FAC_BUNDLE_EXTRA"))
	if path := os.Getenv("FAC_BUNDLE"); path != "" {
		paths = append(paths, path)
	}
	return paths
}

// bwdGPUCase is one backward configuration of the GPU suite.
type bwdGPUCase struct {
	dtype string
	dim   int
	mi    int // index into masks
	si    int // index into scores
	bwd   *fac.Backward
}

// TestGPUBackwardMatchesReference is the backward issue's GPU acceptance:
// dQ, dK, dV (and ALiBi's slope gradient) from the GPU kernels for every
// stdlib mask × {identity, softcap, alibi} × {bf16, f16} × head dims 64
// and 128 × odd and unequal seqlens, with grouped-query heads, against
// float64 gradients of the inputs rounded to the dtype: each tensor's
// largest error relative to its largest |ref| within 2e-2 (bf16) or 5e-3
// (f16), and no NaN (the kernels' outputs are poisoned before the launch).
// O and LSE come from float64 attention (O rounded to the dtype, as a
// forward kernel stores it), so the suite tests the backward kernels only.
func TestGPUBackwardMatchesReference(t *testing.T) {
	gpu := openTestGPU(t)
	t.Logf("device %s (%s)", gpu.Name, gpu.Arch)
	var cases []bwdGPUCase
	var all []*fac.Backward
	for _, dtype := range []string{"bf16", "f16"} {
		for _, d := range []int{64, 128} {
			for mi, m := range masks {
				for si, s := range scores {
					// The device's arch: its tuned tiles, as RunCUDAGrads would pick, and
					// the kernels the preload below loads.
					bwd, err := fac.CompileBackward(fac.Options{Mask: m.expr, Score: s.expr, DType: dtype, Target: codegen.TargetConfig{Arch: gpu.Arch}}, d)
					if err != nil {
						t.Fatal(err)
					}
					cases = append(cases, bwdGPUCase{dtype, d, mi, si, bwd})
					all = append(all, bwd)
				}
			}
		}
	}
	// Load every kernel first (the driver's JIT, once per kernel and GPU:
	// the cubin cache keeps it), so that the cases below time nothing but
	// themselves.
	t0 := time.Now()
	n := 0
	for _, b := range all {
		for _, res := range b.Kernels() {
			if _, err := gpu.Kernel(context.Background(), res, nil); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	t.Logf("loaded %d kernels in %.1fs", n, time.Since(t0).Seconds())
	seqs := [][2]int{{1, 1}, {127, 127}, {257, 100}, {100, 257}}
	worst := map[string]float64{}
	for ci, c := range cases {
		tol := gpuTol(c.dtype)
		cs := seqs
		if c.si == 0 && c.dim == 128 && c.dtype == "bf16" {
			cs = append(slices.Clone(seqs), [2]int{1000, 1000}) // the long case once per mask
		}
		for li, sl := range cs {
			sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: sl[0], SeqK: sl[1], Dim: c.dim}
			if (ci+li)%2 == 1 {
				sh.KVHeads = 1 // multi-query
			}
			if sl[0]*sl[1] >= 1<<17 {
				sh.Heads, sh.KVHeads = 2, 1 // keep the float64 reference quick
			}
			name := fmt.Sprintf("%s/d%d/%s/%s/%dx%d/hkv%d", c.dtype, c.dim, masks[c.mi].expr, scores[c.si].expr, sl[0], sl[1], sh.KVHeads)
			gpuBackwardCase(t, gpu, c, sh, uint64(1000*ci+li), name, tol, worst)
		}
	}
	t.Logf("largest relative errors: %v", worst)
}

// gpuTol is the GPU suite's tolerance for dtype, relative to an output's
// max |ref|: 2e-2 for bf16, 5e-3 for f16.
func gpuTol(dtype string) float64 {
	if dtype == "f16" {
		return 5e-3
	}
	return 2e-2
}

// gpuBackwardCase runs one configuration on the GPU and checks it.
func gpuBackwardCase(t *testing.T, gpu *fac.CUDA, c bwdGPUCase, sh fac.Shape, seed uint64, name string, tol float64, worst map[string]float64) {
	t.Helper()
	in := roundInputs(onlyBackward(c.bwd, inputs(sh, seed)), c.dtype)
	round := func(xs []float32) []float32 { return roundInputs(fac.Inputs{Q: xs, K: xs, V: xs}, c.dtype).Q }
	rng := rand.New(rand.NewPCG(seed, 17))
	do := make([]float32, sh.Batch*sh.Heads*sh.SeqQ*sh.VDim()) // like O
	for i := range do {
		do[i] = float32(rng.NormFloat64())
	}
	do = round(do)
	var mask reference.MaskFunc
	var score reference.ScoreFunc
	var deriv reference.ScoreDerivFunc
	if fn := masks[c.mi].fn; fn != nil {
		mask = fn(sh, in.Aux)
	}
	if fn := scores[c.si].fn; fn != nil {
		score = fn(sh, in.Aux)
		deriv = derivs[scores[c.si].expr](sh, in.Aux)
	}
	rsh := refShape(sh)
	scale := float64(float32(1 / math.Sqrt(float64(sh.Dim))))
	q, k, v := to64(in.Q), to64(in.K), to64(in.V)
	ro, rlse := reference.Attention(q, k, v, rsh, scale, mask, score)
	o, lse := make([]float32, len(ro)), make([]float32, len(rlse))
	for i, x := range ro {
		o[i] = float32(x)
	}
	o = round(o)
	for i, x := range rlse {
		lse[i] = float32(x)
	}
	g, err := c.bwd.RunCUDAGrads(context.Background(), gpu, fac.BackwardInputs{Q: in.Q, K: in.K, V: in.V, O: o, LSE: lse, DO: do, Aux: in.Aux}, sh)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	lens := map[string]int{}
	for _, a := range c.bwd.AuxGrads() {
		lens[a] = len(g.DAux[a])
	}
	ref := reference.AttentionGrad(q, k, v, to64(do), rsh, scale, mask, score, deriv, lens)
	dvScale := maxAbs(ref.DV)
	line := name + ":"
	for _, p := range []struct {
		what string
		got  []float32
		want []float64
		tol  float64
	}{{"dQ", g.DQ, ref.DQ, tol}, {"dK", g.DK, ref.DK, tol}, {"dV", g.DV, ref.DV, tol}} {
		rel := gpuGradCheck(t, name+" "+p.what, p.got, p.want, dvScale, p.tol)
		worst[c.dtype+" "+p.what] = math.Max(worst[c.dtype+" "+p.what], rel)
		line += fmt.Sprintf(" %s %.2e", p.what, rel)
	}
	for _, a := range slices.Sorted(maps.Keys(lens)) {
		// An aux gradient such as ALiBi's slope is one sum over all Sq·Sk
		// pairs of dS·(j−i), whose rows each sum to zero: it keeps the
		// absolute error of its terms, not a relative one (bf16 measured
		// up to 5.2e-2 of max |ref| on the H200), so it gets 4× the
		// tolerance of dQ, dK and dV.
		rel := gpuGradCheck(t, name+" d"+a, g.DAux[a], ref.DAux[a], 0, math.Max(4*tol, 1e-3))
		worst[c.dtype+" d"+a] = math.Max(worst[c.dtype+" d"+a], rel)
		line += fmt.Sprintf(" d%s %.2e", a, rel)
	}
	t.Log(line)
}

// gpuGradCheck checks one gradient: no NaN (the poison of an unwritten
// element) and max |got − ref| ≤ tol · max(max |ref|, floor). dQ and dK
// pass dV's scale as floor: their error comes from dS = P∘(dP − Δ), whose
// absolute error is set by Δ = rowsum(dO∘O) from the 16-bit O the forward
// stored (P·|dO|·|O|·2⁻⁸, dV's scale), not by dS itself, which cancels
// when a row keeps one key (exactly 0 without sinks; with sinks P(1 − P),
// small when the sink is weak: bf16, Sq = Sk = 1, document mask
// measured dQ 0.0085 against max |dQ| 0.215, the same bits on the CPU
// device as on the H200). It returns the relative error.
func gpuGradCheck(t *testing.T, name string, got []float32, ref []float64, floor, tol float64) float64 {
	t.Helper()
	if len(got) != len(ref) {
		t.Errorf("%s: %d elements, reference %d", name, len(got), len(ref))
		return math.Inf(1)
	}
	maxErr, maxRef := 0.0, 0.0
	for i, x := range got {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Errorf("%s[%d] = %v", name, i, x)
			return math.Inf(1)
		}
		maxErr = math.Max(maxErr, math.Abs(float64(x)-ref[i]))
		maxRef = math.Max(maxRef, math.Abs(ref[i]))
	}
	maxRef = math.Max(maxRef, floor)
	rel := maxErr
	if maxRef > 0 {
		rel = maxErr / maxRef
	}
	if rel > tol {
		t.Errorf("%s: max |err| %.3g, relative to max |ref| %.3g: %.3g > %.g", name, maxErr, maxRef, rel, tol)
	}
	return rel
}

// onlyBackward keeps the aux tensors bwd's mods read.
func onlyBackward(bwd *fac.Backward, in fac.Inputs) fac.Inputs {
	aux := map[string]any{}
	for _, name := range bwd.AuxTensors() {
		aux[name] = in.Aux[name]
	}
	in.Aux = aux
	return in
}

// TestGPUBackwardDeterministic runs the DETERMINISTIC mode (dQ by
// flash_bwd_dq, no atomics) on the GPU: within tolerance, and the same
// bits on two runs.
func TestGPUBackwardDeterministic(t *testing.T) {
	gpu := openTestGPU(t)
	bwd, err := fac.CompileBackward(fac.Options{Mask: "sliding_window(20, 3)", Score: "softcap(2.5)", DType: "bf16",
		Consts: map[string]string{"DETERMINISTIC": "true", "AUX_GRAD": "false"}}, 64)
	if err != nil {
		t.Fatal(err)
	}
	c := bwdGPUCase{dtype: "bf16", dim: 64, mi: 3, si: 1, bwd: bwd}
	sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 300, SeqK: 257, Dim: 64}
	gpuBackwardCase(t, gpu, c, sh, 5, "deterministic", 2e-2, map[string]float64{})
	in := roundInputs(inputs(sh, 5), "bf16")
	in.Aux = nil
	o, lse := make([]float32, len(in.Q)), make([]float32, sh.Batch*sh.Heads*sh.SeqQ)
	for i := range o {
		o[i] = in.Q[i] / 4
	}
	bin := fac.BackwardInputs{Q: in.Q, K: in.K, V: in.V, O: o, LSE: lse, DO: in.Q}
	var runs [2]*fac.Grads
	for i := range runs {
		if runs[i], err = bwd.RunCUDAGrads(context.Background(), gpu, bin, sh); err != nil {
			t.Fatal(err)
		}
	}
	for name, pair := range map[string][2][]float32{"dQ": {runs[0].DQ, runs[1].DQ}, "dK": {runs[0].DK, runs[1].DK}, "dV": {runs[0].DV, runs[1].DV}} {
		for i := range pair[0] {
			if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
				t.Fatalf("%s[%d] differs between runs: %v, %v", name, i, pair[0][i], pair[1][i])
			}
		}
	}
}

// TestGPUBackwardLaunchDevicePointers runs Backward.LaunchCUDA on
// caller-owned device buffers in the [B, S, H, D] layout (strided heads),
// poisoned, on a stream, first allocating its own workspace and block
// mask, then with a workspace and an uploaded block mask, and checks both
// against RunCUDA's gradients.
func TestGPUBackwardLaunchDevicePointers(t *testing.T) {
	gpu := openTestGPU(t)
	sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 300, SeqK: 200, Dim: 64}
	bwd, err := fac.CompileBackward(fac.Options{Mask: "document", Score: "alibi", DType: "bf16"}, sh.Dim)
	if err != nil {
		t.Fatal(err)
	}
	in := roundInputs(onlyBackward(bwd, inputs(sh, 9)), "bf16")
	rng := rand.New(rand.NewPCG(9, 1))
	do, o := make([]float32, len(in.Q)), make([]float32, len(in.Q))
	for i := range do {
		do[i] = float32(rng.NormFloat64())
		o[i] = float32(rng.NormFloat64()) / 8
	}
	do, o = roundInputs(fac.Inputs{Q: do}, "bf16").Q, roundInputs(fac.Inputs{Q: o}, "bf16").Q
	lse := make([]float32, sh.Batch*sh.Heads*sh.SeqQ)
	for i := range lse {
		lse[i] = 3 + float32(i%7)/10
	}
	want, err := bwd.RunCUDAGrads(context.Background(), gpu, fac.BackwardInputs{Q: in.Q, K: in.K, V: in.V, O: o, LSE: lse, DO: do, Aux: in.Aux}, sh)
	if err != nil {
		t.Fatal(err)
	}
	toBSHD := func(x []float32, h, s int) []uint16 {
		out := make([]uint16, len(x))
		for b := 0; b < sh.Batch; b++ {
			for hh := 0; hh < h; hh++ {
				for i := 0; i < s; i++ {
					for d := 0; d < sh.Dim; d++ {
						out[((b*s+i)*h+hh)*sh.Dim+d] = half.F32ToBF16(x[((b*h+hh)*s+i)*sh.Dim+d])
					}
				}
			}
		}
		return out
	}
	fromBSHD := func(x []uint16, h, s int) []float32 {
		out := make([]float32, len(x))
		for b := 0; b < sh.Batch; b++ {
			for hh := 0; hh < h; hh++ {
				for i := 0; i < s; i++ {
					for d := 0; d < sh.Dim; d++ {
						out[((b*h+hh)*s+i)*sh.Dim+d] = half.BF16ToF32(x[((b*s+i)*h+hh)*sh.Dim+d])
					}
				}
			}
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
		case []int32:
			err = cuda.HtoD(p, x)
		}
		if err != nil {
			t.Fatal(err)
		}
		return uintptr(p)
	}
	poison := func(n int) []uint16 { // all-ones: NaN in bf16 and in f32
		x := make([]uint16, n)
		for i := range x {
			x[i] = 0xffff
		}
		return x
	}
	nq, nk := len(in.Q), len(in.K)
	doc, slopes := in.Aux["doc"].([]int32), in.Aux["slopes"].([]float32)
	dev := fac.BackwardDeviceTensors{
		Q: up(toBSHD(in.Q, sh.Heads, sh.SeqQ), 2*nq), K: up(toBSHD(in.K, sh.KVHeads, sh.SeqK), 2*nk), V: up(toBSHD(in.V, sh.KVHeads, sh.SeqK), 2*nk),
		O: up(toBSHD(o, sh.Heads, sh.SeqQ), 2*nq), DO: up(toBSHD(do, sh.Heads, sh.SeqQ), 2*nq), LSE: up(lse, 4*len(lse)),
		Aux: map[string]fac.DeviceAux{"doc": {Ptr: up(doc, 4*len(doc)), Len: len(doc)}, "slopes": {Ptr: up(slopes, 4*len(slopes)), Len: len(slopes)}},
	}
	stride := func(h, seq int) [3]int { return [3]int{seq * h * sh.Dim, sh.Dim, h * sh.Dim} }
	dev.QStride, dev.OStride, dev.DOStride, dev.DQStride = stride(sh.Heads, sh.SeqQ), stride(sh.Heads, sh.SeqQ), stride(sh.Heads, sh.SeqQ), stride(sh.Heads, sh.SeqQ)
	dev.KStride, dev.VStride, dev.DKStride, dev.DVStride = stride(sh.KVHeads, sh.SeqK), stride(sh.KVHeads, sh.SeqK), stride(sh.KVHeads, sh.SeqK), stride(sh.KVHeads, sh.SeqK)
	s, err := cuda.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	ws, err := bwd.NewWorkspace(sh)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Free()
	bm, _, err := bwd.BlockMask(sh, in.Aux)
	if err != nil {
		t.Fatal(err)
	}
	dbm, err := gpu.UploadBlockMask(bm)
	if err != nil {
		t.Fatal(err)
	}
	defer dbm.Free()
	for round, own := range []bool{true, false} {
		dev.DQ, dev.DK, dev.DV = up(poison(nq), 2*nq), up(poison(nk), 2*nk), up(poison(nk), 2*nk)
		dslopes := up(make([]float32, len(slopes)), 4*len(slopes)) // added into: zeroed
		dev.DAux = map[string]fac.DeviceAux{"slopes": {Ptr: dslopes, Len: len(slopes)}}
		dev.Workspace, dev.BlockMask = nil, nil
		if !own {
			dev.Workspace, dev.BlockMask = ws, dbm
		}
		if err := bwd.LaunchCUDA(gpu, dev, sh, s); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		read := func(p uintptr, n int, h, seq int) []float32 {
			x := make([]uint16, n)
			if err := cuda.DtoH(x, cuda.DevicePtr(p)); err != nil {
				t.Fatal(err)
			}
			return fromBSHD(x, h, seq)
		}
		gotSlopes := make([]float32, len(slopes))
		if err := cuda.DtoH(gotSlopes, cuda.DevicePtr(dslopes)); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("launch %d (own workspace and block mask: %v)", round, own)
		// Atomics add in any order: compare within f32 rounding.
		for _, p := range []struct {
			what      string
			got, want []float32
		}{{"dQ", read(dev.DQ, nq, sh.Heads, sh.SeqQ), want.DQ}, {"dK", read(dev.DK, nk, sh.KVHeads, sh.SeqK), want.DK},
			{"dV", read(dev.DV, nk, sh.KVHeads, sh.SeqK), want.DV}, {"dslopes", gotSlopes, want.DAux["slopes"]}} {
			gpuGradCheck(t, name+" "+p.what, p.got, to64(p.want), 0, 1e-2)
		}
	}
}

// TestGPUBackwardResources logs the registers and local memory (spills,
// stack) that the driver's JIT gave each backward kernel of the benchmark
// configuration (bf16, D = 64 and 128, causal), for the register-pressure
// figures; ptxas -v on the PTX gives the same.
func TestGPUBackwardResources(t *testing.T) {
	gpu := openTestGPU(t)
	for _, d := range []int{64, 128} {
		for _, score := range []string{"identity", "softcap(2.5)"} {
			bwd, err := fac.CompileBackward(fac.Options{Mask: "causal", Score: score, DType: "bf16", Target: codegen.TargetConfig{Arch: gpu.Arch}}, d)
			if err != nil {
				t.Fatal(err)
			}
			for _, res := range bwd.Kernels() {
				k, err := gpu.Kernel(context.Background(), res, nil)
				if err != nil {
					t.Fatal(err)
				}
				regs, local, err := k.Resources()
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s d%d causal %s: %d threads, %d registers, %d bytes local", res.Kernel, d, score, k.Art.Threads, regs, local)
			}
		}
	}
}
