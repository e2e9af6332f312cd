package codegen

import (
	"math"
	"math/rand"

	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// bwdCase is a case for the stdlib flash_bwd kernel as the front end emits
// it (file: a snapshot in testdata): q, dout [B, H, sq, D], k, v, dk, dv
// [B, H/kvGroup, sk, D], lse and delta [B, H, sq] (random, LSE above every
// score so that P stays below 1), dq_accum [B·H·sq + 1024, D] f32, zeroed
// (the kernel adds dQ into it, unmasked: the padding takes the last head's
// rows past sq); the transposed block lists are simBlockLists over kv
// blocks; tile_group as the contract picks it; with doc, a document mask's
// ids (documents of 37 tokens).
func bwdCase(file string, bn, nw, D, B, H, kvGroup, sq, sk int, doc bool) simCase {
	return bwdCaseLayout(file, bn, nw, D, D, B, H, kvGroup, sq, sk, doc, false)
}

// bwdCaseTMA is bwdCase for the snapshots whose dq_accum is dQ transposed
// per head, [B·H·D, ldq] with ldq = sq rounded up to 8, passed as
// stride_dq_accum after scale, and rows of padding after it that hold
// the last q tile's unmasked zeros (the contract's dqAccumDims); the
// snapshots before that add under a mask q < sq (by TMA on sm_90a).
func bwdCaseTMA(file string, bn, nw, D, B, H, kvGroup, sq, sk int, doc bool) simCase {
	return bwdCaseLayout(file, bn, nw, D, D, B, H, kvGroup, sq, sk, doc, true)
}

// bwdCaseRows is bwdCase for the snapshots that read LSE in base 2
// (lse_log2) and Δ unmasked: both have 1024 rows of padding, NaN, which
// the tiles past seqlen_q read and must drop.
func bwdCaseRows(file string, bn, nw, D, B, H, kvGroup, sq, sk int) simCase {
	c := bwdCase(file, bn, nw, D, B, H, kvGroup, sq, sk, false)
	args := c.args
	c.args = func(rng *rand.Rand) []any {
		a := args(rng)
		for _, i := range []int{4, 5} { // lse_log2, delta
			b := a[i].(*cpu.Buffer)
			vals := append([]float64(nil), b.Vals...)
			if i == 4 { // the base-2 form of bwdCase's LSE
				for j := range vals {
					vals[j] *= math.Log2E
				}
			}
			for range 1024 {
				vals = append(vals, math.NaN())
			}
			a[i] = cpu.FromFloats(b.Name, tir.F32, vals)
		}
		return a
	}
	return c
}

// bwdCaseLayout is bwdCase (transposed: bwdCaseTMA) with V's head dim Dv
// apart from Q's and K's D (HEAD_DIM_V): v, dv [B, H/kvGroup, sk, Dv] and
// dout [B, H, sq, Dv]; dq_accum, q, k and dk keep D.
func bwdCaseLayout(file string, bn, nw, D, Dv, B, H, kvGroup, sq, sk int, doc, transposed bool) simCase {
	Hk := H / kvGroup
	ldq := (sq + 7) / 8 * 8
	accum := (B*H*sq + 1024) * D
	if transposed {
		accum = (B*H*D + (128+ldq-1)/ldq) * ldq // SPARSE_Q = 128
	}
	return simCase{kernel: file, grid: [3]int{(sk + bn - 1) / bn, B * Hk, 1}, numWarps: nw, rtol: 2e-2, atol: 3e-3,
		args: func(rng *rand.Rand) []any {
			lse := make([]float64, B*H*sq)
			for i := range lse {
				lse[i] = 1 + rng.Float64()
			}
			args := []any{
				randBuf(rng, "q", tir.BF16, B*H*sq*D, 1), randBuf(rng, "k", tir.BF16, B*Hk*sk*D, 1),
				randBuf(rng, "v", tir.BF16, B*Hk*sk*Dv, 1), randBuf(rng, "dout", tir.BF16, B*H*sq*Dv, 1),
				cpu.FromFloats("lse", tir.F32, lse), randBuf(rng, "delta", tir.F32, B*H*sq, 0.5),
				cpu.NewBuffer("dk", tir.BF16, B*Hk*sk*D), cpu.NewBuffer("dv", tir.BF16, B*Hk*sk*Dv),
				cpu.NewBuffer("dq_accum", tir.F32, accum),
				H * sq * D, sq * D, D, // q strides
				Hk * sk * D, sk * D, D, // k
				Hk * sk * Dv, sk * Dv, Dv, // v
				H * sq * Dv, sq * Dv, Dv, // dout
				Hk * sk * D, sk * D, D, // dk
				Hk * sk * Dv, sk * Dv, Dv, // dv
				H, kvGroup, sq, sk, float32(1 / math.Sqrt(float64(D))),
			}
			if transposed {
				args = append(args, ldq)
			}
			args = append(args, simBlockLists(sk, sq, 128)...)
			args = append(args, attention.TileGroup(B*Hk))
			if doc {
				args = append(args, simDocArgs(sq, sk)...)
			}
			return args
		}}
}

// bwdCaseFrag is bwdCaseRows for the snapshots with DQ_FRAG: dq_accum holds
// dq_accum.fa's tiles, each head's rows padded to a multiple of 64 (the
// contract's dqAccumDims).
func bwdCaseFrag(file string, bn, nw, D, B, H, kvGroup, sq, sk int) simCase {
	c := bwdCaseRows(file, bn, nw, D, B, H, kvGroup, sq, sk)
	args := c.args
	c.args = func(rng *rand.Rand) []any {
		a := args(rng)
		a[8] = cpu.NewBuffer("dq_accum", tir.F32, (B*H*((sq+63)/64*64)+1024)*D)
		return a
	}
	return c
}

// fragSimCases run flash_bwd with dQ's accumulator in dq_accum.fa's tiles:
// by reds, and staged in the tile's order for one bulk reduction an
// iteration (dq=bulk).
func fragSimCases() []simCase {
	return []simCase{
		bwdCaseFrag("frontend_bwd_64x128_frag", 128, 8, 128, 1, 2, 2, 200, 300),
		withTarget(bwdCaseFrag("frontend_bwd_64x128_frag", 128, 8, 128, 1, 2, 2, 200, 300), "dq=bulk"),
	}
}

// stagingSimCases run flash_bwd where a head's rows of LSE and Δ start at
// any 4-byte offset (157 queries a head), with and without a producer
// warpgroup, and flash_bwd_varlen on packed loads where sequences do: on
// TMA the rows ride with Q's copies (tma-riders), from 16-byte chunks that
// begin before them. And dQ by bulk reductions beside a producer (its
// consumers stage and issue them).
func stagingSimCases() []simCase {
	return []simCase{
		bwdCaseRows("frontend_bwd_64x128_rows", 128, 8, 128, 1, 3, 1, 157, 300),
		bwdCaseFrag("frontend_bwd_64x128_frag", 128, 8, 128, 1, 3, 3, 157, 200),
		varlenBwdCase("frontend_varlen_bwd_64x128", 128, 2, 2, []int{100, 0, 40, 157}, []int{150, 30, 140, 300}),
		// The kernel's dq_bulk asks what the target's dq=bulk does.
		withAttrs(bwdCaseFrag("frontend_bwd_64x128_frag", 128, 8, 128, 1, 3, 3, 157, 200), "dq_bulk", true),
		// A producer warpgroup issues the riders with Q's copies; with
		// DQ_FRAG, the consumers add dQ by deferred bulk reductions.
		bwdCaseRows("frontend_bwd_64x128_rows_ws", 128, 8, 128, 1, 3, 1, 157, 300),
		withAttrs(bwdCaseFrag("frontend_bwd_64x128_frag_ws", 128, 8, 128, 1, 3, 3, 157, 200), "dq_bulk", true),
		// dQ's row-major accumulator by runs of rows, beside a producer.
		withTarget(bwdCase("frontend_bwd_64x128_ws", 128, 8, 128, 1, 2, 2, 200, 300, false), "dq=bulk"),
		// The DETERMINISTIC mode's dQ kernel on its sm_90a tiles (all on wgmma).
		bwdDQCase("frontend_bwd_dq_128x64", 128, 1, 4, 2, 157, 300),
		// The same beside a producer warpgroup, which issues K's and V's copies.
		withAttrs(bwdDQCase("frontend_bwd_dq_128x64", 128, 1, 4, 2, 157, 300), "warp_specialize", true),
		// D = 64 on two warpgroups with dQ = dS·K (DQ_ROWS), every GEMM on
		// wgmma, alone and beside a producer.
		bwdCaseRows("frontend_bwd_128x128_d64_rows", 128, 8, 64, 1, 3, 1, 157, 200),
		withAttrs(bwdCaseRows("frontend_bwd_128x128_d64_rows", 128, 8, 64, 1, 3, 1, 157, 200), "warp_specialize", true),
		// DQ_ROWS into DQ_FRAG's tiles at D = 128 (dQ by reds, on wgmma
		// with the two warpgroups along N), beside a producer and with
		// dq_bulk, as a request that sets DQ_ROWS alone gets on the tuned set.
		withAttrs(withAttrs(bwdCaseFrag("frontend_bwd_64x128_rows_frag", 128, 8, 128, 1, 3, 3, 157, 200), "warp_specialize", true), "dq_bulk", true),
		// HEAD_DIM 32 on D = 64's tiles: wgmma beside mma.sync in one loop.
		bwdCaseRows("frontend_bwd_32x128_d32", 128, 4, 32, 2, 2, 1, 157, 200),
	}
}

// bwdDQCase is a case for flash_bwd_dq (the DETERMINISTIC mode's dQ
// kernel) as the front end emits it: q, dout, dq [B, H, sq, D] (bf16), k, v
// [B, H/kvGroup, sk, D]; lse_log2 and delta [B·H·sq] (loaded masked); the
// forward's block lists over 128-row q blocks (simBlockLists), shared by
// every head.
func bwdDQCase(file string, D, B, H, kvGroup, sq, sk int) simCase {
	Hk := H / kvGroup
	return simCase{kernel: file, grid: [3]int{(sq + 127) / 128, B * H, 1}, numWarps: 8, rtol: 2e-2, atol: 3e-3,
		args: func(rng *rand.Rand) []any {
			lse := make([]float64, B*H*sq)
			for i := range lse {
				lse[i] = (1 + rng.Float64()) * math.Log2E
			}
			args := []any{
				randBuf(rng, "q", tir.BF16, B*H*sq*D, 1), randBuf(rng, "k", tir.BF16, B*Hk*sk*D, 1),
				randBuf(rng, "v", tir.BF16, B*Hk*sk*D, 1), randBuf(rng, "dout", tir.BF16, B*H*sq*D, 1),
				cpu.FromFloats("lse_log2", tir.F32, lse), randBuf(rng, "delta", tir.F32, B*H*sq, 0.5),
				cpu.NewBuffer("dq", tir.BF16, B*H*sq*D),
				H * sq * D, sq * D, D, // q strides
				Hk * sk * D, sk * D, D, // k
				Hk * sk * D, sk * D, D, // v
				H * sq * D, sq * D, D, // dout
				H * sq * D, sq * D, D, // dq
				H, kvGroup, sq, sk, float32(1 / math.Sqrt(float64(D))),
			}
			return append(args, simBlockListsRows(sq, sk, 128, false)...)
		}}
}
