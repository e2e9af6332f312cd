package attention

import (
	"math/bits"
	"strconv"

	"github.com/fac-compiler/fac/launch"
)

// BlockClassify is block_classify.fa's launch contract. Its problem's
// Batch and Heads are those of the block mask (1 over a dimension the mask
// ignores); one program per (q block, batch × head) writes the classes of
// one row of blocks.
var BlockClassify = &launch.Contract{
	Kernel: "block_classify",
	File:   "block_classify.fa",
	Tensors: []launch.Tensor{
		{Name: "classes", Output: true, Dims: func(p launch.Problem) []int {
			return []int{p.Shape.Batch, p.Shape.Heads, numQ(p), numK(p)}
		}},
	},
	Scalars: []launch.Scalar{
		{Name: "heads", Value: func(p launch.Problem) any { return p.Shape.Heads }},
		{Name: "num_q", Value: func(p launch.Problem) any { return numQ(p) }},
		{Name: "num_k", Value: func(p launch.Problem) any { return numK(p) }},
		{Name: "seqlen_q", Value: func(p launch.Problem) any { return p.Shape.SeqQ }},
		{Name: "seqlen_k", Value: func(p launch.Problem) any { return p.Shape.SeqK }},
	},
	Mods: []string{"mask"},
	Grid: func(p launch.Problem) [3]int { return [3]int{numQ(p), p.Shape.Batch * p.Shape.Heads, 1} },
}

// ClassifyConsts are block_classify's compile-time arguments for blocks of
// bq × bk: the blocks, and the power-of-two tiles holding them.
func ClassifyConsts(bq, bk int) map[string]string {
	tile := func(n int) string { return strconv.Itoa(1 << bits.Len(uint(n-1))) }
	return map[string]string{"BLOCK_Q": strconv.Itoa(bq), "BLOCK_K": strconv.Itoa(bk), "TILE_Q": tile(bq), "TILE_K": tile(bk)}
}

func numQ(p launch.Problem) int { return launch.CeilDiv(p.Shape.SeqQ, p.Attr("BLOCK_Q")) }
func numK(p launch.Problem) int { return launch.CeilDiv(p.Shape.SeqK, p.Attr("BLOCK_K")) }

func init() { register(BlockClassify) }
