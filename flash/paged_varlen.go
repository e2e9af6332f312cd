package flash

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// Ragged continuous batches (docs/decoding.md#ragged-batches): one launch
// serves sequences with query lengths of their own, decode rows and
// prefill chunks together, over the paged cache, run as
// flash_fwd_paged_varlen (a grid over every sequence's q tiles, split-KV
// and PackGQA chosen for the batch) then flash_fwd_combine.

// PagedVarlenShape is the shape of a ragged paged call: Batch sequences,
// Heads query heads and KVHeads (0: Heads) kv heads, and the cache's
// PageSize keys per page. The query lengths are the inputs' CuSeqlensQ.
type PagedVarlenShape struct {
	Batch, Heads, KVHeads int
	PageSize              int
}

// PagedVarlenInputs are a ragged paged call's host tensors.
type PagedVarlenInputs struct {
	// Q is [total_q, Heads, Dim], the sequences' queries packed one after
	// another (FlashAttention's varlen layout): sequence b's are rows
	// CuSeqlensQ[b] … CuSeqlensQ[b+1]−1.
	Q []float32
	// CuSeqlensQ is [Batch + 1]: from 0, non-decreasing, ending at
	// total_q (a repeated value is a sequence with no queries this call).
	CuSeqlensQ []int32
	// KCache, VCache, PageTable and CacheSeqlens are PagedInputs': the
	// cache already holds the queries' own keys, so sequence b's n_q
	// queries are the last n_q of its CacheSeqlens[b] positions (n_q ≤
	// CacheSeqlens[b]): query row i is at position CacheSeqlens[b] − n_q +
	// i, which the mods see as q_idx, with seqlen_q = seqlen_k =
	// CacheSeqlens[b].
	KCache, VCache []float32
	PageTable      []int32
	CacheSeqlens   []int32
	// Scalars are the mods' run-time parameters; Scale the softmax scale
	// (0: 1/sqrt(Dim)); Sinks the per-head sink logits [Heads] of a
	// forward compiled with Options.Sinks (nil otherwise).
	Scalars map[string]any
	Scale   float32
	Sinks   []float32
}

// raggedCall is a checked ragged call: its shape (SeqQ and SeqK the
// longest query and cache lengths, at least 1), the cache geometry, the
// lengths and the packed query count.
type raggedCall struct {
	sh                 Shape
	ps                 PagedVarlenShape // KVHeads set
	numPages, maxPages int
	cuQ, lens          []int32
	totalQ             int
}

// check checks the counts of a ragged shape.
func (ps PagedVarlenShape) check() error {
	if ps.Batch <= 0 || ps.Heads <= 0 || ps.KVHeads < 0 {
		return fmt.Errorf("paged varlen shape %+v: batch and heads must be positive, kv heads positive or 0 (= heads)", ps)
	}
	if kv := cmp.Or(ps.KVHeads, ps.Heads); ps.Heads%kv != 0 {
		return fmt.Errorf("paged varlen shape %+v: heads (%d) must be a multiple of kv heads (%d)", ps, ps.Heads, kv)
	}
	if ps.PageSize <= 0 {
		return fmt.Errorf("page size %d: want a positive count of keys per page", ps.PageSize)
	}
	return nil
}

// withKV is ps with KVHeads 0 read as Heads.
func (ps PagedVarlenShape) withKV() PagedVarlenShape {
	ps.KVHeads = cmp.Or(ps.KVHeads, ps.Heads)
	return ps
}

// paged is the cache side of ps, for the paged checks it shares.
func (ps PagedVarlenShape) paged() PagedShape {
	return PagedShape{Batch: ps.Batch, Heads: ps.Heads, KVHeads: ps.KVHeads, SeqQ: 1, PageSize: ps.PageSize}
}

// checkPagedVarlen checks a ragged call's host tensors against ps and each
// other, before anything is allocated for them.
func (f *Forward) checkPagedVarlen(in PagedVarlenInputs, ps PagedVarlenShape) (raggedCall, error) {
	if err := ps.check(); err != nil {
		return raggedCall{}, err
	}
	ps = ps.withKV()
	d, dv := f.dim, f.dimV
	row := ps.PageSize * ps.KVHeads
	if len(in.KCache) == 0 || len(in.KCache)%(row*d) != 0 {
		return raggedCall{}, fmt.Errorf("k_cache has %d elements: want [num_pages, %d, %d, %d] with num_pages ≥ 1", len(in.KCache), ps.PageSize, ps.KVHeads, d)
	}
	numPages := len(in.KCache) / (row * d)
	if len(in.VCache) != numPages*row*dv {
		return raggedCall{}, fmt.Errorf("v_cache has %d elements: want [%d, %d, %d, %d] as k_cache", len(in.VCache), numPages, ps.PageSize, ps.KVHeads, dv)
	}
	if len(in.PageTable) == 0 || len(in.PageTable)%ps.Batch != 0 {
		return raggedCall{}, fmt.Errorf("page_table has %d elements: want [%d, max_pages] with max_pages ≥ 1", len(in.PageTable), ps.Batch)
	}
	if len(in.Q)%(ps.Heads*d) != 0 {
		return raggedCall{}, fmt.Errorf("q has %d elements: want [total_q, %d, %d]", len(in.Q), ps.Heads, d)
	}
	c, err := f.checkRaggedGeometry(ps, numPages, len(in.PageTable)/ps.Batch, in.CuSeqlensQ, in.CacheSeqlens, len(in.Q)/(ps.Heads*d))
	if err != nil {
		return c, err
	}
	if err := f.checkScalars(in.Scalars); err != nil {
		return c, err
	}
	for b, n := range c.lens {
		for j := range launch.CeilDiv(int(n), ps.PageSize) {
			if pg := in.PageTable[b*c.maxPages+j]; pg < 0 || int(pg) >= c.numPages {
				return c, fmt.Errorf("page_table[%d, %d] = %d: want a page of 0 to %d (sequence %d holds %d keys)", b, j, pg, c.numPages-1, b, n)
			}
		}
	}
	return c, f.checkSinks(in.Sinks, ps.Heads)
}

// checkRaggedGeometry checks what host and device calls and plans share:
// cu_seqlens_q against totalQ queries, the cache lengths against a cache
// of numPages pages and a table of maxPages columns and against the
// queries (a sequence's queries are the last positions of its cache),
// 32-bit offsets, and that the kernel has a paged form.
func (f *Forward) checkRaggedGeometry(ps PagedVarlenShape, numPages, maxPages int, cuQ, lens []int32, totalQ int) (raggedCall, error) {
	c := raggedCall{ps: ps, numPages: numPages, maxPages: maxPages, cuQ: cuQ, lens: lens, totalQ: totalQ}
	if numPages < 1 || maxPages < 1 {
		return c, fmt.Errorf("a paged cache of %d pages and a page table of %d columns: want at least 1 of each", numPages, maxPages)
	}
	if len(cuQ) != ps.Batch+1 {
		return c, fmt.Errorf("cu_seqlens_q has %d elements: want %d (one more than the %d sequences)", len(cuQ), ps.Batch+1, ps.Batch)
	}
	if len(lens) != ps.Batch {
		return c, fmt.Errorf("cache_seqlens has %d elements: want %d (one per sequence)", len(lens), ps.Batch)
	}
	if cuQ[0] != 0 {
		return c, fmt.Errorf("cu_seqlens_q[0] = %d, want 0", cuQ[0])
	}
	if last := int(cuQ[ps.Batch]); last != totalQ {
		return c, fmt.Errorf("cu_seqlens_q ends at %d, but q has %d tokens", last, totalQ)
	}
	if int64(numPages)*int64(ps.PageSize*ps.KVHeads)*int64(max(f.dim, f.dimV)) > math.MaxInt32 {
		return c, fmt.Errorf("a cache of %d pages exceeds 32-bit offsets", numPages)
	}
	if int64(ps.Batch)*int64(maxPages) > math.MaxInt32 {
		return c, fmt.Errorf("a page table of %d × %d entries exceeds 32-bit offsets", ps.Batch, maxPages)
	}
	for _, t := range []struct {
		name string
		w    int
	}{{"q", f.dim}, {"o", f.dimV}} {
		if n, ok := launch.Product(totalQ, ps.Heads, t.w); !ok || n > math.MaxInt32 {
			return c, fmt.Errorf("%s has %d×%d×%d elements (total_q × heads × head dim), more than 32-bit offsets address", t.name, totalQ, ps.Heads, t.w)
		}
	}
	longQ, longK := 1, 1
	for b, n := range lens {
		nq := cuQ[b+1] - cuQ[b]
		switch {
		case nq < 0:
			return c, fmt.Errorf("cu_seqlens_q decreases at %d (%d after %d)", b+1, cuQ[b+1], cuQ[b])
		case n < 0 || int(n) > maxPages*ps.PageSize:
			return c, fmt.Errorf("cache_seqlens[%d] = %d: want 0 to max_pages · page_size = %d", b, n, maxPages*ps.PageSize)
		case nq > n:
			return c, fmt.Errorf("sequence %d has %d queries but cache_seqlens[%d] = %d: its cache must hold the queries' own keys (they are its last %d positions)", b, nq, b, n, nq)
		}
		longQ, longK = max(longQ, int(nq)), max(longK, int(n))
	}
	c.sh = Shape{Batch: ps.Batch, Heads: ps.Heads, KVHeads: ps.KVHeads, SeqQ: longQ, SeqK: longK, Dim: f.dim}
	if f.dimV != f.dim {
		c.sh.DimV = f.dimV
	}
	return c, f.pagedForm()
}

// PagedVarlenPlan is the plan of a ragged call of shape ps with these
// query and cache lengths on sms multiprocessors (0: Options.SMs, else
// DefaultSMs): flash_fwd_paged_varlen's tile, packing and splits, chosen
// for the batch as a whole (raggedPlan). A call whose mask reads h runs
// one head a tile where this plan packs.
func (f *Forward) PagedVarlenPlan(ps PagedVarlenShape, cuSeqlensQ, cacheSeqlens []int32, sms int) (DecodePlan, error) {
	if err := ps.check(); err != nil {
		return DecodePlan{}, err
	}
	ps = ps.withKV()
	maxPages := 1
	for _, n := range cacheSeqlens {
		maxPages = max(maxPages, launch.CeilDiv(int(n), ps.PageSize))
	}
	if len(cuSeqlensQ) == 0 {
		return DecodePlan{}, fmt.Errorf("cu_seqlens_q is empty: want %d elements", ps.Batch+1)
	}
	c, err := f.checkRaggedGeometry(ps, 1, maxPages, cuSeqlensQ, cacheSeqlens, int(cuSeqlensQ[len(cuSeqlensQ)-1]))
	if err != nil {
		return DecodePlan{}, err
	}
	return f.raggedPlan(c, sms, f.opts.PackGQA)
}

// raggedPlan plans a ragged call for the batch as a whole:
//   - PackGQA auto packs every kv head's group of query heads whatever
//     the query lengths: a packed tile reads each K/V tile once for its
//     pack heads, so decode rows read the cache once per kv head, and a
//     prefill chunk's 64-row tiles of 64/pack positions × pack heads read
//     as many K/V bytes per query row as unpacked ones;
//   - BLOCK_M is 16 where one 16-row tile holds the longest query (an
//     all-decode batch), else 64;
//   - the grid is every sequence's q tiles (raggedTiles) times the packed
//     heads, and the splits are chooseSplits' for that many programs over
//     the longest cache: a batch of mostly decode rows has few tiles and
//     splits, one with prefill chunks fills the GPU with its tiles.
func (f *Forward) raggedPlan(c raggedCall, sms int, pk PackGQA) (DecodePlan, error) {
	if f.opts.SMs > 0 {
		sms = f.opts.SMs
	}
	p := DecodePlan{NumSplits: 1, Pack: 1, SMs: cmp.Or(max(sms, 0), DefaultSMs), Sinks: f.opts.Sinks, SplitKV: true, Paged: true, Varlen: true}
	if err := f.pagedForm(); err != nil {
		return p, err
	}
	if ns := f.opts.NumSplits; ns < 0 || ns > MaxSplits {
		return p, fmt.Errorf("NumSplits %d: want 0 (auto) to %d", ns, MaxSplits)
	}
	if pk < PackGQAAuto || pk > PackGQAOff {
		return p, fmt.Errorf("PackGQA %d: want auto, on or off", int(pk))
	}
	sh := c.sh
	if err := f.splitTile(&p, sh.Heads/sh.KV(), sh.SeqQ, pk, true); err != nil {
		return p, err
	}
	tiles := raggedTileCount(c.cuQ, c.lens, p.QPerTile)
	if err := f.splitCount(&p, tiles*sh.Heads/p.Pack, sh.SeqK, sh.Heads*c.totalQ*sh.VDim()); err != nil {
		return p, err
	}
	p.TilePages = tilePages(c.ps.PageSize, p.BlockN)
	return p, nil
}

// raggedTileCount is the number of q tiles of a ragged batch (raggedTiles).
func raggedTileCount(cuQ, lens []int32, qpt int) int {
	n := 0
	for b, k := range lens {
		if nq := int(cuQ[b+1] - cuQ[b]); nq > 0 {
			n += (int(k)-1)/qpt - (int(k)-nq)/qpt + 1
		}
	}
	return n
}

// raggedTiles lists a ragged batch's q tiles: sequence b's queries, at
// positions lens[b] − n_q to lens[b] − 1, cut where a position is a
// multiple of qpt, so that each tile lies in one aligned run of qpt
// positions (qpt divides SPARSE_Q: one block-mask row). It gives each
// tile's sequence and first query row, ordered by the kv blocks its
// sequence's block-mask row lists (work, from the rows of its first
// head), most first, so that the last wave of programs holds the shortest
// tiles.
func raggedTiles(cuQ, lens []int32, qpt int, bm *VarlenBlockMask, heads int) (seq, first []int32) {
	type tile struct{ b, q, work int32 }
	var ts []tile
	for b, k := range lens {
		nq := cuQ[b+1] - cuQ[b]
		if nq == 0 {
			continue
		}
		off := k - nq
		row0 := bm.kv.rowStart[b*heads] - off/int32(bm.blockQ)
		for p := off; p < k; p = (p/int32(qpt) + 1) * int32(qpt) {
			r := row0 + p/int32(bm.blockQ)
			ts = append(ts, tile{int32(b), p - off, bm.kv.counts[r] + bm.kv.full[r]})
		}
	}
	slices.SortStableFunc(ts, func(x, y tile) int { return cmp.Compare(y.work, x.work) })
	seq, first = make([]int32, len(ts)), make([]int32, len(ts))
	for i, t := range ts {
		seq[i], first[i] = t.b, t.q
	}
	return seq, first
}

// buildRaggedBlockMask is a ragged batch's block mask: varlen's layout
// (kv rows only), each sequence's rows those of its n × n problem (the
// mods see seqlen_q = seqlen_k = n) from the q block of its first query
// on, in logical blocks. Masks the analytic builder cannot bound list
// every block as partial (seqSource.noEvaluate).
func (f *Forward) buildRaggedBlockMask(c raggedCall, scalars map[string]any) (*VarlenBlockMask, error) {
	bq, bk := f.sparse()
	heads, nseq := c.ps.Heads, c.ps.Batch
	vals := Inputs{Scalars: scalars}.modValues()
	m := &VarlenBlockMask{blockQ: bq, blockK: bk, heads: heads, mask: "none", params: f.maskParams(vals)}
	if f.res.Mask != nil {
		m.mask = f.res.Mask.String()
	}
	m.kv.rowStart = make([]int32, nseq*heads)
	longest := 0
	for b, n := range c.lens {
		if c.cuQ[b+1] > c.cuQ[b] {
			longest = max(longest, int(n))
		}
	}
	src := &seqSource{prog: f.res.Program, mask: f.res.Mask, nseq: nseq, heads: heads, bq: bq, bk: bk, vals: vals,
		maxQ: longest, maxK: longest, noEvaluate: true}
	if err := src.init(); err != nil {
		return nil, err
	}
	for b, n := range c.lens {
		nq := int(c.cuQ[b+1] - c.cuQ[b])
		if nq == 0 {
			m.kv.add(b, heads, 1, varlenRows{})
			continue
		}
		rows, hs, err := src.kvRowsFrom((int(n)-nq)/bq, int(n))
		if err != nil {
			return nil, fmt.Errorf("block mask of sequence %d (%d keys): %w", b, n, err)
		}
		m.kv.add(b, heads, hs, rows)
	}
	if int64(len(m.kv.indices)) > math.MaxInt32 {
		return nil, fmt.Errorf("ragged block mask: more than 2^31 listed blocks")
	}
	return m, nil
}

// bindPagedVarlen plans call c for sms multiprocessors, builds its block
// mask and tile list, and binds its kernels: the split kernel on the
// ragged problem, flash_fwd_combine on one batch of total_q positions
// whose O strides make it [total_q, H, Dv] (LSE [H, total_q]). Its lists
// are the lengths, the tile list and the block-mask lists.
func (f *Forward) bindPagedVarlen(c raggedCall, scale float32, scalars map[string]any, sms int) (*pagedBound, error) {
	plan, err := f.raggedPlan(c, sms, f.opts.PackGQA)
	if err != nil {
		return nil, err
	}
	bm, err := f.buildRaggedBlockMask(c, scalars)
	if err != nil {
		return nil, err
	}
	// A packed tile reads its group's first head's rows: where the mask
	// reads h those differ, and auto packing gives way.
	if plan.Pack > 1 && !sharedGroupRows(bm.kv.rowStart, plan.Pack) {
		if f.opts.PackGQA == PackGQAOn {
			return nil, fmt.Errorf("PackGQA on: mask %s reads h, so a packed tile's heads need their own block-mask rows, which the paged kernels do not take (set PackGQA auto or off)", bm.mask)
		}
		if plan, err = f.raggedPlan(c, sms, PackGQAOff); err != nil {
			return nil, err
		}
	}
	ks, err := f.planKernels(plan)
	if err != nil {
		return nil, err
	}
	host := map[string]any{}
	sizes := map[string]int{attention.PagedNumPages: c.numPages, attention.PagedPageSize: c.ps.PageSize, attention.PagedMaxPages: c.maxPages}
	bm.addLists(plan.variant().Lists, host, sizes)
	seq, first := raggedTiles(c.cuQ, c.lens, plan.QPerTile, bm, c.ps.Heads)
	sizes[attention.PagedVarlenTiles] = len(seq)
	b := &pagedBound{forwardCall: forwardCall{ks: ks}, plan: plan,
		lists: map[string][]int32{"cache_seqlens": c.lens, "cu_seqlens_q": c.cuQ, "tile_seq": seq, "tile_q": first}}
	for name, xs := range host {
		b.lists[name] = xs.([]int32)
	}
	sh, h, dv := c.sh, c.ps.Heads, f.dimV
	main := launch.Request{Problem: launch.Problem{Shape: sh, Scale: scale, TotalQ: c.totalQ, NumSplits: plan.NumSplits, Pack: plan.Pack, Lens: sizes},
		Scalars: scalars}
	packed := launch.Request{Problem: launch.Problem{Shape: Shape{Batch: 1, Heads: h, KVHeads: h, SeqQ: c.totalQ, SeqK: 1, Dim: sh.Dim, DimV: sh.DimV},
		Scale: scale, NumSplits: plan.NumSplits}, Strides: map[string][]int{"o": {c.totalQ * h * dv, dv, h * dv}}}
	for i, st := range ks {
		r := packed
		if i == 0 {
			r = main
		}
		calls, err := bindAll([]stage{st}, 0, r, nil)
		if err != nil {
			return nil, err
		}
		b.calls = append(b.calls, calls[0])
	}
	return b, nil
}

// raggedHost are the ragged kernels' host tensors by parameter name: in's
// and the lists.
func (b *pagedBound) raggedHost(in PagedVarlenInputs) map[string]any {
	return pagedHost(in.Q, in.KCache, in.VCache, in.PageTable, in.Sinks, b.lists)
}

// RunPagedVarlenCPU runs a ragged call on the CPU reference device and
// returns O ([total_q, Heads, DimV]) and LSE ([Heads, total_q], natural
// log), varlen's layouts; a row that keeps no key gets O = 0 and LSE =
// -inf.
func (f *Forward) RunPagedVarlenCPU(in PagedVarlenInputs, ps PagedVarlenShape) (o, lse []float32, err error) {
	return f.RunPagedVarlenCPUContext(context.Background(), in, ps)
}

// RunPagedVarlenCPUContext is RunPagedVarlenCPU that gives up once ctx is
// done.
func (f *Forward) RunPagedVarlenCPUContext(ctx context.Context, in PagedVarlenInputs, ps PagedVarlenShape) (o, lse []float32, err error) {
	c, err := f.checkPagedVarlen(in, ps)
	if err != nil {
		return nil, nil, err
	}
	if c.totalQ == 0 {
		return []float32{}, []float32{}, nil
	}
	b, err := f.bindPagedVarlen(c, in.Scale, in.Scalars, 0)
	if err != nil {
		return nil, nil, err
	}
	out, err := runCPU(ctx, b.ks, b.calls, b.raggedHost(in))
	if err != nil {
		return nil, nil, err
	}
	return f32s(out, "o"), f32s(out, "lse"), nil
}

// PagedVarlenReference computes naive float64 attention in
// RunPagedVarlenCPU's layouts: each sequence's keys gathered from its
// pages, its queries at its last positions, the mods evaluated as the
// kernel calls them (q_idx the query's position, seqlen_q = seqlen_k the
// cache length, b the sequence's index).
func (f *Forward) PagedVarlenReference(in PagedVarlenInputs, ps PagedVarlenShape) (o, lse []float64, err error) {
	c, err := f.checkPagedVarlen(in, ps)
	if err != nil {
		return nil, nil, err
	}
	h, dv := c.ps.Heads, f.dimV
	rows := make([]RefRow, 0, c.totalQ*h)
	for b := range c.ps.Batch {
		for i := range int(c.cuQ[b+1] - c.cuQ[b]) {
			for hh := range h {
				rows = append(rows, RefRow{B: b, H: hh, I: i})
			}
		}
	}
	ro, rlse, err := f.raggedRefRows(in, c, rows)
	if err != nil {
		return nil, nil, err
	}
	o, lse = make([]float64, c.totalQ*h*dv), make([]float64, h*c.totalQ)
	for k, r := range rows {
		t := int(c.cuQ[r.B]) + r.I
		copy(o[(t*h+r.H)*dv:][:dv], ro[k*dv:][:dv])
		lse[r.H*c.totalQ+t] = rlse[k]
	}
	return o, lse, nil
}

// PagedVarlenReferenceRows is PagedVarlenReference on some rows only: each
// row names a sequence (B), a query head (H) and a query of that sequence
// (I, from 0); it gives each row's O (DimV values) and LSE, in order, the
// values PagedVarlenReference gives them. A row costs O(its cache length),
// so a check can sample rows of a batch whose full reference would take
// hours.
func (f *Forward) PagedVarlenReferenceRows(in PagedVarlenInputs, ps PagedVarlenShape, rows []RefRow) (o, lse []float64, err error) {
	c, err := f.checkPagedVarlen(in, ps)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range rows {
		if r.B < 0 || r.B >= c.ps.Batch || r.H < 0 || r.H >= c.ps.Heads || r.I < 0 || r.I >= int(c.cuQ[r.B+1]-c.cuQ[r.B]) {
			return nil, nil, fmt.Errorf("reference row (sequence %d, head %d, query %d) is outside the batch", r.B, r.H, r.I)
		}
	}
	return f.raggedRefRows(in, c, rows)
}

// raggedRefRows computes checked call c's rows: per sequence, its keys
// gathered once and its mods lowered for its length, then its rows in
// parallel, each with the mods at the row's position (rowBufs.row).
func (f *Forward) raggedRefRows(in PagedVarlenInputs, c raggedCall, rows []RefRow) (o, lse []float64, err error) {
	d, dv, h, hkv := f.dim, f.dimV, c.ps.Heads, c.ps.KVHeads
	vals := Inputs{Scalars: in.Scalars}.modValues()
	scale := float64(f.problem(c.sh, in.Scale).SoftmaxScale())
	// The keys are gathered, then rounded, sequence by sequence: a
	// serving batch's cache is gigabytes, of which the rows read little.
	q := roundTo(in.Q, f.dtype)
	bySeq := map[int][]int{}
	for k, r := range rows {
		bySeq[r.B] = append(bySeq[r.B], k)
	}
	o, lse = make([]float64, len(rows)*dv), make([]float64, len(rows))
	for _, b := range slices.Sorted(maps.Keys(bySeq)) {
		n, nq := int(c.lens[b]), int(c.cuQ[b+1]-c.cuQ[b])
		table := in.PageTable[b*c.maxPages:][:c.maxPages]
		kb, vb := gatherPaged(in.KCache, table, c.ps.PageSize, n, hkv, d), gatherPaged(in.VCache, table, c.ps.PageSize, n, hkv, dv)
		cpu.Round(f.dtype, kb)
		cpu.Round(f.dtype, vb)
		// The mods see the whole sequence: n positions of queries and keys.
		seq := c.sh
		seq.SeqQ, seq.SeqK = max(n, 1), max(n, 1)
		maskFn, err := modTileFunc(f.res.Program, f.res.Mask, seq, vals, refChunk)
		if err != nil {
			return nil, nil, err
		}
		scoreFn, err := modTileFunc(f.res.Program, f.res.Score, seq, vals, refChunk)
		if err != nil {
			return nil, nil, err
		}
		ks := bySeq[b]
		err = eachRow(len(ks), func() func(int) error {
			rb := newRowBufs(n, d, dv)
			return func(x int) error {
				k := ks[x]
				r := rows[k]
				hk := r.H / (h / hkv)
				krow := func(j int) []float64 { return kb[(hk*n+j)*d:][:d] }
				vrow := func(j int) []float64 { return vb[(hk*n+j)*dv:][:dv] }
				sink := math.Inf(-1)
				if in.Sinks != nil {
					sink = float64(in.Sinks[r.H])
				}
				qrow := q[((int(c.cuQ[b])+r.I)*h+r.H)*d:][:d]
				var err error
				lse[k], err = rb.row(qrow, n, krow, vrow, maskFn, scoreFn, b, r.H, n-nq+r.I, scale, sink, o[k*dv:][:dv])
				return err
			}
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return o, lse, nil
}

// gatherPaged is a sequence's n keys (or values) as [Hkv, n, w], gathered
// from a paged cache of rows w through its row of the page table.
func gatherPaged[T float32 | float64](cache []T, table []int32, pageSize, n, hkv, w int) []float64 {
	out := make([]float64, hkv*n*w)
	for j := range n {
		at := (int(table[j/pageSize])*pageSize + j%pageSize) * hkv
		for h := range hkv {
			dst, src := out[(h*n+j)*w:][:w], cache[(at+h)*w:][:w]
			for i, x := range src {
				dst[i] = float64(x)
			}
		}
	}
	return out
}
