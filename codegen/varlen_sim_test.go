package codegen

import (
	"math"
	"math/rand"
	"slices"

	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// varlenCase is flash_fwd_varlen (front-end snapshot, 128×128 tiles) on
// packed sequences of the given q and k lengths (an empty one included by
// the caller): q, o [total_q, H, D], k, v [total_k, H/group, D] (bf16).
// With packed_loads (the _ws snapshot) a tile running past its sequence
// reads the next one's rows: its loads are bounded by total_q and total_k.
// Each (sequence, head) has one block-mask row per 128-row q block, listing
// its kv blocks alternately partial and full (simVarlen).
func varlenCase(file string, D, H, group int, lq, lk []int) simCase {
	const blk = 128
	Hk := H / group
	vl := newSimVarlen(lq, lk, H, blk, false)
	tq, tk := vl.tq, vl.tk
	return simCase{kernel: file, grid: [3]int{(slices.Max(lq) + blk - 1) / blk, len(lq) * H, 1}, numWarps: 8, rtol: 1e-2, atol: 2e-3,
		args: func(rng *rand.Rand) []any {
			return []any{
				randBuf(rng, "q", tir.BF16, tq*H*D, 1), randBuf(rng, "k", tir.BF16, tk*Hk*D, 1),
				randBuf(rng, "v", tir.BF16, tk*Hk*D, 1), cpu.NewBuffer("o", tir.BF16, tq*H*D),
				cpu.NewBuffer("lse", tir.F32, H*tq),
				cpu.FromI32("cu_seqlens_q", vl.cuQ), cpu.FromI32("cu_seqlens_k", vl.cuK),
				H * D, D, Hk * D, D, Hk * D, D, H * D, D, // token and head strides of q, k, v, o
				H, group, tq, tk, float32(1 / math.Sqrt(float64(D))),
				cpu.FromI32("kv_row_start", vl.rowStart), cpu.FromI32("kv_num_blocks", vl.np),
				cpu.FromI32("full_kv_num_blocks", vl.nf), cpu.FromI32("kv_list_start", vl.listStart),
				cpu.FromI32("kv_indices", vl.idx),
			}
		}}
}

// varlenBwdCase is a case for flash_bwd_varlen as the front end emits it
// (file: a snapshot with packed_loads, so Q, dO, K and V go by TMA and
// LSE and Δ ride with Q on sm_90a): sequences of lq queries and lk keys
// packed, H heads over H/group kv heads, head dim D; q, dout [tq, H, D],
// k, v, dk, dv [tk, H/group, D]; lse_log2 and delta [H·tq] and 1024
// entries of NaN after them, which tiles past the last sequence read and
// must drop; dq_accum [H·tq, D] f32; each kv block's transposed list
// alternating partial and full q blocks (simVarlen).
func varlenBwdCase(file string, D, H, group int, lq, lk []int) simCase {
	const blk = 128
	Hk := H / group
	vl := newSimVarlen(lq, lk, H, blk, true)
	tq, tk := vl.tq, vl.tk
	rows := func(rng *rand.Rand, name string, lo, span float64) *cpu.Buffer {
		v := make([]float64, H*tq, H*tq+1024)
		for i := range v {
			v[i] = lo + span*rng.Float64()
		}
		for range 1024 {
			v = append(v, math.NaN())
		}
		return cpu.FromFloats(name, tir.F32, v)
	}
	return simCase{kernel: file, grid: [3]int{(slices.Max(lk) + blk - 1) / blk, len(lq) * Hk, 1}, numWarps: 8, rtol: 2e-2, atol: 3e-3,
		args: func(rng *rand.Rand) []any {
			return []any{
				randBuf(rng, "q", tir.BF16, tq*H*D, 1), randBuf(rng, "k", tir.BF16, tk*Hk*D, 1),
				randBuf(rng, "v", tir.BF16, tk*Hk*D, 1), randBuf(rng, "dout", tir.BF16, tq*H*D, 1),
				rows(rng, "lse_log2", 1.5, 1.5), rows(rng, "delta", -0.5, 1),
				cpu.NewBuffer("dk", tir.BF16, tk*Hk*D), cpu.NewBuffer("dv", tir.BF16, tk*Hk*D),
				cpu.NewBuffer("dq_accum", tir.F32, H*tq*D),
				cpu.FromI32("cu_seqlens_q", vl.cuQ), cpu.FromI32("cu_seqlens_k", vl.cuK),
				H * D, D, Hk * D, D, Hk * D, D, // token and head strides of q, k, v
				H * D, D, Hk * D, D, Hk * D, D, // dout, dk, dv
				H, group, tq, tk, float32(1 / math.Sqrt(float64(D))),
				cpu.FromI32("q_row_start", vl.rowStart), cpu.FromI32("q_num_blocks", vl.np),
				cpu.FromI32("full_q_num_blocks", vl.nf), cpu.FromI32("q_list_start", vl.listStart),
				cpu.FromI32("q_indices", vl.idx),
			}
		}}
}

// simVarlen is packed sequences' offsets and per-sequence block lists for
// the simulator's varlen cases: cumulative lengths, totals, and for each
// (sequence, head) one list row per 128-row block (q blocks; kv blocks
// when transposed), listing the other side's blocks from last to first,
// partial where row + block is even and full where odd, so both branches
// run, partial then full in idx from the row's start.
type simVarlen struct {
	cuQ, cuK                         []int32
	tq, tk                           int
	rowStart, np, nf, listStart, idx []int32
}

func newSimVarlen(lq, lk []int, H, blk int, transposed bool) simVarlen {
	v := simVarlen{cuQ: []int32{0}, cuK: []int32{0}}
	for i := range lq {
		v.cuQ = append(v.cuQ, v.cuQ[i]+int32(lq[i]))
		v.cuK = append(v.cuK, v.cuK[i]+int32(lk[i]))
	}
	v.tq, v.tk = int(v.cuQ[len(lq)]), int(v.cuK[len(lk)])
	for b := range lq {
		rows, cols := (lq[b]+blk-1)/blk, (lk[b]+blk-1)/blk
		if transposed {
			rows, cols = cols, rows
		}
		for h := 0; h < H; h++ {
			v.rowStart = append(v.rowStart, int32(len(v.np)))
			for r := 0; r < rows; r++ {
				v.listStart = append(v.listStart, int32(len(v.idx)))
				var part, full []int32
				for c := cols - 1; c >= 0; c-- {
					if (r+c)%2 == 0 {
						part = append(part, int32(c))
					} else {
						full = append(full, int32(c))
					}
				}
				v.np, v.nf = append(v.np, int32(len(part))), append(v.nf, int32(len(full)))
				v.idx = append(append(v.idx, part...), full...)
			}
		}
	}
	// Never empty buffers.
	for _, x := range []*[]int32{&v.np, &v.nf, &v.listStart, &v.idx} {
		*x = append(*x, 0)
	}
	return v
}
