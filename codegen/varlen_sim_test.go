package codegen

import (
	"math"
	"math/rand"

	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// varlenCase is flash_fwd_varlen (front-end snapshot, 128×128 tiles) on
// packed sequences of the given q and k lengths (an empty one included by
// the caller): q, o [total_q, H, D], k, v [total_k, H/group, D] (bf16).
// With packed_loads (the _ws snapshot) a tile running past its sequence
// reads the next one's rows: its loads are bounded by total_q and total_k.
// Each (sequence, head) has one block-mask row per 128-row q block, listing
// its kv blocks from last to first as partial (even) and full (odd), so
// both branches run, partial then full in kv_indices from the row's start.
func varlenCase(file string, D, H, group int, lq, lk []int) simCase {
	const blk = 128
	Hk := H / group
	cuQ, cuK := []int32{0}, []int32{0}
	maxQ := 0
	for i := range lq {
		cuQ = append(cuQ, cuQ[i]+int32(lq[i]))
		cuK = append(cuK, cuK[i]+int32(lk[i]))
		maxQ = max(maxQ, lq[i])
	}
	tq, tk := int(cuQ[len(lq)]), int(cuK[len(lk)])
	var rowStart, np, nf, listStart, idx []int32
	for b := range lq {
		nq, nk := (lq[b]+blk-1)/blk, (lk[b]+blk-1)/blk
		for h := 0; h < H; h++ {
			rowStart = append(rowStart, int32(len(np)))
			for r := 0; r < nq; r++ {
				listStart = append(listStart, int32(len(idx)))
				var part, full []int32
				for c := nk - 1; c >= 0; c-- {
					if c%2 == 0 {
						part = append(part, int32(c))
					} else {
						full = append(full, int32(c))
					}
				}
				np, nf = append(np, int32(len(part))), append(nf, int32(len(full)))
				idx = append(append(idx, part...), full...)
			}
		}
	}
	pad := func(x []int32) []int32 { return append(x, 0) } // never empty
	return simCase{kernel: file, grid: [3]int{(maxQ + blk - 1) / blk, len(lq) * H, 1}, numWarps: 8, rtol: 1e-2, atol: 2e-3,
		args: func(rng *rand.Rand) []any {
			return []any{
				randBuf(rng, "q", tir.BF16, tq*H*D, 1), randBuf(rng, "k", tir.BF16, tk*Hk*D, 1),
				randBuf(rng, "v", tir.BF16, tk*Hk*D, 1), cpu.NewBuffer("o", tir.BF16, tq*H*D),
				cpu.NewBuffer("lse", tir.F32, H*tq),
				cpu.FromI32("cu_seqlens_q", cuQ), cpu.FromI32("cu_seqlens_k", cuK),
				H * D, D, Hk * D, D, Hk * D, D, H * D, D, // token and head strides of q, k, v, o
				H, group, tq, tk, float32(1 / math.Sqrt(float64(D))),
				cpu.FromI32("kv_row_start", rowStart), cpu.FromI32("kv_num_blocks", pad(np)),
				cpu.FromI32("full_kv_num_blocks", pad(nf)), cpu.FromI32("kv_list_start", pad(listStart)),
				cpu.FromI32("kv_indices", pad(idx)),
			}
		}}
}
