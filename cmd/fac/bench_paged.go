package main

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/fac-compiler/fac"
)

// checkBenchPageSizes checks fac bench's --page-size before a GPU is
// looked for: positive sizes, with --decode, and not with a pass other
// than the forward (other).
func checkBenchPageSizes(sizes []int, decode, other bool) error {
	if len(sizes) == 0 {
		return nil
	}
	for _, n := range sizes {
		if n < 1 {
			return fmt.Errorf("--page-size %d: want positive numbers of keys per page (1, or a power of two such as 16 to 256)", n)
		}
	}
	if !decode || other {
		return fmt.Errorf("--page-size %v times paged decoding beside the dense rows: give --decode (no --backward, --step or --varlen-len)", sizes)
	}
	return nil
}

// benchPaged times the forward call of shape sh over a paged KV cache, one
// row per page size: every sequence sh.SeqK long, its pages in a shuffled
// order. pairs are the dense row's kept pairs (the same: the mods see
// logical positions). The cache's contents are made once and read in each
// page size's layout.
func benchPaged(gpu *fac.CUDA, opts fac.Options, sh fac.Shape, pageSizes []int, pairs int64, warmup, reps int) ([]benchResult, error) {
	fwd, err := fac.CompileForward(opts, sh.Dim)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(sh.SeqK), 7))
	randn := normals(rng)
	slots := 0 // keys the largest layout holds
	for _, ps := range pageSizes {
		slots = max(slots, sh.Batch*ceilDiv(sh.SeqK, ps)*ps)
	}
	q, kc, vc := randn(sh.Batch*sh.Heads*sh.SeqQ*sh.Dim), randn(slots*sh.KV()*sh.Dim), randn(slots*sh.KV()*sh.VDim())
	lens := make([]int32, sh.Batch)
	for b := range lens {
		lens[b] = int32(sh.SeqK)
	}
	var rows []benchResult
	for _, ps := range pageSizes {
		per := ceilDiv(sh.SeqK, ps) // pages a sequence
		numPages := sh.Batch * per
		perm := rng.Perm(numPages)
		table := make([]int32, numPages)
		for i := range table {
			table[i] = int32(perm[i])
		}
		in := fac.PagedInputs{Q: q, KCache: kc[:numPages*ps*sh.KV()*sh.Dim], VCache: vc[:numPages*ps*sh.KV()*sh.VDim()], PageTable: table, CacheSeqlens: lens}
		shape := fac.PagedShape{Batch: sh.Batch, Heads: sh.Heads, KVHeads: sh.KV(), SeqQ: sh.SeqQ, PageSize: ps}
		plan, err := fwd.PagedPlan(shape, sh.SeqK, gpu.SMs())
		if err != nil {
			return nil, err
		}
		times, err := fwd.BenchPagedCUDA(gpu, in, shape, warmup, reps)
		if err != nil {
			return nil, fmt.Errorf("page size %d: %w", ps, err)
		}
		sorted := slices.Clone(times)
		slices.Sort(sorted)
		med := sorted[len(sorted)/2]
		tf := matmulFlops("forward", sh) * float64(pairs) * float64(sh.Batch*sh.Heads) / (med * 1e-3) / 1e12
		rows = append(rows, benchResult{Pass: "forward paged", Mask: opts.Mask, SeqLen: sh.SeqK, SeqLenQ: sh.SeqQ, SeqLenK: sh.SeqK, Batch: sh.Batch,
			Heads: sh.Heads, KVHeads: sh.KV(), Dim: sh.Dim, DimV: sh.DimV, DType: opts.DType, Pairs: pairs, MedianMs: med, TFLOPS: tf,
			KVTBps: kvTBps(sh, opts.DType, med), NumSplits: plan.NumSplits, PackGQA: plan.Pack, PageSize: ps, TimesMs: times})
	}
	return rows, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
