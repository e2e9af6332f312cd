package attention

import (
	"slices"

	"github.com/fac-compiler/fac/launch"
)

// Ragged continuous batches (docs/decoding.md#ragged-batches) run
// flash_fwd_paged_varlen, then flash_fwd_combine. The split kernel's
// Problem.Shape has Batch = the sequences, SeqQ and SeqK the longest query
// and cache lengths; TotalQ is the packed query count (q [TotalQ, H, D]);
// Problem.Lens holds the cache geometry (PagedNumPages, PagedPageSize,
// PagedMaxPages), the block-mask lists' lengths (VarlenKVLists) and
// PagedVarlenTiles, the length of the tile list (tile_seq, tile_q) and
// the grid's first axis. flash_fwd_combine is bound on the packed
// problem: one batch of TotalQ positions, with O's strides making it
// [TotalQ, H, Dv].
const PagedVarlenTiles = "tiles"

// FlashFwdPagedVarlen is flash_fwd_paged_varlen.fa's launch contract: one
// program per (listed q tile, packed head, split).
var FlashFwdPagedVarlen = &launch.Contract{
	Kernel: "flash_fwd_paged_varlen",
	File:   "flash_fwd_paged_varlen.fa",
	Tensors: slices.Concat([]launch.Tensor{
		{Name: "q", Dims: varlenQDims, Strides: []string{"stride_qt", "stride_qh"}},
		{Name: "o_partial", Output: true, Dims: packedPartialDims},
		{Name: "lse_partial", Output: true, Dims: packedLSEPartialDims},
	}, pagedCacheTensors, []launch.Tensor{
		{Name: "cu_seqlens_q", Dims: cuSeqlensDims},
		{Name: "tile_seq", Dims: lensDims(PagedVarlenTiles)},
		{Name: "tile_q", Dims: lensDims(PagedVarlenTiles)},
	}, varlenListTensors(VarlenKVLists)),
	Scalars: []launch.Scalar{
		pageSizeScalar,
		{Name: "heads", Value: func(p launch.Problem) any { return p.Shape.Heads }},
		{Name: "kv_group", Value: func(p launch.Problem) any { return p.Shape.Heads / p.Shape.KV() }},
		{Name: "total_q", Value: func(p launch.Problem) any { return p.TotalQ }},
		{Name: "scale", Value: func(p launch.Problem) any { return p.SoftmaxScale() }},
		{Name: "pack", Value: func(p launch.Problem) any { return p.PackHeads() }},
		{Name: "q_per_tile", Value: func(p launch.Problem) any {
			return QPerTile(p.Attr("BLOCK_M"), p.PackHeads(), p.Attr("SPARSE_Q"))
		}},
		{Name: "num_splits", Value: func(p launch.Problem) any { return p.Splits() }},
		{Name: "split_stride", Value: func(p launch.Problem) any { return p.Shape.Heads * p.TotalQ }},
	},
	Mods: []string{"mask", "score"},
	Grid: func(p launch.Problem) [3]int {
		return [3]int{p.Lens[PagedVarlenTiles], p.Shape.Heads / p.PackHeads(), p.Splits()}
	},
	Check: checkSplitKV,
}

func init() { register(FlashFwdPagedVarlen) }

// PagedVarlen is a ragged continuous batch over a paged KV cache: the
// split kernel over every sequence's q tiles, then the merge (with the
// sinks where the forward has them), with varlen's per-sequence block
// mask.
var PagedVarlen = &Variant{
	Name:      "paged varlen",
	Kernels:   splitThenCombine(FlashFwdPagedVarlen),
	Lists:     &VarlenKVLists,
	Workspace: []string{"o_partial", "lse_partial"},
	Results:   SplitKV.Results,
}

func init() { registerVariant(PagedVarlen) }

// packedPartialDims are o_partial's dims for TotalQ packed positions:
// [splits, H, TotalQ, Dv], flash_fwd_combine's [splits, 1, H, TotalQ, Dv].
func packedPartialDims(p launch.Problem) []int {
	return []int{p.Splits(), p.Shape.Heads, p.TotalQ, p.Shape.VDim()}
}

// packedLSEPartialDims are lse_partial's: [splits, H, TotalQ].
func packedLSEPartialDims(p launch.Problem) []int {
	return []int{p.Splits(), p.Shape.Heads, p.TotalQ}
}
