package attention

import (
	"slices"

	"github.com/fac-compiler/fac/launch"
)

// Paged decoding runs flash_fwd_paged, then flash_fwd_combine (see
// docs/decoding.md). Problem.Shape is the dense shape of the call with SeqK
// the longest cache length; the cache geometry is in Problem.Lens:
// PagedNumPages and PagedPageSize (k_cache [num_pages, page_size, Hkv, D],
// v_cache with Dv) and PagedMaxPages (page_table [B, max_pages]). The
// per-sequence block mask is flash_fwd_varlen's (VarlenKVLists).
const (
	PagedNumPages = "num_pages"
	PagedPageSize = "page_size"
	PagedMaxPages = "max_pages"
)

// FlashFwdPaged is flash_fwd_paged.fa's launch contract: o, lse and
// split_counters are flash_fwd_splitkv's, for its fused_combine.
var FlashFwdPaged = &launch.Contract{
	Kernel: "flash_fwd_paged",
	File:   "flash_fwd_paged.fa",
	Tensors: slices.Concat([]launch.Tensor{
		{Name: "q", Dims: qDims, Strides: []string{"stride_qb", "stride_qh", "stride_qs"}},
		{Name: "o_partial", Output: true, Dims: oPartialDims},
		{Name: "lse_partial", Output: true, Dims: lsePartialDims},
	}, fusedCombineTensors, pagedCacheTensors, varlenListTensors(VarlenKVLists)),
	Scalars: []launch.Scalar{
		pageSizeScalar,
		{Name: "heads", Value: func(p launch.Problem) any { return p.Shape.Heads }},
		{Name: "kv_group", Value: func(p launch.Problem) any { return p.Shape.Heads / p.Shape.KV() }},
		{Name: "seqlen_q", Value: func(p launch.Problem) any { return p.Shape.SeqQ }},
		{Name: "scale", Value: func(p launch.Problem) any { return p.SoftmaxScale() }},
		{Name: "pack", Value: func(p launch.Problem) any { return p.PackHeads() }},
		{Name: "q_per_tile", Value: func(p launch.Problem) any {
			return QPerTile(p.Attr("BLOCK_M"), p.PackHeads(), p.Attr("SPARSE_Q"))
		}},
		{Name: "num_splits", Value: func(p launch.Problem) any { return p.Splits() }},
		{Name: "split_stride", Value: splitStride},
	},
	Mods:  []string{"mask", "score"},
	Grid:  FlashFwdSplitKV.Grid,
	Check: checkSplitKV,
}

func init() { register(FlashFwdPaged) }

// Paged is split-KV decoding over a paged KV cache, with varlen's
// per-sequence block mask (sequences of SeqQ queries and their cache
// lengths).
var Paged = &Variant{
	Name:      "paged",
	Kernels:   splitThenCombine(FlashFwdPaged),
	Lists:     &VarlenKVLists,
	Workspace: SplitKV.Workspace,
	Results:   SplitKV.Results,
}

// PagedFused is Paged merged in place (flash_fwd_paged's fused_combine),
// as SplitKVFused is SplitKV.
var PagedFused = &Variant{
	Name:      "paged, fused combine",
	Kernels:   mergedInPlace(FlashFwdPaged),
	Lists:     &VarlenKVLists,
	InPlace:   true,
	Workspace: Paged.Workspace,
	Results:   Paged.Results,
}

func init() {
	registerVariant(Paged)
	registerVariant(PagedFused)
}

// PagedAppend is Paged after kv_append: the call first writes k_new and
// v_new into the cache (rotating them and q where it has rotary tables),
// then attends over the longer caches with the copy of q kv_append made.
// That copy joins the workspace after Paged's buffers, so a workspace made
// for appending calls serves calls that do not append.
var PagedAppend = &Variant{
	Name:      "paged append",
	Kernels:   afterAppend(Paged),
	Main:      1,
	Lists:     &VarlenKVLists,
	Workspace: append(append([]string(nil), Paged.Workspace...), "q"),
	Results:   Paged.Results,
}

// PagedAppendFused is PagedAppend merged in place: kv_append, then
// PagedFused's kernel.
var PagedAppendFused = &Variant{
	Name:      "paged append, fused combine",
	Kernels:   afterAppend(PagedFused),
	Main:      1,
	Lists:     &VarlenKVLists,
	InPlace:   true,
	Workspace: PagedAppend.Workspace,
	Results:   Paged.Results,
}

func init() {
	registerVariant(PagedAppend)
	registerVariant(PagedAppendFused)
}

// afterAppend is the kernels of v after kv_append.
func afterAppend(v *Variant) func(VariantOptions) ([]*launch.Contract, error) {
	return func(o VariantOptions) ([]*launch.Contract, error) {
		cs, err := v.Kernels(o)
		if err != nil {
			return nil, err
		}
		return append([]*launch.Contract{KVAppend}, cs...), nil
	}
}

// pagedCacheTensors are the paged cache as the paged kernels and kv_append
// take it: k_cache and v_cache by page, row and head, the page table and
// the lengths.
var pagedCacheTensors = []launch.Tensor{
	{Name: "k_cache", Dims: pagedCacheDims(false), Strides: []string{"stride_kp", "stride_ks", "stride_kh"}},
	{Name: "v_cache", Dims: pagedCacheDims(true), Strides: []string{"stride_vp", "stride_vs", "stride_vh"}},
	{Name: "page_table", Dims: func(p launch.Problem) []int { return []int{p.Shape.Batch, p.Lens[PagedMaxPages]} }, Strides: []string{"stride_pt"}},
	{Name: "cache_seqlens", Dims: func(p launch.Problem) []int { return []int{p.Shape.Batch} }},
}

// pageSizeScalar is the paged kernels' page_size.
var pageSizeScalar = launch.Scalar{Name: "page_size", Value: func(p launch.Problem) any { return p.Lens[PagedPageSize] }}

// pagedCacheDims are k_cache's dims, or v_cache's (V's head dim) when v.
func pagedCacheDims(v bool) func(p launch.Problem) []int {
	return func(p launch.Problem) []int {
		d := p.Shape.Dim
		if v {
			d = p.Shape.VDim()
		}
		return []int{p.Lens[PagedNumPages], p.Lens[PagedPageSize], p.Shape.KV(), d}
	}
}
