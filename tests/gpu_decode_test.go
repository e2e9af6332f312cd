//go:build gpu

package tests

import (
	"fmt"
	"math"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// gpuDecodeMods are the masks and scores of the decoding GPU suite: ones
// the test bundle of scripts/gpu prepare holds (its split-KV kernels come
// with every forward it bundles).
var gpuDecodeMods = []struct{ mask, score int }{
	{0, 0}, // none
	{2, 2}, // causal_bottom_right + alibi: the score gathers slopes[h] per packed row
	{3, 0}, // sliding_window(20, 3): most splits of a long row get no block
	{5, 1}, // document + softcap
}

// TestGPUDecodeMatchesReference runs split-KV and PackGQA on the GPU
// against the float64 reference: masks with and without aux tensors, GQA
// ratios 1, 4 and 8, Sq ∈ {1, 7, 16, 64}, 1, 3 and auto splits, bf16 and
// f16, head dims 64 and 128. Outputs and the workspace are poisoned (NaN)
// before the launch, so a row or split no kernel writes shows.
func TestGPUDecodeMatchesReference(t *testing.T) {
	gpu := openTestGPU(t)
	t.Logf("device %s (%s), %d SMs", gpu.Name, gpu.Arch, gpu.SMs())
	splits := []int{1, 3, 0}
	i := 0
	for _, dtype := range []string{"bf16", "f16"} {
		tol := gpuTol(dtype)
		for _, d := range []int{64, 128} {
			for _, mc := range gpuDecodeMods {
				m, s := masks[mc.mask], scores[mc.score]
				for _, hkv := range []int{8, 2, 1} {
					for _, sq := range []int{1, 7, 16, 64} {
						i++
						sk := []int{1000, 4100}[i%2]
						if testing.Short() && (d == 64 || dtype == "f16") && sq != 1 {
							continue
						}
						n := splits[i%len(splits)]
						fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, Score: s.expr, DType: dtype, NumSplits: n}, d)
						if err != nil {
							t.Fatal(err)
						}
						sh := fac.Shape{Batch: 2, Heads: 8, KVHeads: hkv, SeqQ: sq, SeqK: sk, Dim: d}
						plan, err := fwd.Plan(sh, gpu.SMs())
						if err != nil {
							t.Fatal(err)
						}
						in := inputs(sh, uint64(i))
						name := fmt.Sprintf("%s/d%d/%s/%s/Hkv=%d/%dx%d/splits=%d,pack=%d", dtype, d, m.expr, s.expr, hkv, sq, sk, plan.NumSplits, plan.Pack)
						o, lse, err := fwd.RunCUDA(gpu, only(fwd, in), sh)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						ro, rlse := goReference(roundInputs(in, dtype), sh, m.fn, s.fn)
						checkFlat(t, name, o, lse, ro, rlse, tol)
					}
				}
			}
		}
	}
}

// TestGPUDecodeLongKV runs decoding at issue 11's longest GPU context,
// Sk = 131072 (B = 1, H = 8, D = 128, bf16), split and packed as the plan
// chooses, against the float64 reference: GQA ratios 1, 4 and 8, Sq ∈ {1,
// 7, 16, 64}, no mask, bottom-right causal with ALiBi, a sliding window
// (most splits keep no block), and document with softcap (a mask reading an
// aux tensor 131072 long). Outputs are poisoned by RunCUDA's launch.
func TestGPUDecodeLongKV(t *testing.T) {
	gpu := openTestGPU(t)
	for i, c := range []struct{ mask, score, kvHeads, sq int }{
		{0, 0, 8, 1},  // none, ratio 1
		{2, 2, 2, 16}, // causal_bottom_right + alibi, ratio 4
		{3, 0, 1, 7},  // sliding_window(20, 3), ratio 8
		{5, 1, 1, 64}, // document + softcap, ratio 8
	} {
		m, s := masks[c.mask], scores[c.score]
		fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, Score: s.expr, DType: "bf16"}, 128)
		if err != nil {
			t.Fatal(err)
		}
		sh := fac.Shape{Batch: 1, Heads: 8, KVHeads: c.kvHeads, SeqQ: c.sq, SeqK: 131072, Dim: 128}
		plan, err := fwd.Plan(sh, gpu.SMs())
		if err != nil {
			t.Fatal(err)
		}
		in := inputs(sh, uint64(100+i))
		name := fmt.Sprintf("bf16/d128/%s/%s/Hkv=%d/%dx%d/splits=%d,pack=%d", m.expr, s.expr, c.kvHeads, c.sq, sh.SeqK, plan.NumSplits, plan.Pack)
		o, lse, err := fwd.RunCUDA(gpu, only(fwd, in), sh)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ro, rlse := goReference(roundInputs(in, "bf16"), sh, m.fn, s.fn)
		checkFlat(t, name, o, lse, ro, rlse, 2e-2)
		t.Logf("%s: checked", name)
	}
}

// TestGPUDecodeLaunchDevicePointers runs the decode anchors' layout (B=2,
// 32 query heads, 8 kv heads, D=128, Sq=1) through LaunchCUDA on
// caller-owned buffers, with a workspace made once and without one, and
// checks both against the reference.
func TestGPUDecodeLaunchDevicePointers(t *testing.T) {
	gpu := openTestGPU(t)
	sh := fac.Shape{Batch: 2, Heads: 32, KVHeads: 8, SeqQ: 1, SeqK: 8192, Dim: 128}
	fwd, err := fac.CompileForward(fac.Options{Mask: "causal_bottom_right", DType: "bf16"}, sh.Dim)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := fwd.Plan(sh, gpu.SMs())
	if err != nil {
		t.Fatal(err)
	}
	if !plan.SplitKV || plan.Pack != 4 {
		t.Fatalf("plan %v: want split-KV with 4 heads packed", plan)
	}
	t.Logf("plan: %v", plan)
	in := inputs(sh, 17)
	bf := func(xs []float32) []uint16 {
		out := make([]uint16, len(xs))
		for i, x := range xs {
			out[i] = half.F32ToBF16(x)
		}
		return out
	}
	up := func(x []uint16) uintptr { return toDevice(t, x) }
	q, k, v := up(bf(in.Q)), up(bf(in.K)), up(bf(in.V))
	ws, err := fwd.NewWorkspace(gpu, sh)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Free()
	ro, rlse := goReference(roundInputs(in, "bf16"), sh, masks[2].fn, nil)
	for _, w := range []*fac.ForwardWorkspace{ws, nil} {
		poison := make([]uint16, 2*len(in.Q))
		for i := range poison {
			poison[i] = 0xffff
		}
		o := up(poison[:len(in.Q)])
		lseBuf := up(poison[:2*sh.Batch*sh.Heads*sh.SeqQ])
		if err := fwd.LaunchCUDA(gpu, fac.DeviceTensors{Q: q, K: k, V: v, O: o, LSE: lseBuf, Workspace: w}, sh, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		if err := gpu.Ctx.Synchronize(); err != nil {
			t.Fatal(err)
		}
		ob := make([]uint16, len(in.Q))
		if err := cuda.DtoH(ob, cuda.DevicePtr(o)); err != nil {
			t.Fatal(err)
		}
		lse := make([]float32, sh.Batch*sh.Heads*sh.SeqQ)
		if err := cuda.DtoH(lse, cuda.DevicePtr(lseBuf)); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(ob))
		for i, x := range ob {
			got[i] = half.BF16ToF32(x)
		}
		checkFlat(t, fmt.Sprintf("LaunchCUDA, workspace given: %v", w != nil), got, lse, ro, rlse, 2e-2)
	}
	// The decode anchor's time, for the log (fac bench --decode measures it).
	times, err := fwd.BenchCUDA(gpu, only(fwd, in), sh, 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	best := math.Inf(1)
	for _, x := range times {
		best = math.Min(best, x)
	}
	t.Logf("B=2 H=32 Hkv=8 Sq=1 Sk=8192: best %.3f ms, %.2f TB/s of K and V", best, 2*2*8*8192*128*2/best/1e9)
}

// TestGPUDecodePDL: split-KV decoding compiled for programmatic dependent
// launch (DecodeConsts pdl): the split kernel and the combine start each
// other early and wait for each other's writes, and the result is the
// reference's, call after call on one stream (bf16, D = 128, causal
// bottom-right, GQA 4, three splits).
func TestGPUDecodePDL(t *testing.T) {
	gpu := openTestGPU(t)
	fwd, err := fac.CompileForward(pdlDecodeOpts(), 128)
	if err != nil {
		t.Fatal(err)
	}
	var m goMask
	for _, c := range masks {
		if c.expr == "causal_bottom_right" {
			m = c.fn
		}
	}
	for i, sk := range []int{1000, 4100, 4100} {
		sh := fac.Shape{Batch: 2, Heads: 16, KVHeads: 4, SeqQ: 1 + 6*(i%2), SeqK: sk, Dim: 128}
		in := only(fwd, inputs(sh, uint64(700+i)))
		o, lse, err := fwd.RunCUDA(gpu, in, sh)
		if err != nil {
			t.Fatalf("Sk=%d: %v", sk, err)
		}
		ro, rlse := goReference(roundInputs(in, "bf16"), sh, m, nil)
		checkFlat(t, fmt.Sprintf("pdl/%dx%d", sh.SeqQ, sk), o, lse, ro, rlse, gpuTol("bf16"))
	}
}

// TestGPUDecodeFusedCombine: split-KV decoding merged in place
// (DecodeConsts fused_combine: the last program of each q tile merges the
// tile's splits, no flash_fwd_combine launch) gives split + combine's O
// and LSE, and the reference's, on host data (RunCUDA) and through
// LaunchCUDA on one workspace three launches in a row: its counters,
// zeroed once when it is allocated, must be left zeroed by every launch
// (bf16, D = 128, causal bottom-right, GQA 4, three splits, Sq 1 and 7).
func TestGPUDecodeFusedCombine(t *testing.T) {
	gpu := openTestGPU(t)
	fused, err := fac.CompileForward(fusedDecodeOpts(true), 128)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := fac.CompileForward(fusedDecodeOpts(false), 128)
	if err != nil {
		t.Fatal(err)
	}
	for i, sk := range []int{1000, 4100} {
		sh := fac.Shape{Batch: 2, Heads: 16, KVHeads: 4, SeqQ: 1 + 6*i, SeqK: sk, Dim: 128}
		plan, err := fused.PlanCUDA(gpu, sh)
		if err != nil || !plan.FusedCombine {
			t.Fatalf("plan %v, %v: want split-KV merged in place", plan, err)
		}
		in := only(fused, inputs(sh, uint64(800+i)))
		o, lse, err := fused.RunCUDA(gpu, in, sh)
		if err != nil {
			t.Fatalf("fused, Sk=%d: %v", sk, err)
		}
		po, plse, err := plain.RunCUDA(gpu, in, sh)
		if err != nil {
			t.Fatalf("split + combine, Sk=%d: %v", sk, err)
		}
		name := fmt.Sprintf("fused/%dx%d", sh.SeqQ, sk)
		checkFlat(t, name+" vs split + combine", o, lse, f64s(po), f64s(plse), gpuTol("bf16"))
		ro, rlse := goReference(roundInputs(in, "bf16"), sh, maskFn("causal_bottom_right"), nil)
		checkFlat(t, name, o, lse, ro, rlse, gpuTol("bf16"))
		ws, err := fused.NewWorkspace(gpu, sh)
		if err != nil {
			t.Fatal(err)
		}
		for run := range 3 {
			lo, llse := launchBF16(t, gpu, fused, in, sh, ws)
			checkFlat(t, fmt.Sprintf("%s, LaunchCUDA %d on one workspace", name, run), lo, llse, ro, rlse, gpuTol("bf16"))
		}
		ws.Free()
	}
}

// launchBF16 runs fwd through LaunchCUDA on device copies of in (bf16,
// contiguous) with workspace ws, outputs poisoned first, and returns O
// and LSE.
func launchBF16(t *testing.T, gpu *fac.CUDA, fwd *fac.Forward, in fac.Inputs, sh fac.Shape, ws *fac.ForwardWorkspace) (o, lse []float32) {
	t.Helper()
	up := func(x []uint16) uintptr { return toDevice(t, x) }
	bf := func(xs []float32) uintptr {
		out := make([]uint16, len(xs))
		for i, x := range xs {
			out[i] = half.F32ToBF16(x)
		}
		return up(out)
	}
	nO, nL := sh.Batch*sh.Heads*sh.SeqQ*sh.VDim(), sh.Batch*sh.Heads*sh.SeqQ
	poison := make([]uint16, max(nO, 2*nL))
	for i := range poison {
		poison[i] = 0xffff
	}
	ob, lb := up(poison[:nO]), up(poison[:2*nL])
	dt := fac.DeviceTensors{Q: bf(in.Q), K: bf(in.K), V: bf(in.V), O: ob, LSE: lb, Workspace: ws}
	if err := fwd.LaunchCUDA(gpu, dt, sh, cuda.Stream{}); err != nil {
		t.Fatal(err)
	}
	if err := gpu.Ctx.Synchronize(); err != nil {
		t.Fatal(err)
	}
	oh := make([]uint16, nO)
	if err := cuda.DtoH(oh, cuda.DevicePtr(ob)); err != nil {
		t.Fatal(err)
	}
	lse = make([]float32, nL)
	if err := cuda.DtoH(lse, cuda.DevicePtr(lb)); err != nil {
		t.Fatal(err)
	}
	o = make([]float32, nO)
	for i, x := range oh {
		o[i] = half.BF16ToF32(x)
	}
	return o, lse
}
