package attention

import (
	"fmt"
	"maps"
	"slices"

	"github.com/fac-compiler/fac/launch"
)

// FlashBwdVarlen is flash_bwd_varlen.fa's contract: one program per (kv
// tile of the longest sequence, sequence × kv head). Problem.Shape has
// Batch = the number of sequences and SeqQ, SeqK the longest ones; q is
// [TotalQ, H, D], dout [TotalQ, H, Dv], k, dk [TotalK, Hkv, D] and v, dv
// [TotalK, Hkv, Dv] with token and head strides (Dv: V's head dim);
// lse_log2 (flash_bwd_preprocess's) and delta are [H, TotalQ]; dq_accum [H, TotalQ, D] f32
// (flash_bwd_preprocess and flash_bwd_postprocess on the packed tensors as
// one batch of TotalQ positions); the transposed per-sequence block mask
// (VarlenQLists). Score aux gradients as for FlashBwd.
var FlashBwdVarlen = &launch.Contract{
	Kernel: "flash_bwd_varlen",
	File:   "flash_bwd_varlen.fa",
	Tensors: append([]launch.Tensor{
		{Name: "q", Dims: varlenQDims, Strides: []string{"stride_qt", "stride_qh"}},
		{Name: "k", Dims: varlenKVDims, Strides: []string{"stride_kt", "stride_kh"}},
		{Name: "v", Dims: varlenVDims, Strides: []string{"stride_vt", "stride_vh"}},
		{Name: "dout", Dims: varlenODims, Strides: []string{"stride_dot", "stride_doh"}},
		{Name: "lse_log2", Dims: varlenRowWorkDims},
		{Name: "delta", Dims: varlenRowWorkDims},
		{Name: "dk", Output: true, Dims: varlenKVDims, Strides: []string{"stride_dkt", "stride_dkh"}},
		{Name: "dv", Output: true, Dims: varlenVDims, Strides: []string{"stride_dvt", "stride_dvh"}},
		// Read and written (atomic adds): flash_bwd_preprocess zeroed it.
		{Name: "dq_accum", Dims: func(p launch.Problem) []int { return []int{p.Shape.Heads, p.TotalQ, p.Shape.Dim} }},
		{Name: "cu_seqlens_q", Dims: cuSeqlensDims},
		{Name: "cu_seqlens_k", Dims: cuSeqlensDims},
	}, varlenListTensors(VarlenQLists)...),
	Scalars: append(slices.Clone(varlenScalars), launch.Scalar{Name: "total_k", Value: func(p launch.Problem) any { return p.TotalK }}),
	Mods:    []string{"mask", "score"},
	Grid: func(p launch.Problem) [3]int {
		return [3]int{launch.CeilDiv(p.Shape.SeqK, p.Attr("BLOCK_N")), p.Shape.Batch * p.Shape.KV(), 1}
	},
	Check:      checkHeadDim,
	Tuned:      varlenBwdTiles,
	TunedAlone: []string{"fold_scale", "packed_loads"},
}

// denseBwdOnly are bwdTiles' arguments that flash_bwd_varlen does not
// declare (its dQ goes through atomics, and it has no producer warpgroup).
var denseBwdOnly = []string{"warp_specialize", "DQ_FRAG", "dq_bulk"}

// varlenBwdTiles are flash_bwd's tiles (bwdTiles) on loads bounded by the
// packed tensor (packed_loads), which TMA needs: Q, dO, K and V by TMA,
// LSE and Δ riding with Q. Not timed yet against the loads kept in the
// sequence (cp.async): the forward's packed loads ran 1.6× faster there
// (flash_fwd_varlen.go).
var varlenBwdTiles = func() []launch.TunedSet {
	out := make([]launch.TunedSet, len(bwdTiles))
	for i, s := range bwdTiles {
		args := maps.Clone(s.Args)
		for _, k := range denseBwdOnly {
			delete(args, k)
		}
		args["packed_loads"] = "true"
		out[i] = launch.TunedSet{When: s.When, Args: args}
	}
	return out
}()

// VarlenQLists are flash_bwd_varlen's: the q blocks of each kv block.
var VarlenQLists = VarlenLists{Transposed: true, RowStart: "q_row_start", Counts: "q_num_blocks", FullCounts: "full_q_num_blocks",
	ListStart: "q_list_start", Indices: "q_indices"}

// varlenRowWorkDims is lse_log2's and Δ's as flash_bwd_preprocess leaves
// them for the packed batch: [H·TotalQ + dqAccumPad] (read unmasked).
func varlenRowWorkDims(p launch.Problem) []int { return []int{p.Shape.Heads*p.TotalQ + dqAccumPad} }

func init() { register(FlashBwdVarlen) }

// BackwardVarlen is the backward pass over packed sequences: the
// backward's pre- and postprocess on the packed tensors seen as one batch,
// flash_bwd_varlen between them (dQ through atomics).
var BackwardVarlen = &Variant{
	Name: "varlen backward",
	Kernels: func(o VariantOptions) ([]*launch.Contract, error) {
		if o.Sinks {
			return nil, fmt.Errorf("%s: sinks are not supported yet (nor by flash_fwd_varlen)", FlashBwdVarlen.Kernel)
		}
		return []*launch.Contract{FlashBwdPreprocess, FlashBwdVarlen, FlashBwdPostprocess}, nil
	},
	Main:      1,
	Lists:     &VarlenQLists,
	Workspace: Backward.Workspace,
	Results:   Backward.Results,
}

func init() { registerVariant(BackwardVarlen) }
