package attention

import (
	"fmt"
	"maps"
	"slices"

	"github.com/fac-compiler/fac/launch"
)

// FlashFwdVarlen is flash_fwd_varlen.fa's contract: one program per (q
// tile of the longest sequence, sequence × head). Problem.Shape has Batch =
// the number of sequences and SeqQ, SeqK = the longest ones; q is [TotalQ,
// H, D], o [TotalQ, H, Dv], k [TotalK, Hkv, D] and v [TotalK, Hkv, Dv] with
// token and head strides (Dv: V's head dim, Shape.VDim); lse
// is [H, TotalQ]; cu_seqlens_q/k are [Batch + 1] i32. The per-sequence
// block mask (VarlenKVLists): kv_row_start is [Batch·H]; the row tensors
// and kv_indices are as long as Problem.Lens gives by their names.
var FlashFwdVarlen = &launch.Contract{
	Kernel: "flash_fwd_varlen",
	File:   "flash_fwd_varlen.fa",
	Tensors: append([]launch.Tensor{
		{Name: "q", Dims: varlenQDims, Strides: []string{"stride_qt", "stride_qh"}},
		{Name: "k", Dims: varlenKVDims, Strides: []string{"stride_kt", "stride_kh"}},
		{Name: "v", Dims: varlenVDims, Strides: []string{"stride_vt", "stride_vh"}},
		{Name: "o", Output: true, Dims: varlenODims, Strides: []string{"stride_ot", "stride_oh"}},
		{Name: "lse", Output: true, Dims: func(p launch.Problem) []int { return []int{p.Shape.Heads, p.TotalQ} }},
		{Name: "cu_seqlens_q", Dims: cuSeqlensDims},
		{Name: "cu_seqlens_k", Dims: cuSeqlensDims},
	}, varlenListTensors(VarlenKVLists)...),
	Scalars: append(slices.Clone(varlenScalars), launch.Scalar{Name: "total_k", Value: func(p launch.Problem) any { return p.TotalK }}),
	Mods:    []string{"mask", "score"},
	Grid: func(p launch.Problem) [3]int {
		return [3]int{launch.CeilDiv(p.Shape.SeqQ, p.Attr("BLOCK_M")), p.Shape.Batch * p.Shape.Heads, 1}
	},
	Check: checkHeadDim,
	// flash_fwd's tuned schedule (varlenTiles), with loads bounded by
	// the packed tensor so that they go on TMA.
	Tuned:      varlenTiles,
	TunedAlone: []string{"lazy_rescale", "fold_scale", "packed_loads", "warp_specialize", "num_stages"},
}

// VarlenLists names a varlen kernel's per-sequence block-mask tensors: a
// row is one (sequence, mask head, block), and the rows of (sequence b,
// head h) start at RowStart[b·H + h], one per block along the walked
// direction; Counts and FullCounts give each row's partial and full
// blocks, listed (partial then full) in Indices from ListStart. Their
// lengths are Problem.Lens[Counts] (rows) and Lens[Indices]. Transposed
// lists give the q blocks of each kv block, for kernels walking kv blocks.
type VarlenLists struct {
	Transposed                                       bool
	RowStart, Counts, FullCounts, ListStart, Indices string
}

// VarlenKVLists are flash_fwd_varlen's: the kv blocks of each q block.
var VarlenKVLists = VarlenLists{RowStart: "kv_row_start", Counts: "kv_num_blocks", FullCounts: "full_kv_num_blocks",
	ListStart: "kv_list_start", Indices: "kv_indices"}

func varlenRowStartDims(p launch.Problem) []int { return []int{p.Shape.Batch * p.Shape.Heads} }

// lensDims is a 1-D tensor as long as p.Lens[name] (at least 1 element:
// a kernel is never handed an empty buffer).
func lensDims(name string) func(p launch.Problem) []int {
	return func(p launch.Problem) []int { return []int{max(p.Lens[name], 1)} }
}

func varlenQDims(p launch.Problem) []int { return []int{p.TotalQ, p.Shape.Heads, p.Shape.Dim} }

func varlenKVDims(p launch.Problem) []int { return []int{p.TotalK, p.Shape.KV(), p.Shape.Dim} }

func varlenODims(p launch.Problem) []int { return []int{p.TotalQ, p.Shape.Heads, p.Shape.VDim()} }

func varlenVDims(p launch.Problem) []int { return []int{p.TotalK, p.Shape.KV(), p.Shape.VDim()} }

func cuSeqlensDims(p launch.Problem) []int { return []int{p.Shape.Batch + 1} }

func init() { register(FlashFwdVarlen) }

// ForwardVarlen is the forward pass over packed sequences.
var ForwardVarlen = &Variant{
	Name: "varlen",
	Kernels: func(o VariantOptions) ([]*launch.Contract, error) {
		if o.Sinks {
			return nil, fmt.Errorf("%s: sinks are not supported yet", FlashFwdVarlen.Kernel)
		}
		return []*launch.Contract{FlashFwdVarlen}, nil
	},
	Lists:   &VarlenKVLists,
	Results: []string{"o", "lse"},
}

func init() { registerVariant(ForwardVarlen) }

// varlenTiles are flash_fwd_varlen's tuned sets: flash_fwd's tiles, softmax
// arguments, producer warpgroup and, at D = 128, three K/V buffers, on
// loads bounded by the packed tensor (packed_loads), which TMA and the
// producer need. 1000-token sequences of 16384 tokens, D = 128 (H100,
// BENCHMARKS.md, Varlen): 492 TFLOPS for none within each, against 418
// with two buffers, 404 without the producer, 252 with loads kept in the
// sequence (cp.async), and 408 for the dense kernel's document(1000) row.
// Each argument may be asked for alone (TunedAlone), keeping the rest.
var varlenTiles = func() []launch.TunedSet {
	args := maps.Clone(fwdSoftmaxArgs)
	args["packed_loads"] = "true"
	return []launch.TunedSet{
		{When: for16(64, wgmma), Args: producerTiles(64, args)},
		{When: for16(128, wgmma), Args: producerTiles(128, args)},
	}
}()

// varlenListTensors are the per-sequence block lists' tensors of a varlen
// kernel (l names them).
func varlenListTensors(l VarlenLists) []launch.Tensor {
	return []launch.Tensor{
		{Name: l.RowStart, Dims: varlenRowStartDims},
		{Name: l.Counts, Dims: lensDims(l.Counts)},
		{Name: l.FullCounts, Dims: lensDims(l.Counts)},
		{Name: l.ListStart, Dims: lensDims(l.Counts)},
		{Name: l.Indices, Dims: lensDims(l.Indices)},
	}
}

// varlenScalars are the scalars the varlen kernels take.
var varlenScalars = []launch.Scalar{
	{Name: "heads", Value: func(p launch.Problem) any { return p.Shape.Heads }},
	{Name: "kv_group", Value: func(p launch.Problem) any { return p.Shape.Heads / p.Shape.KV() }},
	{Name: "total_q", Value: func(p launch.Problem) any { return p.TotalQ }},
	{Name: "scale", Value: func(p launch.Problem) any { return p.SoftmaxScale() }},
}
