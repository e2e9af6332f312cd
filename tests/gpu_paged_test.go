//go:build gpu

package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// TestGPUPagedMatchesReference runs flash_fwd_paged + flash_fwd_combine on
// the GPU against PagedReference (each sequence's pages gathered, the mods
// at logical positions): page sizes 1, 16, 32, 64 and 256, pages shuffled and
// shared between two sequences, unequal lengths (0, 1, a page boundary,
// thousands), bottom-right causal, a top-left sliding window (most splits
// keep no block), decoding's window at the end of each cache and a
// look-back per head (packing gives way), bf16, GQA 4, Sq 1 and 3, head
// dims 64 and 128, auto, 3 and 1 splits; keys gathered by page at 1, 4
// and 2 pages per 64-key tile at 16 and 32, a page per tile from 64, and
// 16-key tiles on 16-key pages
// (causal_bottom_right, D = 128). RunPagedCUDA poisons the outputs
// and the split workspace (NaN) before the launch, so a row or split no
// kernel writes shows.
func TestGPUPagedMatchesReference(t *testing.T) {
	gpu := openTestGPU(t)
	t.Logf("device %s (%s), %d SMs", gpu.Name, gpu.Arch, gpu.SMs())
	lens := []int32{3000, 1700, 0, 1, 256, 65}
	i := 0
	run := func(opts fac.Options, d, pageSize, sq int) {
		i++
		fwd, err := fac.CompileForward(opts, d)
		if err != nil {
			t.Fatal(err)
		}
		in, ps := pagedCache(lens, pageSize, 8, 2, sq, d, uint64(i))
		plan, err := fwd.PagedPlan(ps, 3000, gpu.SMs())
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("d%d/%s/page%d/sq%d/splits=%d,pack=%d,BLOCK_N=%d,tile_pages=%d", d, opts.Mask, pageSize, sq,
			plan.NumSplits, plan.Pack, plan.BlockN, plan.TilePages)
		o, lse, err := fwd.RunPagedCUDA(gpu, in, ps)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ro, rlse, err := fwd.PagedReference(in, ps)
		if err != nil {
			t.Fatal(err)
		}
		checkFlat(t, name, o, lse, ro, rlse, gpuTol("bf16"))
	}
	for _, d := range pagedSuiteDims {
		for _, m := range pagedSuiteMasks {
			for _, pageSize := range []int{1, 16, 32, 64, 256} {
				for _, sq := range []int{1, 3} {
					if testing.Short() && d == 64 && sq != 1 {
						continue
					}
					run(pagedOpts(m, "bf16", []int{0, 3, 1}[i%3]), d, pageSize, sq)
				}
			}
		}
	}
	for _, sq := range []int{1, 3} {
		opts := pagedOpts("causal_bottom_right", "bf16", 0)
		opts.DecodeConsts = pagedTile16
		run(opts, 128, 16, sq)
	}
}

// TestGPUPagedLaunch runs the decode anchors' heads (32 query heads, 8 kv
// heads, D = 128, Sq = 1, bf16) through LaunchPagedCUDA on caller-owned
// buffers, with a workspace made once and without one, on caches of
// 8192, 0 and 777 keys in shuffled 16-key pages, outputs poisoned (NaN)
// before each launch, against PagedReference.
func TestGPUPagedLaunch(t *testing.T) {
	gpu := openTestGPU(t)
	fwd, err := fac.CompileForward(pagedOpts("causal_bottom_right", "bf16", 0), 128)
	if err != nil {
		t.Fatal(err)
	}
	in, ps := pagedCache([]int32{8192, 0, 777}, 16, 32, 8, 1, 128, 23)
	plan, err := fwd.PagedPlan(ps, 8192, gpu.SMs())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan: %v", plan)
	q, k, v := bf16s(in.Q), bf16s(in.KCache), bf16s(in.VCache)
	dev := fac.PagedDeviceTensors{Q: toDevice(t, q), KCache: toDevice(t, k), VCache: toDevice(t, v),
		PageTable: toDevice(t, in.PageTable), NumPages: len(in.KCache) / (16 * 8 * 128), MaxPages: len(in.PageTable) / ps.Batch,
		CacheSeqlens: in.CacheSeqlens}
	ws, err := fwd.NewPagedWorkspace(gpu, ps, 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Free()
	ro, rlse, err := fwd.PagedReference(in, ps)
	if err != nil {
		t.Fatal(err)
	}
	rows := ps.Batch * ps.Heads * ps.SeqQ
	for _, w := range []*fac.ForwardWorkspace{ws, nil} {
		dev.O, dev.LSE, dev.Workspace = poisoned(t, len(q)), poisoned(t, 2*rows), w
		if err := fwd.LaunchPagedCUDA(gpu, dev, ps, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		got, lse := launchOutputs(t, gpu, dev.O, len(q), dev.LSE, rows)
		checkFlat(t, fmt.Sprintf("LaunchPagedCUDA, workspace given: %v", w != nil), got, lse, ro, rlse, gpuTol("bf16"))
	}
	// A workspace too small for the plan is refused, naming the sizes.
	small, err := fwd.NewPagedWorkspace(gpu, fac.PagedShape{Batch: 1, Heads: 32, KVHeads: 8, SeqQ: 1, PageSize: 16}, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Free()
	dev.Workspace = small
	if err := fwd.LaunchPagedCUDA(gpu, dev, ps, cuda.Stream{}); err == nil {
		t.Error("a workspace for one sequence of 16 keys was taken for 3 sequences of up to 8192")
	}
	times, err := fwd.BenchPagedCUDA(gpu, in, ps, 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	best := math.Inf(1)
	for _, x := range times {
		best = math.Min(best, x)
	}
	t.Logf("B=3 H=32 Hkv=8 Sq=1, caches 8192/0/777 in 16-key pages: best %.3f ms, %.2f TB/s of K and V", best, float64(2*(8192+777)*8*128*2)/best/1e9)
}

// toDevice copies xs to a device buffer freed when the test ends.
// bf16s are xs rounded to bf16, as a device tensor of the kernels' DType
// holds them.
func bf16s(xs []float32) []uint16 {
	out := make([]uint16, len(xs))
	for i, x := range xs {
		out[i] = half.F32ToBF16(x)
	}
	return out
}

// poisoned is a device buffer of n 16-bit words, all ones: NaN in bf16,
// and in f32 two words at a time, so that an element no kernel writes
// shows.
func poisoned(t *testing.T, n int) uintptr {
	t.Helper()
	p := make([]uint16, n)
	for i := range p {
		p[i] = 0xffff
	}
	return toDevice(t, p)
}

// launchOutputs waits for gpu and reads back O (n bf16 values at o) and
// LSE (m f32 values at lse).
func launchOutputs(t *testing.T, gpu *fac.CUDA, o uintptr, n int, lse uintptr, m int) ([]float32, []float32) {
	t.Helper()
	if err := gpu.Ctx.Synchronize(); err != nil {
		t.Fatal(err)
	}
	ob := make([]uint16, n)
	if err := cuda.DtoH(ob, cuda.DevicePtr(o)); err != nil {
		t.Fatal(err)
	}
	lf := make([]float32, m)
	if err := cuda.DtoH(lf, cuda.DevicePtr(lse)); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	for i, x := range ob {
		got[i] = half.BF16ToF32(x)
	}
	return got, lf
}

func toDevice[T any](t *testing.T, xs []T) uintptr {
	t.Helper()
	p, err := cuda.MemAlloc(max(len(xs)*int(unsafe.Sizeof(xs[0])), 4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cuda.MemFree(p) })
	if err := cuda.HtoD(p, xs); err != nil {
		t.Fatal(err)
	}
	return uintptr(p)
}

// appendGPUCases are TestGPUPagedAppend's (bf16, the paged suite's masks
// and head dims, so the suite bundle holds their kernels): both rotary
// forms over all or part of the head dim, and none; lengths 0, 1, a page
// boundary and thousands; appends inside a page, across page boundaries
// and longer than a kv_append tile; page sizes 1, 16, 64 and 256; GQA 4.
var appendGPUCases = []appendCase{
	{mask: "causal_bottom_right", d: 128, pageSize: 16, sq: 1, old: []int32{3000, 1700, 0, 1, 256, 14}, rotary: fac.RotaryNeoX, dtype: "bf16"},
	{mask: "causal_bottom_right", d: 128, pageSize: 64, sq: 3, old: []int32{3000, 1700, 0, 1, 256, 63}, rotary: fac.RotaryGPTJ, rd: 64, dtype: "bf16"},
	{mask: "paged_window", d: 64, pageSize: 1, sq: 2, old: []int32{3000, 1700, 0, 1, 256, 14}, rotary: fac.RotaryGPTJ, dtype: "bf16", splits: 3},
	{mask: "causal_bottom_right", d: 64, pageSize: 16, sq: 20, old: []int32{14, 16, 0}, rotary: fac.RotaryNeoX, rd: 32, dtype: "bf16"},
	{mask: "sliding_window(20, 3)", d: 128, pageSize: 256, sq: 2, old: []int32{3000, 1700, 0, 1, 256, 255}, dtype: "bf16"},
}

// TestGPUPagedAppend runs appendGPUCases through RunPagedCUDA (kv_append,
// then flash_fwd_paged and flash_fwd_combine over the grown caches, the
// caches read back from the device) and checks O, LSE, the lengths and
// both caches (checkAppend: the appended rows against the float64
// reference, every other element bit-identical).
func TestGPUPagedAppend(t *testing.T) {
	gpu := openTestGPU(t)
	for i, c := range appendGPUCases {
		fwd, err := fac.CompileForward(c.opts(), c.d)
		if err != nil {
			t.Fatal(err)
		}
		in, ps := appendInputs(c, 8, 2, uint64(60+i))
		before := beforeCall(in)
		o, lse, err := fwd.RunPagedCUDA(gpu, in, ps)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		checkAppend(t, c.String(), fwd, before, in, ps, o, lse, gpuTol("bf16"))
	}
}

// TestGPUPagedAppendLaunch decodes two steps through LaunchPagedCUDA on
// caller-owned buffers (32 query heads, 8 kv heads, D = 128, Sq = 1, bf16,
// 16-key shuffled pages, caches of 8192, 0 and 777 keys, GPT-NeoX rotary),
// each appending a token and growing the host lengths in place, with one
// workspace made by NewPagedWorkspace; then a launch that appends nothing
// with the same workspace reads the caller's q over the grown caches.
// Outputs are poisoned (NaN) before each launch; each step is checked
// against the float64 references of the inputs as they were before it.
func TestGPUPagedAppendLaunch(t *testing.T) {
	gpu := openTestGPU(t)
	c := appendCase{mask: "causal_bottom_right", d: 128, pageSize: 16, sq: 1, old: []int32{8192, 0, 777}, rotary: fac.RotaryNeoX, dtype: "bf16"}
	fwd, err := fac.CompileForward(c.opts(), c.d)
	if err != nil {
		t.Fatal(err)
	}
	// Pages for two appended tokens: the first step's inputs, with the
	// lengths one short.
	two := c
	two.sq = 2
	in, ps := appendInputs(two, 32, 8, 71)
	ps.SeqQ = 1
	rows := ps.Batch * ps.Heads
	bf := func(xs []float32) []uint16 {
		out := make([]uint16, len(xs))
		for i, x := range xs {
			out[i] = half.F32ToBF16(x)
		}
		return out
	}
	back := func(p uintptr, n int) []float32 {
		b := make([]uint16, n)
		if err := cuda.DtoH(b, cuda.DevicePtr(p)); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, n)
		for i, x := range b {
			out[i] = half.BF16ToF32(x)
		}
		return out
	}
	dev := fac.PagedDeviceTensors{KCache: toDevice(t, bf(in.KCache)), VCache: toDevice(t, bf(in.VCache)),
		PageTable: toDevice(t, in.PageTable), NumPages: len(in.KCache) / (16 * 8 * 128), MaxPages: len(in.PageTable) / ps.Batch,
		CacheSeqlens: slices.Clone(in.CacheSeqlens), Rotary: fac.RotaryNeoX,
		RotaryCos: toDevice(t, bf(in.RotaryCos)), RotarySin: toDevice(t, bf(in.RotarySin)), RotaryPositions: len(in.RotaryCos) / 64}
	ws, err := fwd.NewPagedWorkspace(gpu, ps, 8194)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Free()
	dev.Workspace = ws
	rng := rand.New(rand.NewPCG(72, 1))
	randn := normals(rng)
	round := func(xs []float32) []float32 { return roundInputs(fac.Inputs{Q: xs}, "bf16").Q }
	poison := make([]uint16, 2*rows*128)
	for i := range poison {
		poison[i] = 0xffff // NaN in bf16 and in f32
	}
	launch := func(name string, in fac.PagedInputs, appends bool) ([]float32, []float32) {
		dev.Q, dev.O, dev.LSE = toDevice(t, bf(in.Q)), toDevice(t, poison[:rows*128]), toDevice(t, poison[:2*rows])
		dev.KNew, dev.VNew = 0, 0
		if appends {
			dev.KNew, dev.VNew = toDevice(t, bf(in.KNew)), toDevice(t, bf(in.VNew))
		}
		if err := fwd.LaunchPagedCUDA(gpu, dev, ps, cuda.Stream{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := gpu.Ctx.Synchronize(); err != nil {
			t.Fatal(err)
		}
		lse := make([]float32, rows)
		if err := cuda.DtoH(lse, cuda.DevicePtr(dev.LSE)); err != nil {
			t.Fatal(err)
		}
		return back(dev.O, rows*128), lse
	}
	for step := range 2 {
		name := fmt.Sprintf("step %d", step)
		in.Q = round(randn(rows * 128))
		in.KNew, in.VNew = round(randn(ps.Batch*8*128)), round(randn(ps.Batch*8*128))
		before := beforeCall(in)
		o, lse := launch(name, in, true)
		in.KCache, in.VCache = back(dev.KCache, len(in.KCache)), back(dev.VCache, len(in.VCache))
		in.CacheSeqlens = slices.Clone(dev.CacheSeqlens)
		checkAppend(t, name, fwd, before, in, ps, o, lse, gpuTol("bf16"))
	}
	plain := in
	plain.KNew, plain.VNew, plain.Rotary, plain.RotaryCos, plain.RotarySin = nil, nil, fac.RotaryNone, nil, nil
	dev.Rotary, dev.RotaryCos, dev.RotarySin = fac.RotaryNone, 0, 0
	plain.Q = round(randn(rows * 128))
	o, lse := launch("no append", plain, false)
	ro, rlse, err := fwd.PagedReference(plain, ps)
	if err != nil {
		t.Fatal(err)
	}
	checkFlat(t, "no append, workspace of appending launches", o, lse, ro, rlse, gpuTol("bf16"))
	if !slices.Equal(dev.CacheSeqlens, []int32{8194, 2, 779}) {
		t.Errorf("lengths %v after two appending steps and a plain one, want [8194 2 779]", dev.CacheSeqlens)
	}
	// What the append costs a step: the same attention timed with and
	// without it (BenchPagedCUDA writes the same rows at every launch).
	appending := in
	appending.CacheSeqlens = []int32{8192, 1, 777}
	appending.KNew, appending.VNew = round(randn(ps.Batch*8*128)), round(randn(ps.Batch*8*128))
	plain.CacheSeqlens = []int32{8193, 2, 778}
	for _, c := range []struct {
		name string
		in   fac.PagedInputs
	}{{"plain", plain}, {"append + rotary", appending}} {
		times, err := fwd.BenchPagedCUDA(gpu, c.in, ps, 5, 50)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(times)
		t.Logf("%s: B=3 H=32 Hkv=8 Sq=1 D=128, caches 8193/2/778 after the step: median %.1f µs", c.name, 1000*times[len(times)/2])
	}
}
