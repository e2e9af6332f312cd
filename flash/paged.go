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
}

// pagedCall is a checked paged call: its dense shape (SeqK the longest
// cache length), the cache geometry and the plan.
type pagedCall struct {
	sh                         Shape
	numPages, maxPages, maxLen int
}

// checkPaged checks a paged call's tensors against ps and each other.
func (f *Forward) checkPaged(in PagedInputs, ps PagedShape) (pagedCall, error) {
	var c pagedCall
	if ps.KVHeads == 0 {
		ps.KVHeads = ps.Heads
	}
	if ps.Batch <= 0 || ps.Heads <= 0 || ps.KVHeads <= 0 || ps.SeqQ <= 0 {
		return c, fmt.Errorf("paged shape %+v: batch, heads, kv heads and seqlen_q must be positive", ps)
	}
	if ps.PageSize <= 0 {
		return c, fmt.Errorf("page size %d: want a positive count of keys per page", ps.PageSize)
	}
	d, dv := f.dim, f.dimV
	row := ps.PageSize * ps.KVHeads
	if len(in.KCache) == 0 || len(in.KCache)%(row*d) != 0 {
		return c, fmt.Errorf("k_cache has %d elements: want [num_pages, %d, %d, %d] with num_pages ≥ 1", len(in.KCache), ps.PageSize, ps.KVHeads, d)
	}
	c.numPages = len(in.KCache) / (row * d)
	if len(in.VCache) != c.numPages*row*dv {
		return c, fmt.Errorf("v_cache has %d elements: want [%d, %d, %d, %d] as k_cache", len(in.VCache), c.numPages, ps.PageSize, ps.KVHeads, dv)
	}
	if len(in.PageTable) == 0 || len(in.PageTable)%ps.Batch != 0 {
		return c, fmt.Errorf("page_table has %d elements: want [%d, max_pages] with max_pages ≥ 1", len(in.PageTable), ps.Batch)
	}
	c.maxPages = len(in.PageTable) / ps.Batch
	if len(in.CacheSeqlens) != ps.Batch {
		return c, fmt.Errorf("cache_seqlens has %d elements: want %d (one per sequence)", len(in.CacheSeqlens), ps.Batch)
	}
	if int64(c.numPages)*int64(row)*int64(max(d, dv)) > 1<<31-1 {
		return c, fmt.Errorf("a cache of %d pages exceeds 32-bit offsets", c.numPages)
	}
	for b, n := range in.CacheSeqlens {
		if n < 0 || int(n) > c.maxPages*ps.PageSize {
			return c, fmt.Errorf("cache_seqlens[%d] = %d: want 0 to max_pages · page_size = %d", b, n, c.maxPages*ps.PageSize)
		}
		for j := 0; j < launch.CeilDiv(int(n), ps.PageSize); j++ {
			if pg := in.PageTable[b*c.maxPages+j]; pg < 0 || int(pg) >= c.numPages {
				return c, fmt.Errorf("page_table[%d, %d] = %d: want a page of 0 to %d", b, j, pg, c.numPages-1)
			}
		}
		c.maxLen = max(c.maxLen, int(n))
	}
	c.sh = Shape{Batch: ps.Batch, Heads: ps.Heads, KVHeads: ps.KVHeads, SeqQ: ps.SeqQ, SeqK: max(c.maxLen, 1), Dim: d}
	if dv != d {
		c.sh.DimV = dv
	}
	if err := c.sh.Validate(); err != nil {
		return c, err
	}
	if len(in.Q) != ps.Batch*ps.Heads*ps.SeqQ*d {
		return c, fmt.Errorf("q has %d elements: want [%d, %d, %d, %d]", len(in.Q), ps.Batch, ps.Heads, ps.SeqQ, d)
	}
	if !f.splitKVCapable() {
		return c, fmt.Errorf("kernel %s has no paged form (sinks, varlen and the .full variant run on dense tensors)", f.res.Kernel)
	}
	if aux := f.AuxTensors(); len(aux) > 0 {
		return c, fmt.Errorf("the paged kernel takes no aux tensors yet, and the mods read %v", aux)
	}
	return c, f.checkScalars(in.Scalars)
}

// PagedPlan is the plan a paged call of shape ps runs with caches up to
// maxLen keys: flash_fwd_paged's tile, splits and packing, chosen as Plan
// chooses them for the dense shape of that length (SplitKV is always true).
func (f *Forward) PagedPlan(ps PagedShape, maxLen, sms int) (DecodePlan, error) {
	kv := ps.KVHeads
	if kv == 0 {
		kv = ps.Heads
	}
	sh := Shape{Batch: ps.Batch, Heads: ps.Heads, KVHeads: kv, SeqQ: ps.SeqQ, SeqK: max(maxLen, 1), Dim: f.dim}
	if f.dimV != f.dim {
		sh.DimV = f.dimV
	}
	return f.pagedPlan(sh, sms, f.opts.PackGQA)
}

func (f *Forward) pagedPlan(sh Shape, sms int, pk PackGQA) (DecodePlan, error) {
	if !f.splitKVCapable() {
		return DecodePlan{}, fmt.Errorf("kernel %s has no paged form (sinks, varlen and the .full variant run on dense tensors)", f.res.Kernel)
	}
	p, err := f.plan(sh, sms, pk)
	p.SplitKV, p.Paged = true, true
	return p, err
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
	sh := c.sh
	plan, err := f.pagedPlan(sh, 0, f.opts.PackGQA)
	if err != nil {
		return nil, nil, err
	}
	// The block mask is varlen's for sequences of SeqQ queries and their
	// cache lengths: logical kv blocks, none past a sequence's end.
	cuQ, cuK := make([]int32, sh.Batch+1), make([]int32, sh.Batch+1)
	for b, n := range in.CacheSeqlens {
		cuQ[b+1], cuK[b+1] = cuQ[b]+int32(sh.SeqQ), cuK[b]+n
	}
	vin := VarlenInputs{CuSeqlensQ: cuQ, CuSeqlensK: cuK, Scalars: in.Scalars}
	sq, sk := f.sparse()
	bm, err := buildVarlenBlockMask(f.res.Program, f.res.Mask, vin, sh.Heads, sq, sk, f.maskParams(vin.modValues()))
	if err != nil {
		return nil, nil, err
	}
	// A packed tile reads its group's first head's rows: where the mask
	// reads h those differ, and auto packing gives way.
	if plan.Pack > 1 && !sharedGroupRows(bm.kv.rowStart, plan.Pack) {
		if f.opts.PackGQA == PackGQAOn {
			return nil, nil, fmt.Errorf("PackGQA on: mask %s reads h, so a packed tile's heads need their own block-mask rows, which the paged kernel does not take (set PackGQA auto or off)", bm.mask)
		}
		if plan, err = f.pagedPlan(sh, 0, PackGQAOff); err != nil {
			return nil, nil, err
		}
	}
	paged, err := f.splitFamilyKernel(attention.FlashFwdPaged, plan.BlockM)
	if err != nil {
		return nil, nil, err
	}
	comb, err := f.combineKernel(plan.NumSplits)
	if err != nil {
		return nil, nil, err
	}
	host := map[string]any{"q": in.Q, "k_cache": in.KCache, "v_cache": in.VCache, "page_table": in.PageTable, "cache_seqlens": in.CacheSeqlens}
	lens := map[string]int{attention.PagedNumPages: c.numPages, attention.PagedPageSize: ps.PageSize, attention.PagedMaxPages: c.maxPages}
	bm.kv.hostData(attention.VarlenKVLists, host, lens)
	p := launch.Problem{Shape: sh, Attrs: paged.Attrs(), Scale: in.Scale, NumSplits: plan.NumSplits, Pack: plan.Pack, Lens: lens}
	call, err := attention.FlashFwdPaged.Bind(paged.Params(), launch.Request{Problem: p, Scalars: in.Scalars})
	if err != nil {
		return nil, nil, err
	}
	part, err := cpu.Run(ctx, paged.Module, call, host)
	if err != nil {
		return nil, nil, err
	}
	p = launch.Problem{Shape: sh, Attrs: comb.Attrs(), NumSplits: plan.NumSplits}
	ccall, err := attention.FlashFwdCombine.Bind(comb.Params(), launch.Request{Problem: p})
	if err != nil {
		return nil, nil, err
	}
	out, err := cpu.Run(ctx, comb.Module, ccall, map[string]any{"o_partial": part["o_partial"], "lse_partial": part["lse_partial"]})
	if err != nil {
		return nil, nil, err
	}
	return out["o"].F32(), out["lse"].F32(), nil
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
// seqlen_k its length).
func (f *Forward) PagedReference(in PagedInputs, ps PagedShape) (o, lse []float64, err error) {
	c, err := f.checkPaged(in, ps)
	if err != nil {
		return nil, nil, err
	}
	sh := c.sh
	d, dv, hkv := f.dim, f.dimV, sh.KV()
	vals := Inputs{Scalars: in.Scalars}.modValues()
	scale := float64(f.problem(sh, in.Scale).SoftmaxScale())
	q, kc, vc := roundTo(in.Q, f.dtype), roundTo(in.KCache, f.dtype), roundTo(in.VCache, f.dtype)
	// gather is sequence b's n keys as [1, Hkv, n, w] from a cache of rows w.
	gather := func(cache []float64, b, n, w int) []float64 {
		out := make([]float64, hkv*n*w)
		for j := range n {
			pg := int(in.PageTable[b*c.maxPages+j/ps.PageSize])
			at := (pg*ps.PageSize + j%ps.PageSize) * hkv
			for h := range hkv {
				copy(out[(h*n+j)*w:][:w], cache[(at+h)*w:][:w])
			}
		}
		return out
	}
	perQ, perO := sh.Heads*sh.SeqQ*d, sh.Heads*sh.SeqQ*dv
	o, lse = make([]float64, 0, sh.Batch*perO), make([]float64, 0, sh.Batch*sh.Heads*sh.SeqQ)
	var evalErr firstError
	for b := range sh.Batch {
		n := int(in.CacheSeqlens[b])
		// The mods see this sequence's length; they are compiled for
		// positive ones, and with no keys no mod is called.
		seq := sh
		seq.SeqK = max(n, 1)
		mask, score, err := f.refModsFor(seq, vals, b, &evalErr)
		if err != nil {
			return nil, nil, err
		}
		so, slse := reference.Attention(slices.Clone(q[b*perQ:][:perQ]), gather(kc, b, n, d), gather(vc, b, n, dv),
			reference.Shape{B: 1, H: sh.Heads, HKV: hkv, Sq: sh.SeqQ, Sk: n, D: d, DV: dv}, scale, mask, score)
		o, lse = append(o, so...), append(lse, slse...)
	}
	return o, lse, evalErr.get()
}
