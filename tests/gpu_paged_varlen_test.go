//go:build gpu

package tests

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// raggedSample are the rows a GPU ragged test checks against the float64
// reference: every query of a sequence of at most 8 queries, every
// step-th of a longer one and its last, each at every head.
func raggedSample(cu []int32, heads, step int) []fac.RefRow {
	var rows []fac.RefRow
	for b := 0; b+1 < len(cu); b++ {
		n := int(cu[b+1] - cu[b])
		for i := 0; i < n; i++ {
			if n <= 8 || i%step == 0 || i == n-1 {
				for h := range heads {
					rows = append(rows, fac.RefRow{B: b, H: h, I: i})
				}
			}
		}
	}
	return rows
}

// checkRaggedRows checks a ragged call's O [total_q, H, dv] and LSE [H,
// total_q]: no NaN anywhere (the outputs were poisoned before the launch,
// so a row no kernel writes shows), and rows against
// PagedVarlenReferenceRows.
func checkRaggedRows(t *testing.T, name string, fwd *fac.Forward, in fac.PagedVarlenInputs, ps fac.PagedVarlenShape, o, lse []float32, dv int, rows []fac.RefRow) {
	t.Helper()
	for i, x := range o {
		if math.IsNaN(float64(x)) {
			t.Fatalf("%s: O[%d] is NaN", name, i)
		}
	}
	for i, x := range lse {
		if math.IsNaN(float64(x)) {
			t.Fatalf("%s: LSE[%d] is NaN", name, i)
		}
	}
	ro, rlse, err := fwd.PagedVarlenReferenceRows(in, ps, rows)
	if err != nil {
		t.Fatal(err)
	}
	cu, h := in.CuSeqlensQ, ps.Heads
	totalQ := int(cu[len(cu)-1])
	so, slse := make([]float32, len(rows)*dv), make([]float32, len(rows))
	for n, r := range rows {
		tok := int(cu[r.B]) + r.I
		copy(so[n*dv:][:dv], o[(tok*h+r.H)*dv:][:dv])
		slse[n] = lse[r.H*totalQ+tok]
	}
	checkFlat(t, name, so, slse, ro, rlse, gpuTol("bf16"))
}

// TestGPUPagedVarlenMatchesReference runs flash_fwd_paged_varlen +
// flash_fwd_combine on the GPU against the float64 reference: one ragged
// batch of decode rows (caches of 3000, 1, 256, 4097 keys), prefill chunks
// of 300 queries (over 1700 keys, sharing sequence 0's leading pages), of
// 77 (a whole sequence) and of 5, and a sequence with no queries; page
// sizes 1, 16 and 256 (keys gathered, 4 pages a tile, a page a tile) at
// D = 128, 16 at D = 64; the ragged suite's masks (causal both ways, a
// window with 3 keys ahead, decoding's window, a look-back per head, which
// unpacks), bf16, GQA 4, splits auto, 3 and 1. RunPagedVarlenCUDA poisons
// the outputs and the split workspace (NaN) before the launch.
func TestGPUPagedVarlenMatchesReference(t *testing.T) {
	gpu := openTestGPU(t)
	t.Logf("device %s (%s), %d SMs", gpu.Name, gpu.Arch, gpu.SMs())
	qlens, lens := []int32{1, 300, 1, 1, 0, 77, 1, 5}, []int32{3000, 1700, 1, 256, 65, 77, 4097, 17}
	i := 0
	for _, d := range pagedSuiteDims {
		pageSizes := []int{1, 16, 256}
		if d == 64 {
			pageSizes = []int{16}
		}
		for _, m := range raggedSuiteMasks {
			for _, pageSize := range pageSizes {
				i++
				fwd, err := fac.CompileForward(pagedOpts(m, "bf16", []int{0, 3, 1}[i%3]), d)
				if err != nil {
					t.Fatal(err)
				}
				in, ps := raggedBatch(qlens, lens, pageSize, 8, 2, d, uint64(i))
				plan, err := fwd.PagedVarlenPlan(ps, in.CuSeqlensQ, lens, gpu.SMs())
				if err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("d%d/%s/page%d/splits=%d,pack=%d,tile_pages=%d", d, m, pageSize, plan.NumSplits, plan.Pack, plan.TilePages)
				o, lse, err := fwd.RunPagedVarlenCUDA(gpu, in, ps)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkRaggedRows(t, name, fwd, in, ps, o, lse, d, raggedSample(in.CuSeqlensQ, 8, 13))
			}
		}
	}
}

// TestGPUPagedVarlenLaunch runs a ragged batch with the decode anchors'
// heads (32 query heads, 8 kv heads, D = 128, bf16, causal) through
// LaunchPagedVarlenCUDA on caller-owned buffers, with a workspace from
// NewPagedVarlenWorkspace and without one, outputs poisoned (NaN) before
// each launch, against the float64 reference: 12 decode rows over caches
// of 1 to 8192 keys and a 700-query chunk over 2000 keys, in shuffled
// 16-key pages. A workspace too small for the plan is refused.
func TestGPUPagedVarlenLaunch(t *testing.T) {
	gpu := openTestGPU(t)
	fwd, err := fac.CompileForward(pagedOpts("causal", "bf16", 0), 128)
	if err != nil {
		t.Fatal(err)
	}
	qlens, lens := []int32{700}, []int32{2000}
	for i := range 12 {
		qlens, lens = append(qlens, 1), append(lens, int32(1+i*8191/11))
	}
	in, ps := raggedBatch(qlens, lens, 16, 32, 8, 128, 29)
	plan, err := fwd.PagedVarlenPlan(ps, in.CuSeqlensQ, lens, gpu.SMs())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan: %v", plan)
	q, k, v := bf16s(in.Q), bf16s(in.KCache), bf16s(in.VCache)
	totalQ := int(in.CuSeqlensQ[len(in.CuSeqlensQ)-1])
	dev := fac.PagedVarlenDeviceTensors{Q: toDevice(t, q), KCache: toDevice(t, k), VCache: toDevice(t, v),
		PageTable: toDevice(t, in.PageTable), NumPages: len(in.KCache) / (16 * 8 * 128), MaxPages: len(in.PageTable) / ps.Batch,
		CuSeqlensQ: in.CuSeqlensQ, CacheSeqlens: lens}
	ws, err := fwd.NewPagedVarlenWorkspace(gpu, ps, totalQ, 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Free()
	rows := raggedSample(in.CuSeqlensQ, 32, 37)
	for _, w := range []*fac.ForwardWorkspace{ws, nil} {
		dev.O, dev.LSE, dev.Workspace = poisoned(t, len(q)), poisoned(t, 2*totalQ*32), w
		if err := fwd.LaunchPagedVarlenCUDA(gpu, dev, ps, cuda.Stream{}); err != nil {
			t.Fatal(err)
		}
		got, lse := launchOutputs(t, gpu, dev.O, len(q), dev.LSE, totalQ*32)
		checkRaggedRows(t, fmt.Sprintf("LaunchPagedVarlenCUDA, workspace given: %v", w != nil), fwd, in, ps, got, lse, 128, rows)
	}
	small, err := fwd.NewPagedVarlenWorkspace(gpu, fac.PagedVarlenShape{Batch: 1, Heads: 32, KVHeads: 8, PageSize: 16}, 1, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Free()
	dev.Workspace = small
	if err := fwd.LaunchPagedVarlenCUDA(gpu, dev, ps, cuda.Stream{}); err == nil {
		t.Error("a workspace for one query was taken for a batch of 712")
	}
}

// TestGPUPagedVarlenMixedBatch is issue 45's mixed batch at a quarter of
// its size, for correctness: 16 decode rows and 2 prefill chunks of 512
// queries over caches of 1024 to 8192 keys in one launch (32 query heads,
// 8 kv heads, D = 128, bf16, causal, 16-key pages), checked on sampled
// rows; it logs the launch's time beside its decode rows alone and its
// chunks alone (fac bench --ragged times the full size).
func TestGPUPagedVarlenMixedBatch(t *testing.T) {
	gpu := openTestGPU(t)
	fwd, err := fac.CompileForward(pagedOpts("causal", "bf16", 0), 128)
	if err != nil {
		t.Fatal(err)
	}
	var qlens, lens []int32
	for i := range 18 {
		q := int32(1)
		if i == 4 || i == 13 {
			q = 512
		}
		qlens, lens = append(qlens, q), append(lens, int32(1024+i*(8192-1024)/17))
	}
	in, ps := raggedBatch(qlens, lens, 16, 32, 8, 128, 45)
	o, lse, err := fwd.RunPagedVarlenCUDA(gpu, in, ps)
	if err != nil {
		t.Fatal(err)
	}
	checkRaggedRows(t, "mixed batch", fwd, in, ps, o, lse, 128, raggedSample(in.CuSeqlensQ, 32, 97))
	median := func(keep func(q int32) bool) float64 {
		sub := in
		sub.CuSeqlensQ, sub.CacheSeqlens, sub.PageTable = []int32{0}, nil, nil
		maxPages := len(in.PageTable) / ps.Batch
		var q []float32
		for b, n := range qlens {
			if keep(n) {
				sub.CuSeqlensQ = append(sub.CuSeqlensQ, sub.CuSeqlensQ[len(sub.CuSeqlensQ)-1]+n)
				sub.CacheSeqlens = append(sub.CacheSeqlens, lens[b])
				sub.PageTable = append(sub.PageTable, in.PageTable[b*maxPages:][:maxPages]...)
				q = append(q, in.Q[int(in.CuSeqlensQ[b])*32*128:][:int(n)*32*128]...)
			}
		}
		sub.Q = q
		sps := ps
		sps.Batch = len(sub.CacheSeqlens)
		times, err := fwd.BenchPagedVarlenCUDA(gpu, sub, sps, 3, 10)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(times)
		return times[len(times)/2]
	}
	all := median(func(int32) bool { return true })
	dec, pre := median(func(q int32) bool { return q == 1 }), median(func(q int32) bool { return q > 1 })
	t.Logf("one launch %.3f ms; decode rows alone %.3f + chunks alone %.3f = %.3f ms (ratio %.3f)", all, dec, pre, dec+pre, all/(dec+pre))
}
