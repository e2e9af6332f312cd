package codegen

import (
	"math"
	"math/rand"

	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// frontendDV is frontend for the snapshots of flash_fwd compiled with
// HEAD_DIM_V = Dv beside HEAD_DIM = D: q [B, H, sq, D], k [B, H/kvGroup,
// sk, D], v [B, H/kvGroup, sk, Dv], o [B, H, sq, Dv], so that Q·Kᵀ and P·V
// contract and produce different widths (one tile shape for the scores'
// operands, another for the values' and the output's).
func frontendDV(file, fn string, e tir.Elem, D, Dv, B, H, kvGroup, sq, sk int) simCase {
	c := frontend(file, fn, e, D, B, H, kvGroup, sq, sk, false)
	Hk := H / kvGroup
	c.args = func(rng *rand.Rand) []any {
		args := []any{
			randBuf(rng, "q", e, B*H*sq*D, 1), randBuf(rng, "k", e, B*Hk*sk*D, 1),
			randBuf(rng, "v", e, B*Hk*sk*Dv, 1), cpu.NewBuffer("o", e, B*H*sq*Dv),
			cpu.NewBuffer("lse", tir.F32, B*H*sq),
			H * sq * D, sq * D, D, // q strides
			Hk * sk * D, sk * D, D, // k
			Hk * sk * Dv, sk * Dv, Dv, // v
			H * sq * Dv, sq * Dv, Dv, // o
			H, kvGroup, sq, sk, float32(1 / math.Sqrt(float64(D))),
		}
		return append(args, simBlockLists(sq, sk, 128)...)
	}
	return c
}

// bwdCaseDV is bwdCaseTMA (dq_accum dQ transposed per head, [B·H·D, ldq])
// for the snapshots of flash_bwd compiled with HEAD_DIM_V = Dv beside
// HEAD_DIM = D: q [B, H, sq, D], dout [B, H, sq, Dv], k, dk [B, H/kvGroup,
// sk, D], v, dv [B, H/kvGroup, sk, Dv]; dP = V·dOᵀ contracts over Dv,
// S = K·Qᵀ and dQᵀ = Kᵀ·dS over D and the queries.
func bwdCaseDV(file string, bn, nw, D, Dv, B, H, kvGroup, sq, sk int, doc bool) simCase {
	Hk := H / kvGroup
	ldq := (sq + 7) / 8 * 8
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
				cpu.NewBuffer("dq_accum", tir.F32, B*H*D*ldq),
				H * sq * D, sq * D, D, // q strides
				Hk * sk * D, sk * D, D, // k
				Hk * sk * Dv, sk * Dv, Dv, // v
				H * sq * Dv, sq * Dv, Dv, // dout
				Hk * sk * D, sk * D, D, // dk
				Hk * sk * Dv, sk * Dv, Dv, // dv
				H, kvGroup, sq, sk, float32(1 / math.Sqrt(float64(D))), ldq,
			}
			args = append(args, simBlockLists(sk, sq, 128)...)
			args = append(args, attention.TileGroup(B*Hk))
			if doc {
				args = append(args, simDocArgs(sq, sk)...)
			}
			return args
		}}
}

// dimVSimCases run the forward and the backward with V's head dim unlike
// Q's and K's (HEAD_DIM_V) on each target: the forward's 64×64 tiles at
// (64, 32) on mma.sync and one-warpgroup wgmma, and its sm_90a 128×128
// tiles with a producer warpgroup at (128, 64); the backward's sm_90a tiles
// of D = 128 at (128, 64) on wgmma, dQ by reds and by TMA reductions, and
// the kernel's own 64×64 tiles on 8 warps (what a pair no tuned set was
// measured for gets; mma.sync on every target, 32 keys a warpgroup being
// too few for wgmma) with V wider than Q, (64, 128), under a document mask.
// The reds case's atol is 5e-3: at this seed one dQ element of 51200 is
// 6.3e-3 off the interpreter's on every target alike, dS's bf16 rounding
// falling the other way on one pair.
func dimVSimCases() []simCase {
	return []simCase{
		frontendDV("frontend_flash_causal_dv32", "", tir.BF16, 64, 32, 1, 2, 1, 130, 150),
		frontendDV("frontend_flash_causal_dv32", "flash_fwd.full", tir.BF16, 64, 32, 1, 2, 2, 100, 70),
		withWarps(frontendDV("frontend_flash_128x128_ws_dv64", "", tir.BF16, 128, 64, 1, 2, 2, 300, 390), 8),
		withWarps(frontendDV("frontend_flash_128x128_ws_dv64", "flash_fwd.full", tir.BF16, 128, 64, 1, 1, 1, 200, 130), 8),
		withTol(bwdCaseDV("frontend_bwd_64x128_dv64", 128, 8, 128, 64, 1, 2, 2, 200, 300, false), 2e-2, 5e-3),
		withTarget(bwdCaseDV("frontend_bwd_64x128_dv64", 128, 8, 128, 64, 1, 2, 2, 200, 300, false), "dq=tma"),
		bwdCaseDV("frontend_bwd_d64_dv128", 64, 8, 64, 128, 2, 2, 1, 150, 200, true),
	}
}
