package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac"
)

// pagedFlags are fac run's paged-cache flags: a decoding call over a paged
// KV cache of random contents, shuffled pages and the given lengths.
type pagedFlags struct {
	pageSize  int
	cacheLens []int
}

func (p *pagedFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.IntVar(&p.pageSize, "page-size", 0, "paged KV cache (flash_fwd_paged + flash_fwd_combine): keys per page, 1 or a power of two such as 16 to 256")
	fs.IntSliceVar(&p.cacheLens, "cache-seqlens", nil, "paged: each sequence's cache length, comma-separated, one per --batch (default: --seqlen-k each)")
}

func (p *pagedFlags) on(cmd *cobra.Command) bool {
	return cmd.Flags().Changed("page-size") || cmd.Flags().Changed("cache-seqlens")
}

// pagedArgs are the run flags a paged run reads.
type pagedArgs struct {
	w       io.Writer
	opts    fac.Options
	sh      fac.Shape
	device  string
	bundles []string
	seed    uint64
	scale   float32
	noCheck bool
	tol     tolerance
	dtype   string
	sinks   []float32 // --sinks: per-head sink logits, or nil
}

// run is fac run over a paged cache, on the CPU device or the GPU: the
// pages of every sequence shuffled, the first page shared by the first two
// sequences where both reach past it, checked against the dense float64
// reference of each sequence's gathered pages.
func (p *pagedFlags) run(cmd *cobra.Command, a pagedArgs) error {
	if !cmd.Flags().Changed("page-size") {
		return fmt.Errorf("--cache-seqlens gives a paged cache's lengths: give --page-size N too")
	}
	if p.pageSize <= 0 {
		return fmt.Errorf("--page-size %d: want a positive number of keys per page (1, or a power of two such as 16 to 256)", p.pageSize)
	}
	// What the paged path does not take: say so rather than ignore it.
	for _, f := range []string{"q", "k", "v", "blockmask", "blockmask-mask", "backward", "aux", "scalar", "random-aux", "cu-seqlens-q", "cu-seqlens-k", "out", "lse-out"} {
		if fl := cmd.Flags().Lookup(f); fl != nil && fl.Changed {
			return fmt.Errorf("--%s does not work with --page-size yet", f)
		}
	}
	sh := a.sh
	lens := make([]int32, sh.Batch)
	for b := range lens {
		lens[b] = int32(sh.SeqK)
	}
	if p.cacheLens != nil {
		if len(p.cacheLens) != sh.Batch {
			return fmt.Errorf("--cache-seqlens has %d lengths: want one per sequence (--batch %d)", len(p.cacheLens), sh.Batch)
		}
		for b, n := range p.cacheLens {
			if n < 0 || n > 1<<30 {
				return fmt.Errorf("--cache-seqlens: length %d of sequence %d: want 0 to 2^30", n, b)
			}
			lens[b] = int32(n)
		}
	}
	rng := rand.New(rand.NewPCG(a.seed, a.seed^0x9e3779b97f4a7c15))
	in, numPages := pagedCache(rng, lens, p.pageSize)
	ps := fac.PagedShape{Batch: sh.Batch, Heads: sh.Heads, KVHeads: sh.KV(), SeqQ: sh.SeqQ, PageSize: p.pageSize}
	in.Scale = a.scale
	in.Sinks = a.sinks
	in.Q = tensorArg(nil, sh.Batch*sh.Heads*sh.SeqQ*sh.Dim, rng)
	in.KCache = tensorArg(nil, numPages*p.pageSize*sh.KV()*sh.Dim, rng)
	in.VCache = tensorArg(nil, numPages*p.pageSize*sh.KV()*sh.VDim(), rng)
	t0 := time.Now()
	fwd, err := fac.CompileForward(a.opts, sh.Dim)
	if err != nil {
		return err
	}
	maxLen := 0
	for _, n := range lens {
		maxLen = max(maxLen, int(n))
	}
	w := a.w
	var gpu *fac.CUDA
	sms := 0
	if a.device == "cuda" {
		if gpu, err = openGPU(a.bundles); err != nil {
			return err
		}
		sms = gpu.SMs()
		if fb := fac.ArchFallback(gpu.Arch); fb != "" {
			fmt.Fprintf(w, "note: %s\n", fb)
		}
	}
	plan, err := fwd.PagedPlan(ps, maxLen, sms)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "kernel flash_fwd_paged mask=%s score=%s dtype=%s on %s\n", modName(fwd.Mask()), modName(fwd.Score()), a.dtype, a.device)
	fmt.Fprintf(w, "paged: B=%d H=%d Hkv=%d Sq=%d D=%d%s, %d pages of %d keys (shuffled), cache lengths %v\n",
		sh.Batch, sh.Heads, sh.KV(), sh.SeqQ, sh.Dim, dvNote(sh), numPages, p.pageSize, lens)
	fmt.Fprintf(w, "decoding: %s\n", plan)
	var o, lse []float32
	if gpu != nil {
		o, lse, err = fwd.RunPagedCUDA(gpu, in, ps)
	} else {
		o, lse, err = fwd.RunPagedCPU(in, ps)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "compile and run %.1f ms\n", ms(time.Since(t0)))
	if a.noCheck {
		fmt.Fprintln(w, "check skipped (--no-check): no float64 reference computed, the output is unchecked")
		return nil
	}
	return checkAgainst(w, o, lse, func() ([]float64, []float64, error) { return fwd.PagedReference(in, ps) }, a.tol, a.dtype)
}

// pagedCache is a page table for sequences of lengths lens in pages of
// pageSize keys, in a shuffled order, the first two sequences sharing
// their first page where both fill it; it returns the number of pages.
func pagedCache(rng *rand.Rand, lens []int32, pageSize int) (fac.PagedInputs, int) {
	maxPages := 1
	for _, n := range lens {
		maxPages = max(maxPages, (int(n)+pageSize-1)/pageSize)
	}
	table := make([]int32, len(lens)*maxPages)
	next := int32(0)
	for b, n := range lens {
		for j := range (int(n) + pageSize - 1) / pageSize {
			if b == 1 && j == 0 && int(min(n, lens[0])) >= pageSize {
				table[maxPages] = table[0]
				continue
			}
			table[b*maxPages+j] = next
			next++
		}
	}
	numPages := max(int(next), 1)
	perm := rng.Perm(numPages)
	for i, pg := range table {
		table[i] = int32(perm[pg])
	}
	return fac.PagedInputs{PageTable: table, CacheSeqlens: lens}, numPages
}
