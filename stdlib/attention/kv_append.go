package attention

import (
	"fmt"

	"github.com/fac-compiler/fac/launch"
)

// A paged call that appends (docs/decoding.md#appending-to-the-cache) runs
// kv_append before the paged kernels. Its problem is the paged call's:
// Shape.SeqQ is the appended length (q's rows and k_new's), and beside the
// cache geometry Problem.Lens holds the rotary embedding: AppendRotaryDim
// (0: none), AppendRotaryInterleaved (1: GPT-J's pairs, 0: GPT-NeoX's) and
// AppendRotaryRows, the rows (positions) of the tables.
const (
	AppendRotaryDim         = "rotary_dim"
	AppendRotaryInterleaved = "rotary_interleaved"
	AppendRotaryRows        = "rotary_rows"
)

// KVAppend is kv_append.fa's launch contract. q is its output, the rotated
// copy of q_in that flash_fwd_paged reads; k_cache and v_cache are inputs
// it writes rows of in place (a kernel output would be a buffer of its
// own, not the caller's cache).
var KVAppend = &launch.Contract{
	Kernel: "kv_append",
	File:   "kv_append.fa",
	Tensors: append([]launch.Tensor{
		{Name: "q_in", Dims: qDims, Strides: []string{"stride_qib", "stride_qih", "stride_qis"}},
		{Name: "k_new", Dims: newRowsDims(false), Strides: []string{"stride_knb", "stride_kns", "stride_knh"}},
		{Name: "v_new", Dims: newRowsDims(true), Strides: []string{"stride_vnb", "stride_vns", "stride_vnh"}},
		{Name: "rotary_cos", Dims: rotaryDims},
		{Name: "rotary_sin", Dims: rotaryDims},
		{Name: "q", Output: true, Dims: qDims, Strides: []string{"stride_qb", "stride_qh", "stride_qs"}},
	}, pagedCacheTensors...),
	Scalars: []launch.Scalar{
		pageSizeScalar,
		{Name: "kv_group", Value: func(p launch.Problem) any { return p.Shape.Heads / p.Shape.KV() }},
		{Name: "seqlen_new", Value: func(p launch.Problem) any { return p.Shape.SeqQ }},
		{Name: "rotary_dim", Value: func(p launch.Problem) any { return p.Lens[AppendRotaryDim] }},
		{Name: "interleaved", Value: func(p launch.Problem) any { return p.Lens[AppendRotaryInterleaved] }},
	},
	Grid: func(p launch.Problem) [3]int {
		return [3]int{launch.CeilDiv(p.Shape.SeqQ, p.Attr("BLOCK_M")), p.Shape.Batch, p.Shape.Heads}
	},
	Check: func(p launch.Problem) error {
		if err := checkDim(p); err != nil {
			return err
		}
		if r := p.Lens[AppendRotaryDim]; r < 0 || r%2 != 0 || r > p.Shape.Dim {
			return fmt.Errorf("rotary dim %d: want an even count of 0 to the head dim %d", r, p.Shape.Dim)
		}
		return nil
	},
}

func init() { register(KVAppend) }

// newRowsDims are k_new's dims, or v_new's (V's head dim) when v: [B,
// appended rows, Hkv, D], FlashAttention's layout of k and v.
func newRowsDims(v bool) func(p launch.Problem) []int {
	return func(p launch.Problem) []int {
		d := p.Shape.Dim
		if v {
			d = p.Shape.VDim()
		}
		return []int{p.Shape.Batch, p.Shape.SeqQ, p.Shape.KV(), d}
	}
}

// rotaryDims are the rotary tables' dims: [positions, rotary_dim / 2]
// (none read without a rotary embedding).
func rotaryDims(p launch.Problem) []int {
	return []int{p.Lens[AppendRotaryRows], p.Lens[AppendRotaryDim] / 2}
}
