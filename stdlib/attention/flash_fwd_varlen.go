package attention

import (
	"fmt"

	"github.com/fac-compiler/fac/launch"
)

// FlashFwdVarlen is flash_fwd_varlen.fa's contract: one program per (q
// tile of the longest sequence, sequence × head). Problem.Shape has Batch =
// the number of sequences and SeqQ, SeqK = the longest ones; q, o are
// [TotalQ, H, D] and k, v [TotalK, Hkv, D] with token and head strides; lse
// is [H, TotalQ]; cu_seqlens_q/k are [Batch + 1] i32.
var FlashFwdVarlen = &launch.Contract{
	Kernel: "flash_fwd_varlen",
	File:   "flash_fwd_varlen.fa",
	Tensors: []launch.Tensor{
		{Name: "q", Dims: varlenQDims, Strides: []string{"stride_qt", "stride_qh"}},
		{Name: "k", Dims: varlenKVDims, Strides: []string{"stride_kt", "stride_kh"}},
		{Name: "v", Dims: varlenKVDims, Strides: []string{"stride_vt", "stride_vh"}},
		{Name: "o", Output: true, Dims: varlenQDims, Strides: []string{"stride_ot", "stride_oh"}},
		{Name: "lse", Output: true, Dims: func(p launch.Problem) []int { return []int{p.Shape.Heads, p.TotalQ} }},
		{Name: "cu_seqlens_q", Dims: cuSeqlensDims},
		{Name: "cu_seqlens_k", Dims: cuSeqlensDims},
	},
	Scalars: []launch.Scalar{
		{Name: "heads", Value: func(p launch.Problem) any { return p.Shape.Heads }},
		{Name: "kv_group", Value: func(p launch.Problem) any { return p.Shape.Heads / p.Shape.KV() }},
		{Name: "total_q", Value: func(p launch.Problem) any { return p.TotalQ }},
		{Name: "scale", Value: func(p launch.Problem) any { return p.SoftmaxScale() }},
	},
	Mods: []string{"mask", "score"},
	Grid: func(p launch.Problem) [3]int {
		return [3]int{launch.CeilDiv(p.Shape.SeqQ, p.Attr("BLOCK_M")), p.Shape.Batch * p.Shape.Heads, 1}
	},
	Check: func(p launch.Problem) error {
		if d := p.Attr("HEAD_DIM"); p.Shape.Dim != d {
			return fmt.Errorf("shape: head dim %d, but the kernel was compiled for %d", p.Shape.Dim, d)
		}
		return nil
	},
}

func varlenQDims(p launch.Problem) []int { return []int{p.TotalQ, p.Shape.Heads, p.Shape.Dim} }

func varlenKVDims(p launch.Problem) []int { return []int{p.TotalK, p.Shape.KV(), p.Shape.Dim} }

func cuSeqlensDims(p launch.Problem) []int { return []int{p.Shape.Batch + 1} }

func init() { register(FlashFwdVarlen) }
