package attention

import (
	"fmt"

	"github.com/fac-compiler/fac/launch"
)

// Decoding runs two kernels (see docs/decoding.md):
//
//	flash_fwd_splitkv  partial O_s, LSE_s per split   grid (q tiles, B·H/pack, num_splits)
//	flash_fwd_combine  O, LSE from the splits         grid (B·H·Sq)
//
// or, with flash_fwd_splitkv's fused_combine, the first alone: the last
// program of each q tile merges the tile's splits (SplitKVFused).
// Problem.NumSplits is the number of splits, Problem.Pack the query heads
// packed into a tile (PackGQA; 1 = none). The workspace tensors o_partial
// [num_splits, B, H, Sq, Dv] (V's head dim) and lse_partial [num_splits, B,
// H, Sq] are f32 and contiguous; split_counters, the i32 counters of the
// fused merge, are zeroed once and left zeroed.

// FlashFwdSplitKV is flash_fwd_splitkv.fa's launch contract: flash_fwd's
// tensors and block mask, with the partial results; o, lse and
// split_counters are written and read only with fused_combine (the
// runtime binds them either way: they are the kernel's parameters).
var FlashFwdSplitKV = &launch.Contract{
	Kernel: "flash_fwd_splitkv",
	File:   "flash_fwd_splitkv.fa",
	Tensors: []launch.Tensor{
		{Name: "q", Dims: qDims, Strides: []string{"stride_qb", "stride_qh", "stride_qs"}},
		{Name: "k", Dims: kvDims, Strides: []string{"stride_kb", "stride_kh", "stride_ks"}},
		{Name: "v", Dims: vDims, Strides: []string{"stride_vb", "stride_vh", "stride_vs"}},
		{Name: "o_partial", Output: true, Dims: oPartialDims},
		{Name: "lse_partial", Output: true, Dims: lsePartialDims},
		fusedCombineTensors[0], fusedCombineTensors[1], fusedCombineTensors[2],
	},
	Scalars: append(append([]launch.Scalar(nil), attentionScalars...),
		launch.Scalar{Name: "pack", Value: func(p launch.Problem) any { return p.PackHeads() }},
		launch.Scalar{Name: "q_per_tile", Value: func(p launch.Problem) any {
			return QPerTile(p.Attr("BLOCK_M"), p.PackHeads(), p.Attr("SPARSE_Q"))
		}},
		launch.Scalar{Name: "num_splits", Value: func(p launch.Problem) any { return p.Splits() }},
		launch.Scalar{Name: "split_stride", Value: splitStride},
	),
	BlockMask: launch.KVBlockMask,
	Mods:      []string{"mask", "score"},
	Grid: func(p launch.Problem) [3]int {
		qpt := QPerTile(p.Attr("BLOCK_M"), p.PackHeads(), p.Attr("SPARSE_Q"))
		return [3]int{launch.CeilDiv(p.Shape.SeqQ, max(qpt, 1)), p.Shape.Batch * p.Shape.Heads / p.PackHeads(), p.Splits()}
	},
	Check: checkSplitKV,
}

// FlashFwdCombine is flash_fwd_combine.fa's launch contract: one program
// per row (b, h, q_idx).
var FlashFwdCombine = &launch.Contract{
	Kernel: "flash_fwd_combine",
	File:   "flash_fwd_combine.fa",
	Tensors: []launch.Tensor{
		{Name: "o_partial", Dims: oPartialDims},
		{Name: "lse_partial", Dims: lsePartialDims},
		{Name: "o", Output: true, Dims: oDims, Strides: []string{"stride_ob", "stride_oh", "stride_os"}},
		{Name: "lse", Output: true, Dims: lseDims},
	},
	Scalars: []launch.Scalar{
		{Name: "heads", Value: func(p launch.Problem) any { return p.Shape.Heads }},
		{Name: "seqlen_q", Value: func(p launch.Problem) any { return p.Shape.SeqQ }},
		{Name: "num_splits", Value: func(p launch.Problem) any { return p.Splits() }},
		{Name: "split_stride", Value: splitStride},
	},
	Grid: func(p launch.Problem) [3]int {
		return [3]int{p.Shape.Batch * p.Shape.Heads * p.Shape.SeqQ, 1, 1}
	},
	Check: func(p launch.Problem) error {
		if err := checkDim(p); err != nil {
			return err
		}
		if n, m := p.Splits(), p.Attr("MAX_SPLITS"); n > m {
			return fmt.Errorf("%d splits, but flash_fwd_combine was compiled for at most MAX_SPLITS = %d", n, m)
		}
		return nil
	},
}

// FlashFwdCombineSinks is flash_fwd_combine_sinks.fa's contract:
// FlashFwdCombine's plus sinks, the per-head sink logits [H] f32, which
// the merge adds to each row's denominator.
var FlashFwdCombineSinks = withSinks(FlashFwdCombine)

func init() {
	register(FlashFwdSplitKV)
	register(FlashFwdCombine)
	register(FlashFwdCombineSinks)
}

// SplitKV is the forward pass split over the keys (decoding): each split's
// partial results in the workspace, then their combination. With sinks
// the splits are the same (a sink is no key) and the combination adds the
// sink (flash_fwd_combine_sinks). The split kernel's counters join the
// workspace: it takes them whether or not it merges in place.
var SplitKV = &Variant{
	Name:      "split-KV",
	Kernels:   splitThenCombine(FlashFwdSplitKV),
	Workspace: []string{"o_partial", "lse_partial", "split_counters"},
	Results:   []string{"o", "lse"},
}

// SplitKVFused is SplitKV merged in place (flash_fwd_splitkv compiled with
// fused_combine): the last program of each q tile to finish merges the
// tile's splits, so no flash_fwd_combine is launched. It has no sinks
// (flash_fwd_combine_sinks adds them).
var SplitKVFused = &Variant{
	Name:      "split-KV, fused combine",
	Kernels:   mergedInPlace(FlashFwdSplitKV),
	InPlace:   true,
	Workspace: SplitKV.Workspace,
	Results:   SplitKV.Results,
}

func init() {
	registerVariant(SplitKV)
	registerVariant(SplitKVFused)
}

// splitThenCombine is a split-KV family's kernels: split, then the
// merge, with the sinks where the forward has them.
func splitThenCombine(split *launch.Contract) func(VariantOptions) ([]*launch.Contract, error) {
	return func(o VariantOptions) ([]*launch.Contract, error) {
		if o.Sinks {
			return []*launch.Contract{split, FlashFwdCombineSinks}, nil
		}
		return []*launch.Contract{split, FlashFwdCombine}, nil
	}
}

// mergedInPlace is a split-KV family's kernels when the split kernel
// merges in place (fused_combine): the split kernel alone, without sinks.
func mergedInPlace(split *launch.Contract) func(VariantOptions) ([]*launch.Contract, error) {
	return func(o VariantOptions) ([]*launch.Contract, error) {
		if o.Sinks {
			return nil, fmt.Errorf("fused_combine merges without sinks (flash_fwd_combine_sinks adds them): leave it off for a forward with sinks")
		}
		return []*launch.Contract{split}, nil
	}
}

// fusedCombineTensors are a split kernel's tensors for merging in place
// (fused_combine), which it takes either way: o and lse, written by the
// last program of each q tile, and its counters, zeroed.
var fusedCombineTensors = []launch.Tensor{
	{Name: "o", Output: true, Dims: oDims, Strides: []string{"stride_ob", "stride_oh", "stride_os"}},
	{Name: "lse", Output: true, Dims: lseDims},
	{Name: "split_counters", Dims: splitCounterDims, Zeroed: true},
}

// QPerTile is the number of query positions in one tile of
// flash_fwd_splitkv with pack heads per tile: the largest power of two
// that is at most blockM / pack and divides sparseQ (so that a tile's
// positions lie in one block of the block mask); 0 when pack > blockM.
func QPerTile(blockM, pack, sparseQ int) int {
	if pack < 1 || blockM < pack {
		return 0
	}
	n := 1
	for 2*n <= blockM/pack && sparseQ%(2*n) == 0 {
		n *= 2
	}
	return n
}

func oPartialDims(p launch.Problem) []int {
	return []int{p.Splits(), p.Shape.Batch, p.Shape.Heads, p.Shape.SeqQ, p.Shape.VDim()}
}

func lsePartialDims(p launch.Problem) []int {
	return []int{p.Splits(), p.Shape.Batch, p.Shape.Heads, p.Shape.SeqQ}
}

// splitCounterDims are split_counters' dims: one counter per q tile of
// flash_fwd_splitkv's grid, sized for B·H·Sq tiles, the most any packing
// makes (a tile holds at least one position of one head), so that one
// workspace serves every plan of a shape.
func splitCounterDims(p launch.Problem) []int {
	return []int{p.Shape.Batch * p.Shape.Heads * p.Shape.SeqQ}
}

// splitStride is the elements of lse_partial per split (rows of o_partial).
func splitStride(p launch.Problem) any { return p.Shape.Batch * p.Shape.Heads * p.Shape.SeqQ }

// checkSplitKV checks the head dim, the kv tile against the mask blocks
// (a tile's query positions, q_per_tile, divide SPARSE_Q by construction)
// and the split and pack geometry.
func checkSplitKV(p launch.Problem) error {
	if err := checkDim(p); err != nil {
		return err
	}
	pack, bm := p.PackHeads(), p.Attr("BLOCK_M")
	switch {
	case p.Attr("SPARSE_K")%p.Attr("BLOCK_N") != 0:
		return fmt.Errorf("mask blocks of %d keys must be multiples of the kernel tile's BLOCK_N = %d", p.Attr("SPARSE_K"), p.Attr("BLOCK_N"))
	case p.Splits() > 65535:
		return fmt.Errorf("%d splits: at most 65535 (grid axis 2)", p.Splits())
	case (p.Shape.Heads/p.Shape.KV())%pack != 0:
		return fmt.Errorf("PackGQA packs %d query heads per tile, which does not divide the %d query heads per kv head", pack, p.Shape.Heads/p.Shape.KV())
	case pack > bm:
		return fmt.Errorf("PackGQA packs %d query heads per tile, more than the tile's BLOCK_M = %d rows", pack, bm)
	}
	return nil
}
