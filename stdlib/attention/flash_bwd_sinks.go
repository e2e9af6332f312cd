package attention

import "github.com/fac-compiler/fac/launch"

// FlashBwdSinks is flash_bwd_sinks.fa's launch contract: one program per
// query head sums the sink gradient of its rows (lse [B, H, Sq] f32, delta
// as flash_bwd_preprocess leaves it; sinks, dsinks [H] f32).
var FlashBwdSinks = &launch.Contract{
	Kernel: "flash_bwd_sinks",
	File:   "flash_bwd_sinks.fa",
	Tensors: []launch.Tensor{
		{Name: "lse", Dims: lseDims},
		{Name: "delta", Dims: rowWorkDims},
		{Name: "sinks", Dims: sinksDims},
		{Name: "dsinks", Output: true, Dims: sinksDims},
	},
	Scalars: []launch.Scalar{
		{Name: "batch", Value: func(p launch.Problem) any { return p.Shape.Batch }},
		{Name: "heads", Value: func(p launch.Problem) any { return p.Shape.Heads }},
		{Name: "seqlen_q", Value: func(p launch.Problem) any { return p.Shape.SeqQ }},
	},
	Grid: func(p launch.Problem) [3]int { return [3]int{p.Shape.Heads, 1, 1} },
}

func init() { register(FlashBwdSinks) }

// sinksDims is one value per query head.
func sinksDims(p launch.Problem) []int { return []int{p.Shape.Heads} }
