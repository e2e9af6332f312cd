package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac"
)

// pagedFlags are fac run's paged-cache flags: a decoding call over a paged
// KV cache of random contents, shuffled pages and the given lengths.
type pagedFlags struct {
	pageSize  int
	cacheLens []int
	appendN   int
	rotary    string
	rotaryDim int
	seqlensQ  []int
}

func (p *pagedFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.IntVar(&p.pageSize, "page-size", 0, "paged KV cache (flash_fwd_paged + flash_fwd_combine): keys per page, 1 or a power of two such as 16 to 256")
	fs.IntSliceVar(&p.cacheLens, "cache-seqlens", nil, "paged: each sequence's cache length, comma-separated, one per --batch (default: --seqlen-k each)")
	fs.IntVar(&p.appendN, "append", 0, "paged: append N new keys and values to each sequence (kv_append) before attending; the query is those N positions (--seqlen-q N)")
	fs.StringVar(&p.rotary, "rotary", "none", "paged --append: rotary embedding of q and the new keys at their positions: neox (half-split pairs), gptj (interleaved pairs) or none")
	fs.IntVar(&p.rotaryDim, "rotary-dim", 0, "paged --append --rotary: the rotated columns, even, at most --dim (default: all of --dim)")
	fs.IntSliceVar(&p.seqlensQ, "seqlens-q", nil, "paged: each sequence's query count, comma-separated, one per --batch: a ragged batch (flash_fwd_paged_varlen), decode rows (1) and prefill chunks in one launch, each sequence's queries the last positions of its cache")
}

func (p *pagedFlags) on(cmd *cobra.Command) bool {
	for _, f := range []string{"page-size", "cache-seqlens", "append", "rotary", "rotary-dim", "seqlens-q"} {
		if cmd.Flags().Changed(f) {
			return true
		}
	}
	return false
}

// appendFlags reads --append, --rotary and --rotary-dim: the rows to
// append (0: none) and the rotary form, and sets the query length to the
// appended one.
func (p *pagedFlags) appendFlags(cmd *cobra.Command, sh *fac.Shape) (fac.RotaryForm, error) {
	fl := cmd.Flags()
	form, err := fac.ParseRotaryForm(p.rotary)
	if err != nil {
		return 0, fmt.Errorf("--rotary %s: want neox (half-split pairs), gptj (interleaved pairs) or none", p.rotary)
	}
	if !fl.Changed("append") {
		for _, f := range []string{"rotary", "rotary-dim"} {
			if fl.Changed(f) {
				return 0, fmt.Errorf("--%s rotates the keys --append N appends (and the query): give --append too", f)
			}
		}
		return form, nil
	}
	if p.appendN < 1 || p.appendN > 1<<20 {
		return 0, fmt.Errorf("--append %d: want 1 to 2^20 new keys a sequence", p.appendN)
	}
	if fl.Changed("seqlen-q") && sh.SeqQ != p.appendN {
		return 0, fmt.Errorf("--append %d with --seqlen-q %d: the query is the appended positions, so --seqlen-q must be %d (or left out)", p.appendN, sh.SeqQ, p.appendN)
	}
	sh.SeqQ = p.appendN
	if fl.Changed("rotary-dim") && form == fac.RotaryNone {
		return 0, fmt.Errorf("--rotary-dim %d without --rotary: give --rotary neox or gptj", p.rotaryDim)
	}
	if p.rotaryDim < 0 || p.rotaryDim%2 != 0 || p.rotaryDim > sh.Dim {
		return 0, fmt.Errorf("--rotary-dim %d: want an even count of 2 to --dim %d", p.rotaryDim, sh.Dim)
	}
	return form, nil
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
	// fullCheck (--full-check): a ragged batch checks every row, however
	// many pairs.
	fullCheck bool
	tol       tolerance
	dtype     string
	sinks     []float32 // --sinks: per-head sink logits, or nil
}

// run is fac run over a paged cache, on the CPU device or the GPU: the
// pages of every sequence shuffled, the first page shared by the first two
// sequences where both reach past it, checked against the dense float64
// reference of each sequence's gathered pages.
func (p *pagedFlags) run(cmd *cobra.Command, a pagedArgs) error {
	if !cmd.Flags().Changed("page-size") {
		for _, f := range []string{"cache-seqlens", "append", "rotary", "rotary-dim", "seqlens-q"} {
			if cmd.Flags().Changed(f) {
				return fmt.Errorf("--%s is for a paged KV cache: give --page-size N too", f)
			}
		}
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
	lens, err := p.cacheSeqlens(sh)
	if err != nil {
		return err
	}
	if cmd.Flags().Changed("seqlens-q") {
		return p.runRagged(cmd, a, lens)
	}
	form, err := p.appendFlags(cmd, &sh)
	if err != nil {
		return err
	}
	// The pages hold the lengths after the append.
	final := slices.Clone(lens)
	for b := range final {
		final[b] += int32(p.appendN)
	}
	rng := rand.New(rand.NewPCG(a.seed, a.seed^0x9e3779b97f4a7c15))
	in, numPages := pagedCache(rng, final, lens, p.pageSize)
	ps := fac.PagedShape{Batch: sh.Batch, Heads: sh.Heads, KVHeads: sh.KV(), SeqQ: sh.SeqQ, PageSize: p.pageSize}
	in.CacheSeqlens = lens
	in.Scale = a.scale
	in.Sinks = a.sinks
	in.Q = tensorArg(nil, sh.Batch*sh.Heads*sh.SeqQ*sh.Dim, rng)
	in.KCache = tensorArg(nil, numPages*p.pageSize*sh.KV()*sh.Dim, rng)
	in.VCache = tensorArg(nil, numPages*p.pageSize*sh.KV()*sh.VDim(), rng)
	if p.appendN > 0 {
		in.KNew = tensorArg(nil, sh.Batch*sh.SeqQ*sh.KV()*sh.Dim, rng)
		in.VNew = tensorArg(nil, sh.Batch*sh.SeqQ*sh.KV()*sh.VDim(), rng)
		in.Rotary, in.RotaryDim = form, p.rotaryDim
		if form != fac.RotaryNone {
			in.RotaryCos, in.RotarySin = fac.RotaryTables(int(slices.Max(final)), cmp.Or(p.rotaryDim, sh.Dim), 10000)
		}
	}
	t0 := time.Now()
	fwd, err := fac.CompileForward(a.opts, sh.Dim)
	if err != nil {
		return err
	}
	maxLen := int(slices.Max(final))
	w := a.w
	gpu, sms, err := a.openDevice()
	if err != nil {
		return err
	}
	plan, err := fwd.PagedPlan(ps, maxLen, sms)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "kernel flash_fwd_paged mask=%s score=%s dtype=%s on %s\n", modName(fwd.Mask()), modName(fwd.Score()), a.dtype, a.device)
	fmt.Fprintf(w, "paged: B=%d H=%d Hkv=%d Sq=%d D=%d%s, %d pages of %d keys (shuffled), cache lengths %v\n",
		sh.Batch, sh.Heads, sh.KV(), sh.SeqQ, sh.Dim, dvNote(sh), numPages, p.pageSize, lens)
	before := in
	if p.appendN > 0 {
		rot := "no rotary"
		if form != fac.RotaryNone {
			rot = fmt.Sprintf("rotary %s over %d of %d dims", form, cmp.Or(p.rotaryDim, sh.Dim), sh.Dim)
		}
		fmt.Fprintf(w, "append: %d keys and values a sequence (%s), then attention over lengths %v\n", p.appendN, rot, final)
		plan.Append = true
		// The call updates the caches and lengths in place; the
		// references take them as they were.
		before.KCache, before.VCache, before.CacheSeqlens = slices.Clone(in.KCache), slices.Clone(in.VCache), slices.Clone(lens)
	}
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
	if p.appendN > 0 {
		fmt.Fprintf(w, "cache lengths now %v\n", in.CacheSeqlens)
	}
	if a.noCheck {
		fmt.Fprintln(w, "check skipped (--no-check): no float64 reference computed, the output is unchecked")
		return nil
	}
	if err := checkAgainst(w, o, lse, func() ([]float64, []float64, error) { return fwd.PagedReference(before, ps) }, a.tol, a.dtype); err != nil {
		return err
	}
	if p.appendN == 0 {
		return nil
	}
	return checkCache(w, fwd, before, in, ps, a.tol.o, a.dtype)
}

// openDevice opens the GPU where --device is cuda, noting an arch
// fallback on a.w, and gives its multiprocessors; nil and 0 for the CPU
// device.
func (a pagedArgs) openDevice() (*fac.CUDA, int, error) {
	if a.device != "cuda" {
		return nil, 0, nil
	}
	gpu, err := openGPU(a.bundles)
	if err != nil {
		return nil, 0, err
	}
	if fb := fac.ArchFallback(gpu.Arch); fb != "" {
		fmt.Fprintf(a.w, "note: %s\n", fb)
	}
	return gpu, gpu.SMs(), nil
}

// cacheSeqlens are --cache-seqlens, one per --batch, or --seqlen-k each.
func (p *pagedFlags) cacheSeqlens(sh fac.Shape) ([]int32, error) {
	lens := make([]int32, sh.Batch)
	for b := range lens {
		lens[b] = int32(sh.SeqK)
	}
	if p.cacheLens != nil {
		if len(p.cacheLens) != sh.Batch {
			return nil, fmt.Errorf("--cache-seqlens has %d lengths: want one per sequence (--batch %d)", len(p.cacheLens), sh.Batch)
		}
		for b, n := range p.cacheLens {
			if n < 0 || n > 1<<30 {
				return nil, fmt.Errorf("--cache-seqlens: length %d of sequence %d: want 0 to 2^30", n, b)
			}
			lens[b] = int32(n)
		}
	}
	return lens, nil
}

// checkCache compares the caches and lengths an appending call left (in)
// with PagedAppendReference of its inputs (before), within tol relative to
// the largest |ref|: the appended rows as the reference rotates them, the
// others as they were (in the dtype).
func checkCache(w io.Writer, fwd *fac.Forward, before, in fac.PagedInputs, ps fac.PagedShape, tol float64, dtype string) error {
	rk, rv, rlens, err := fwd.PagedAppendReference(before, ps)
	if err != nil {
		return err
	}
	if !slices.Equal(rlens, in.CacheSeqlens) {
		return fmt.Errorf("check FAILED: cache lengths %v after the call, want %v", in.CacheSeqlens, rlens)
	}
	var why []string
	for _, c := range []struct {
		name string
		got  []float32
		want []float64
	}{{"k_cache", in.KCache, rk}, {"v_cache", in.VCache, rv}} {
		maxAbs, maxRef := 0.0, 0.0
		for i, g := range c.got {
			maxRef = math.Max(maxRef, math.Abs(c.want[i]))
			if d := math.Abs(float64(g) - c.want[i]); d > maxAbs || math.IsNaN(d) {
				maxAbs = d
			}
		}
		fmt.Fprintf(w, "%s after the append: max |cache - ref| = %.3g, max |ref| = %.3g\n", c.name, maxAbs, maxRef)
		if !(maxAbs <= tol*math.Max(maxRef, 1)) {
			why = append(why, fmt.Sprintf("%s differs by %.3g", c.name, maxAbs))
		}
	}
	if len(why) > 0 {
		return fmt.Errorf("check FAILED against the float64 cache after the append (tolerance for %s: %.3g relative): %s", dtype, tol, strings.Join(why, "; "))
	}
	fmt.Fprintf(w, "cache check passed (tolerance for %s: %.3g relative)\n", dtype, tol)
	return nil
}

// pagedCache is a page table for sequences of lengths lens in pages of
// pageSize keys, in a shuffled order, the first two sequences sharing
// their first page where both fill it at lengths filled (lens before an
// append: its rows need pages of their own); it returns the number of
// pages.
func pagedCache(rng *rand.Rand, lens, filled []int32, pageSize int) (fac.PagedInputs, int) {
	maxPages := 1
	for _, n := range lens {
		maxPages = max(maxPages, (int(n)+pageSize-1)/pageSize)
	}
	table := make([]int32, len(lens)*maxPages)
	next := int32(0)
	for b, n := range lens {
		for j := range (int(n) + pageSize - 1) / pageSize {
			if b == 1 && j == 0 && int(min(filled[1], filled[0])) >= pageSize {
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
