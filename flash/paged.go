package flash

import (
	"context"
	"fmt"
	"slices"

	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/reference"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// Paged decoding (docs/decoding.md): attention of a few query positions per
// sequence over a paged KV cache in vLLM's and FlashAttention-3's layout,
// run as flash_fwd_paged (split-KV and PackGQA, keys gathered through the
// page table) then flash_fwd_combine.

// PagedShape is the shape of a paged call. The cache's page count and the
// page table's width follow from PagedInputs' lengths.
type PagedShape struct {
	// Batch sequences of SeqQ query positions each, Heads query heads and
	// KVHeads (0: Heads) kv heads.
	Batch, Heads, KVHeads, SeqQ int
	// PageSize is the keys per page (1, or a power of two such as 16 … 256;
	// any positive count runs).
	PageSize int
}

// PagedInputs are a paged call's host tensors.
type PagedInputs struct {
	// Q is [Batch, Heads, SeqQ, Dim], as Inputs.Q.
	Q []float32
	// KCache is [num_pages, PageSize, KVHeads, Dim] and VCache [num_pages,
	// PageSize, KVHeads, DimV].
	KCache, VCache []float32
	// PageTable is [Batch, max_pages]: sequence b's key j is in page
	// PageTable[b·max_pages + j/PageSize], row j % PageSize. Pages may be in
	// any order and shared between sequences; entries past a sequence's
	// length are not read.
	PageTable []int32
	// CacheSeqlens is [Batch]: each sequence's key count (0 to max_pages ·
	// PageSize). The mods see it as seqlen_k and a key's position in its
	// sequence as kv_idx.
	CacheSeqlens []int32
	// Scalars are the mods' run-time parameters; Scale the softmax scale
	// (0: 1/sqrt(Dim)).
	Scalars map[string]any
	Scale   float32
	// Sinks are the per-head sink logits [Heads] of a forward compiled
	// with Options.Sinks (nil otherwise), as Inputs.Sinks.
	Sinks []float32

	// KNew [Batch, SeqQ, KVHeads, Dim] and VNew [Batch, SeqQ, KVHeads,
	// DimV], when set, are keys and values to append (FlashAttention's k
	// and v): the call writes sequence b's rows at positions
	// CacheSeqlens[b] … CacheSeqlens[b]+SeqQ−1, through the page table,
	// then attends over the grown caches with q's rows at those same
	// positions. It updates KCache, VCache (each element as the DType
	// holds it) and CacheSeqlens (each grown by SeqQ) in place, as the GPU
	// call updates the device's cache. The appended rows must fall in
	// page rows no sequence holds or appends to. See
	// docs/decoding.md#appending-to-the-cache.
	KNew, VNew []float32
	// Rotary, with KNew, rotates q and KNew at their positions (q's row i
	// of sequence b at CacheSeqlens[b]+i) by RotaryCos and RotarySin
	// [positions, RotaryDim/2], in the kernel's DType: the first RotaryDim
	// columns (even, at most Dim; 0: all of Dim), in GPT-NeoX's or GPT-J's
	// pairs; the other columns pass unchanged. RotaryNone: no rotation and
	// no tables.
	Rotary               RotaryForm
	RotaryDim            int
	RotaryCos, RotarySin []float32
}

// pagedCall is a checked paged call: its dense shape (SeqK the longest
// cache length, at least 1), the cache geometry, the lengths the attention
// reads (after the append, if any) and what it appends (nil: nothing).
type pagedCall struct {
	sh                 Shape
	ps                 PagedShape // KVHeads set
	numPages, maxPages int
	lens               []int32
	app                *appendCall
}

// checkPaged checks a paged call's host tensors against ps and each other.
func (f *Forward) checkPaged(in PagedInputs, ps PagedShape) (pagedCall, error) {
	var c pagedCall
	if err := ps.check(); err != nil {
		return c, err
	}
	ps = ps.withKV()
	d, dv := f.dim, f.dimV
	row := ps.PageSize * ps.KVHeads
	if len(in.KCache) == 0 || len(in.KCache)%(row*d) != 0 {
		return c, fmt.Errorf("k_cache has %d elements: want [num_pages, %d, %d, %d] with num_pages ≥ 1", len(in.KCache), ps.PageSize, ps.KVHeads, d)
	}
	numPages := len(in.KCache) / (row * d)
	if len(in.VCache) != numPages*row*dv {
		return c, fmt.Errorf("v_cache has %d elements: want [%d, %d, %d, %d] as k_cache", len(in.VCache), numPages, ps.PageSize, ps.KVHeads, dv)
	}
	if len(in.PageTable) == 0 || len(in.PageTable)%ps.Batch != 0 {
		return c, fmt.Errorf("page_table has %d elements: want [%d, max_pages] with max_pages ≥ 1", len(in.PageTable), ps.Batch)
	}
	maxPages := len(in.PageTable) / ps.Batch
	app, err := f.checkAppendHost(in, ps)
	if err != nil {
		return c, err
	}
	lens := in.CacheSeqlens
	if app != nil {
		if lens, err = appendedLens(in.CacheSeqlens, ps.Batch, ps.SeqQ, maxPages*ps.PageSize); err != nil {
			return c, err
		}
	}
	if c, err = f.checkPagedGeometry(ps, numPages, maxPages, lens, in.Scalars); err != nil {
		return c, err
	}
	c.app = app
	for b, n := range lens {
		for j := 0; j < launch.CeilDiv(int(n), ps.PageSize); j++ {
			if pg := in.PageTable[b*c.maxPages+j]; pg < 0 || int(pg) >= c.numPages {
				return c, fmt.Errorf("page_table[%d, %d] = %d: want a page of 0 to %d", b, j, pg, c.numPages-1)
			}
		}
	}
	if app != nil {
		if err := app.checkPositions(lens); err != nil {
			return c, err
		}
		if err := appendSlotsFree(in.PageTable, maxPages, ps.PageSize, numPages, in.CacheSeqlens, lens); err != nil {
			return c, err
		}
	}
	if len(in.Q) != ps.Batch*ps.Heads*ps.SeqQ*d {
		return c, fmt.Errorf("q has %d elements: want [%d, %d, %d, %d]", len(in.Q), ps.Batch, ps.Heads, ps.SeqQ, d)
	}
	return c, f.checkSinks(in.Sinks, ps.Heads)
}

// check checks the counts of a paged shape.
func (ps PagedShape) check() error {
	if ps.Batch <= 0 || ps.Heads <= 0 || ps.KVHeads < 0 || ps.SeqQ <= 0 {
		return fmt.Errorf("paged shape %+v: batch, heads and seqlen_q must be positive, kv heads positive or 0 (= heads)", ps)
	}
	if ps.PageSize <= 0 {
		return fmt.Errorf("page size %d: want a positive count of keys per page", ps.PageSize)
	}
	return nil
}

// withKV is ps with KVHeads 0 read as Heads.
func (ps PagedShape) withKV() PagedShape {
	if ps.KVHeads == 0 {
		ps.KVHeads = ps.Heads
	}
	return ps
}

// checkPagedGeometry checks what host and device calls share: the cache
// lengths against a cache of numPages pages and a table of maxPages
// columns, 32-bit offsets, the kernel and the mods' inputs.
func (f *Forward) checkPagedGeometry(ps PagedShape, numPages, maxPages int, lens []int32, scalars map[string]any) (pagedCall, error) {
	c := pagedCall{ps: ps, numPages: numPages, maxPages: maxPages, lens: lens}
	if numPages < 1 || maxPages < 1 {
		return c, fmt.Errorf("a paged cache of %d pages and a page table of %d columns: want at least 1 of each", numPages, maxPages)
	}
	if len(lens) != ps.Batch {
		return c, fmt.Errorf("cache_seqlens has %d elements: want %d (one per sequence)", len(lens), ps.Batch)
	}
	if int64(numPages)*int64(ps.PageSize*ps.KVHeads)*int64(max(f.dim, f.dimV)) > 1<<31-1 {
		return c, fmt.Errorf("a cache of %d pages exceeds 32-bit offsets", numPages)
	}
	if int64(ps.Batch)*int64(maxPages) > 1<<31-1 {
		return c, fmt.Errorf("a page table of %d × %d entries exceeds 32-bit offsets", ps.Batch, maxPages)
	}
	maxLen := 0
	for b, n := range lens {
		if n < 0 || int(n) > maxPages*ps.PageSize {
			return c, fmt.Errorf("cache_seqlens[%d] = %d: want 0 to max_pages · page_size = %d", b, n, maxPages*ps.PageSize)
		}
		maxLen = max(maxLen, int(n))
	}
	c.sh = pagedDense(ps, maxLen, f.dim, f.dimV)
	if err := c.sh.ValidatePaged(); err != nil {
		return c, err
	}
	if err := f.pagedForm(); err != nil {
		return c, err
	}
	return c, f.checkScalars(scalars)
}

// pagedForm is nil where f has a paged form: the split-KV kernel's mods,
// with no aux tensors.
func (f *Forward) pagedForm() error {
	if !f.splitKVCapable() {
		return fmt.Errorf("kernel %s has no paged form (varlen and the .full variant run on dense tensors)", f.res.Kernel)
	}
	if aux := f.AuxTensors(); len(aux) > 0 {
		return fmt.Errorf("the paged kernel takes no aux tensors yet, and the mods read %v", aux)
	}
	return nil
}

// pagedDense is the dense shape a paged call of shape ps is planned as:
// SeqK the longest cache length (at least 1).
func pagedDense(ps PagedShape, maxLen, d, dv int) Shape {
	ps = ps.withKV()
	sh := Shape{Batch: ps.Batch, Heads: ps.Heads, KVHeads: ps.KVHeads, SeqQ: ps.SeqQ, SeqK: max(maxLen, 1), Dim: d}
	if dv != d {
		sh.DimV = dv
	}
	return sh
}

// PagedPlan is the plan a paged call of shape ps runs with caches up to
// maxLen keys: flash_fwd_paged's tile, splits and packing, chosen as Plan
// chooses them for the dense shape of that length (SplitKV is always true).
// A call whose mask reads h runs one head a tile where this plan packs.
func (f *Forward) PagedPlan(ps PagedShape, maxLen, sms int) (DecodePlan, error) {
	if err := ps.check(); err != nil {
		return DecodePlan{}, err
	}
	return f.pagedPlan(pagedDense(ps, maxLen, f.dim, f.dimV), ps.PageSize, sms, f.opts.PackGQA)
}

func (f *Forward) pagedPlan(sh Shape, pageSize, sms int, pk PackGQA) (DecodePlan, error) {
	if err := f.pagedForm(); err != nil {
		return DecodePlan{}, err
	}
	p, err := f.plan(sh, sms, pk, sh.ValidatePaged)
	p.SplitKV, p.Paged, p.FusedCombine = true, true, f.opts.fusedCombine()
	if err == nil {
		p.TilePages = tilePages(pageSize, p.BlockN)
	}
	return p, err
}

// pagedBound is a paged call bound: its plan, its kernels (flash_fwd_paged
// or flash_fwd_paged_varlen, and flash_fwd_combine) and their calls, and
// the paged kernel's inputs made on the host (cache_seqlens, the
// block-mask lists and a ragged batch's tile list) by parameter name.
type pagedBound struct {
	forwardCall
	plan  DecodePlan
	lists map[string][]int32
}

// bindPaged plans call c for sms multiprocessors (0: DefaultSMs), builds
// its block mask from the cache lengths (after the append, if any) and
// binds its kernels.
func (f *Forward) bindPaged(c pagedCall, scale float32, scalars map[string]any, sms int) (*pagedBound, error) {
	sh, lens := c.sh, c.lens
	plan, err := f.pagedPlan(sh, c.ps.PageSize, sms, f.opts.PackGQA)
	if err != nil {
		return nil, err
	}
	// The block mask is varlen's for sequences of SeqQ queries and their
	// cache lengths: logical kv blocks, none past a sequence's end.
	cuQ, cuK := make([]int32, sh.Batch+1), make([]int32, sh.Batch+1)
	for b, n := range lens {
		cuQ[b+1], cuK[b+1] = cuQ[b]+int32(sh.SeqQ), cuK[b]+n
	}
	vin := VarlenInputs{CuSeqlensQ: cuQ, CuSeqlensK: cuK, Scalars: scalars}
	sq, sk := f.sparse()
	bm, err := buildVarlenBlockMask(f.res.Program, f.res.Mask, vin, sh.Heads, sq, sk, f.maskParams(vin.modValues()))
	if err != nil {
		return nil, err
	}
	// A packed tile reads its group's first head's rows: where the mask
	// reads h those differ, and auto packing gives way.
	if plan.Pack > 1 && !sharedGroupRows(bm.kv.rowStart, plan.Pack) {
		if f.opts.PackGQA == PackGQAOn {
			return nil, fmt.Errorf("PackGQA on: mask %s reads h, so a packed tile's heads need their own block-mask rows, which the paged kernel does not take (set PackGQA auto or off)", bm.mask)
		}
		if plan, err = f.pagedPlan(sh, c.ps.PageSize, sms, PackGQAOff); err != nil {
			return nil, err
		}
	}
	plan.Append = c.app != nil
	ks, err := f.planKernels(plan)
	if err != nil {
		return nil, err
	}
	host := map[string]any{}
	sizes := map[string]int{attention.PagedNumPages: c.numPages, attention.PagedPageSize: c.ps.PageSize, attention.PagedMaxPages: c.maxPages}
	bm.addLists(plan.variant().Lists, host, sizes)
	if c.app != nil {
		c.app.addLens(sizes)
	}
	b := &pagedBound{forwardCall: forwardCall{ks: ks}, plan: plan, lists: map[string][]int32{"cache_seqlens": lens}}
	for name, xs := range host {
		b.lists[name] = xs.([]int32)
	}
	p := launch.Problem{Shape: sh, Scale: scale, NumSplits: plan.NumSplits, Pack: plan.Pack, Lens: sizes}
	if b.calls, err = bindAll(ks, 0, launch.Request{Problem: p, Scalars: scalars}, nil); err != nil {
		return nil, err
	}
	return b, nil
}

// hostData are the paged kernels' host tensors by parameter name: in's and
// the lists. An appending call's q goes to kv_append, whose rotated copy
// (q) the attention reads.
func (b *pagedBound) hostData(in PagedInputs) map[string]any {
	host := pagedHost(in.Q, in.KCache, in.VCache, in.PageTable, in.Sinks, b.lists)
	if b.plan.Append {
		delete(host, "q")
		host["q_in"], host["k_new"], host["v_new"] = in.Q, in.KNew, in.VNew
		host["rotary_cos"], host["rotary_sin"] = in.RotaryCos, in.RotarySin
	}
	addZeroed(b.calls, host)
	return host
}

// pagedHost are a paged kernel's host tensors by parameter name: q, the
// cache and its table, the sinks where there are any, and the lists made
// on the host.
func pagedHost(q, kc, vc []float32, table []int32, sinks []float32, lists map[string][]int32) map[string]any {
	host := map[string]any{"q": q, "k_cache": kc, "v_cache": vc, "page_table": table}
	if sinks != nil {
		host["sinks"] = sinks
	}
	for name, xs := range lists {
		host[name] = xs
	}
	return host
}

// RunPagedCPU runs a paged call on the CPU reference device and returns O
// ([Batch, Heads, SeqQ, DimV]) and LSE ([Batch, Heads, SeqQ], natural log);
// a row that keeps no key (an empty cache, or the mask) gets O = 0 and
// LSE = -inf.
func (f *Forward) RunPagedCPU(in PagedInputs, ps PagedShape) (o, lse []float32, err error) {
	return f.RunPagedCPUContext(context.Background(), in, ps)
}

// RunPagedCPUContext is RunPagedCPU that gives up once ctx is done.
func (f *Forward) RunPagedCPUContext(ctx context.Context, in PagedInputs, ps PagedShape) (o, lse []float32, err error) {
	c, err := f.checkPaged(in, ps)
	if err != nil {
		return nil, nil, err
	}
	b, err := f.bindPaged(c, in.Scale, in.Scalars, 0)
	if err != nil {
		return nil, nil, err
	}
	host := b.hostData(in)
	if c.app != nil {
		// kv_append writes rows of the caches the attention then reads:
		// both kernels take the same device buffers.
		host["k_cache"] = cpu.FromFloats("k_cache", f.dtype, float64s(in.KCache))
		host["v_cache"] = cpu.FromFloats("v_cache", f.dtype, float64s(in.VCache))
	}
	out, err := runCPU(ctx, b.ks, b.calls, host)
	if err != nil {
		return nil, nil, err
	}
	if c.app != nil {
		copyF32s(in.KCache, host["k_cache"].(*cpu.Buffer).Vals)
		copyF32s(in.VCache, host["v_cache"].(*cpu.Buffer).Vals)
		copy(in.CacheSeqlens, c.lens)
	}
	return f32s(out, "o"), f32s(out, "lse"), nil
}

// copyF32s copies src into dst as float32s.
func copyF32s(dst []float32, src []float64) {
	for i := range dst {
		dst[i] = float32(src[i])
	}
}

// sharedGroupRows reports whether every group of pack consecutive heads of
// a sequence starts at the same block-mask row.
func sharedGroupRows(rowStart []int32, pack int) bool {
	for i, r := range rowStart {
		if r != rowStart[i-i%pack] {
			return false
		}
	}
	return true
}

// PagedReference computes naive float64 attention in RunPagedCPU's layouts:
// each sequence's keys gathered from its pages into a dense cache of its
// length, then the dense reference with the same mods (b its index,
// seqlen_k its length). For an appending call, in is the inputs as they
// were before it (RunPagedCPU updates them in place): the caches are
// PagedAppendReference's and q is rotated as the keys are, rounded to the
// DType as the kernels' copy of it is.
func (f *Forward) PagedReference(in PagedInputs, ps PagedShape) (o, lse []float64, err error) {
	c, err := f.checkPaged(in, ps)
	if err != nil {
		return nil, nil, err
	}
	sh := c.sh
	d, dv, hkv := f.dim, f.dimV, sh.KV()
	vals := Inputs{Scalars: in.Scalars}.modValues()
	scale := float64(f.problem(sh, in.Scale).SoftmaxScale())
	kc, vc, q := f.appendedRef(in, c)
	// gather is sequence b's n keys as [1, Hkv, n, w] from a cache of rows w.
	gather := func(cache []float64, b, n, w int) []float64 {
		return gatherPaged(cache, in.PageTable[b*c.maxPages:][:c.maxPages], ps.PageSize, n, hkv, w)
	}
	perQ, perO := sh.Heads*sh.SeqQ*d, sh.Heads*sh.SeqQ*dv
	o, lse = make([]float64, 0, sh.Batch*perO), make([]float64, 0, sh.Batch*sh.Heads*sh.SeqQ)
	var evalErr firstError
	for b := range sh.Batch {
		n := int(c.lens[b])
		// The mods see this sequence's length; they are compiled for
		// positive ones, and with no keys no mod is called.
		seq := sh
		seq.SeqK = max(n, 1)
		mask, score, err := f.refModsFor(seq, vals, b, &evalErr)
		if err != nil {
			return nil, nil, err
		}
		rs := reference.Shape{B: 1, H: sh.Heads, HKV: hkv, Sq: sh.SeqQ, Sk: n, D: d, DV: dv}
		qb, kb, vb := slices.Clone(q[b*perQ:][:perQ]), gather(kc, b, n, d), gather(vc, b, n, dv)
		so, slse := reference.AttentionSinks(qb, kb, vb, rs, scale, mask, score, float64s(in.Sinks))
		o, lse = append(o, so...), append(lse, slse...)
	}
	return o, lse, evalErr.get()
}
