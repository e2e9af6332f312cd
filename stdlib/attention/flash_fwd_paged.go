package attention

import "github.com/fac-compiler/fac/launch"

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

// FlashFwdPaged is flash_fwd_paged.fa's launch contract.
var FlashFwdPaged = &launch.Contract{
	Kernel: "flash_fwd_paged",
	File:   "flash_fwd_paged.fa",
	Tensors: append([]launch.Tensor{
		{Name: "q", Dims: qDims, Strides: []string{"stride_qb", "stride_qh", "stride_qs"}},
		{Name: "k_cache", Dims: pagedCacheDims(false), Strides: []string{"stride_kp", "stride_ks", "stride_kh"}},
		{Name: "v_cache", Dims: pagedCacheDims(true), Strides: []string{"stride_vp", "stride_vs", "stride_vh"}},
		{Name: "o_partial", Output: true, Dims: oPartialDims},
		{Name: "lse_partial", Output: true, Dims: lsePartialDims},
		{Name: "page_table", Dims: func(p launch.Problem) []int { return []int{p.Shape.Batch, p.Lens[PagedMaxPages]} }, Strides: []string{"stride_pt"}},
		{Name: "cache_seqlens", Dims: func(p launch.Problem) []int { return []int{p.Shape.Batch} }},
	}, varlenListTensors(VarlenKVLists)...),
	Scalars: []launch.Scalar{
		{Name: "page_size", Value: func(p launch.Problem) any { return p.Lens[PagedPageSize] }},
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

func init() { registerVariant(Paged) }

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
