package attention

import (
	"fmt"

	"github.com/fac-compiler/fac/launch"
)

// The backward pass is four kernels sharing the forward's shapes: q, dQ
// are [B, H, Sq, D], dO [B, H, Sq, Dv], k, dK [B, Hkv, Sk, D], v, dV
// [B, Hkv, Sk, Dv] with strides; lse (from the forward), lse_log2 (its
// base-2 form, +inf for an empty row) and Δ are [B, H, Sq] f32; dq_accum
// is the f32 dQ accumulator (dqAccumDims), which only the atomic mode uses
// (in DETERMINISTIC mode it is one unused row).
//
//	flash_bwd_preprocess  Δ = rowsum(dO∘O), lse_log2, dq_accum = 0  grid (q tiles, B·H)
//	flash_bwd             dK, dV; dq_accum += dS·K (atomic)       grid (kv tiles, B·Hkv)
//	flash_bwd_postprocess dQ = scale · dq_accum                  grid (q tiles, B·H)
//	flash_bwd_dq          dQ (DETERMINISTIC, no atomics)         grid (q tiles, B·H)

// FlashBwdPreprocess is flash_bwd_preprocess.fa's launch contract.
var FlashBwdPreprocess = &launch.Contract{
	Kernel: "flash_bwd_preprocess",
	File:   "flash_bwd_preprocess.fa",
	Tensors: []launch.Tensor{
		{Name: "o", Dims: oDims, Strides: []string{"stride_ob", "stride_oh", "stride_os"}},
		{Name: "dout", Dims: oDims, Strides: []string{"stride_dob", "stride_doh", "stride_dos"}},
		{Name: "lse", Dims: lseDims},
		{Name: "lse_log2", Output: true, Dims: rowWorkDims},
		{Name: "delta", Output: true, Dims: rowWorkDims},
		{Name: "dq_accum", Output: true, Dims: dqAccumDims},
	},
	Scalars: []launch.Scalar{
		{Name: "heads", Value: func(p launch.Problem) any { return p.Shape.Heads }},
		{Name: "seqlen_q", Value: func(p launch.Problem) any { return p.Shape.SeqQ }},
	},
	Grid:  qGrid,
	Check: checkDim,
}

// FlashBwd is flash_bwd.fa's launch contract: one program per (kv tile,
// batch × kv head), walking the transposed (q_*) block-mask lists. The
// score mod's aux tensors come as for the forward; with AUX_GRAD, each
// float one also has a gradient parameter "score.<aux>.grad", bound like
// an aux tensor of the aux's length (f32, zeroed by the caller).
var FlashBwd = &launch.Contract{
	Kernel: "flash_bwd",
	File:   "flash_bwd.fa",
	Tensors: []launch.Tensor{
		{Name: "q", Dims: qDims, Strides: []string{"stride_qb", "stride_qh", "stride_qs"}},
		{Name: "k", Dims: kvDims, Strides: []string{"stride_kb", "stride_kh", "stride_ks"}},
		{Name: "v", Dims: vDims, Strides: []string{"stride_vb", "stride_vh", "stride_vs"}},
		{Name: "dout", Dims: oDims, Strides: []string{"stride_dob", "stride_doh", "stride_dos"}},
		{Name: "lse_log2", Dims: rowWorkDims},
		{Name: "delta", Dims: rowWorkDims},
		{Name: "dk", Output: true, Dims: kvDims, Strides: []string{"stride_dkb", "stride_dkh", "stride_dks"}},
		{Name: "dv", Output: true, Dims: vDims, Strides: []string{"stride_dvb", "stride_dvh", "stride_dvs"}},
		// Read and written (atomic adds): the caller passes the buffer
		// flash_bwd_preprocess zeroed.
		{Name: "dq_accum", Dims: dqAccumDims},
	},
	Scalars:   append(attentionScalars[:len(attentionScalars):len(attentionScalars)], tileGroup),
	BlockMask: QBlockMask,
	Mods:      []string{"mask", "score"},
	Grid: func(p launch.Problem) [3]int {
		return [3]int{launch.CeilDiv(p.Shape.SeqK, p.Attr("BLOCK_N")), p.Shape.Batch * p.Shape.KV(), 1}
	},
	Check:      checkBwd,
	Tuned:      bwdTiles,
	TunedAlone: []string{"fold_scale", "warp_specialize", "DQ_FRAG", "dq_bulk"},
}

// bwdTiles: on sm_90a's wgmma path, tiles whose five GEMMs all run on
// wgmma (dQ as dQᵀ = Kᵀ·dS, whose M is HEAD_DIM; S, dP, dV and dK have
// BLOCK_N rows), with K and V resident in shared memory and Q and dO
// staged once for their two GEMMs each and prefetched. 128 keys per
// program: at HEAD_DIM 128 with 64-query tiles on two warpgroups, at 64
// with 32-query tiles on one (dQᵀ's 64 rows are one warpgroup's). H200,
// S = 8192, none/causal TFLOPS: D = 128
// 274/260 against 246/237 for 32×128 and 205/216 for 32×64 on 4 warps;
// D = 64 243/201 against 172/187 for 64×64 on 4 warps. Elsewhere the
// kernel's defaults stay. fold_scale (the scale in P's exp2 factor, not in
// every score): S = 8192 none / causal / sliding window / document /
// prefix-LM 400 / 381 / 285 / 253 / 368 TFLOPS without, 406 / 389 / 286 /
// 258 / 372 with (H200).
//
// At HEAD_DIM 128 a producer warpgroup issues the TMA copies
// (warp_specialize) and dQ's tiles reach the accumulator by one bulk
// reduction each (DQ_FRAG, dq_bulk): H100, S = 8192, none / causal
// 536–541 / 502–504 TFLOPS against 429–446 / 435–438 without them, 491 /
// 468–471 without the producer (docs/decisions.md). At HEAD_DIM 64 both
// ran slower (BENCHMARKS.md, Backward).
//
// D = 32 takes D = 64's tiles (not timed): its defaults ran every GEMM on
// mma.sync, these all but dQᵀ's (whose 32 rows are under a warpgroup's 64).
var bwdTiles = []launch.TunedSet{
	{When: for16(128, wgmma), Args: map[string]string{"BLOCK_M": "64", "BLOCK_N": "128", "num_warps": "8", "fold_scale": "true",
		"warp_specialize": "true", "DQ_FRAG": "true", "dq_bulk": "true"}},
	{When: for16Dims([]int{32, 64}, wgmma), Args: map[string]string{"BLOCK_M": "32", "BLOCK_N": "128", "num_warps": "4", "fold_scale": "true"}},
}

// tileGroup is flash_bwd's scalar tile_group: how many kv heads' tiles
// its programs take at a time, first kv block first, in launch order
// (flash_bwd.fa). Four kv heads' Q, dO and dQ rows (8 MB a head at S =
// 8192, D = 128) fit the H200's 50 MB L2 with room to spare. A
// list-scheduling model of the S = 8192 causal launch (2048 programs on
// 132 multiprocessors, one each) puts grouping within 0.1% of a perfect
// balance, against 5.6% over it for the plain order; measured, causal
// gained 3.6% and prefix-LM 2.3% (H200). The group divides the grid's
// axis 1 (B·Hkv): TileGroup.
var tileGroup = launch.Scalar{Name: "tile_group", Value: func(p launch.Problem) any {
	return TileGroup(p.Shape.Batch * p.Shape.KV())
}}

// TileGroup is flash_bwd's tile_group for rows = B·Hkv programs along the
// grid's axis 1: 4, 2 or 1, the largest that divides rows.
func TileGroup(rows int) int {
	for _, g := range []int{4, 2} {
		if rows%g == 0 {
			return g
		}
	}
	return 1
}

// FlashBwdPostprocess is flash_bwd_postprocess.fa's launch contract.
var FlashBwdPostprocess = &launch.Contract{
	Kernel: "flash_bwd_postprocess",
	File:   "flash_bwd_postprocess.fa",
	Tensors: []launch.Tensor{
		{Name: "dq_accum", Dims: dqAccumDims},
		{Name: "dq", Output: true, Dims: qDims, Strides: []string{"stride_dqb", "stride_dqh", "stride_dqs"}},
	},
	Scalars: []launch.Scalar{
		{Name: "heads", Value: func(p launch.Problem) any { return p.Shape.Heads }},
		{Name: "seqlen_q", Value: func(p launch.Problem) any { return p.Shape.SeqQ }},
		{Name: "scale", Value: func(p launch.Problem) any { return p.SoftmaxScale() }},
	},
	Grid:  qGrid,
	Check: checkDim,
}

// FlashBwdDQ is flash_bwd_dq.fa's launch contract: like flash_fwd's (one
// program per q tile, the kv-direction block mask).
var FlashBwdDQ = &launch.Contract{
	Kernel: "flash_bwd_dq",
	File:   "flash_bwd_dq.fa",
	Tensors: []launch.Tensor{
		{Name: "q", Dims: qDims, Strides: []string{"stride_qb", "stride_qh", "stride_qs"}},
		{Name: "k", Dims: kvDims, Strides: []string{"stride_kb", "stride_kh", "stride_ks"}},
		{Name: "v", Dims: vDims, Strides: []string{"stride_vb", "stride_vh", "stride_vs"}},
		{Name: "dout", Dims: oDims, Strides: []string{"stride_dob", "stride_doh", "stride_dos"}},
		{Name: "lse_log2", Dims: rowWorkDims},
		{Name: "delta", Dims: rowWorkDims},
		{Name: "dq", Output: true, Dims: qDims, Strides: []string{"stride_dqb", "stride_dqh", "stride_dqs"}},
	},
	Scalars:   attentionScalars,
	BlockMask: launch.KVBlockMask,
	Mods:      []string{"mask", "score"},
	Grid:      qGrid,
	Check:     checkHeadDim,
	Tuned:     bwdDQTiles,
}

// bwdDQTiles: on sm_90a's wgmma path, 128-query tiles on two warpgroups,
// so that each of the kernel's three GEMMs (S = Q·Kᵀ, dP = dO·Vᵀ, dQ +=
// dS·K) has 64 rows a warpgroup and runs on wgmma; the kernel's defaults
// (64 rows on 8 warps) put every one on mma.sync. Q and dO stay in shared
// memory, K and V are double-buffered: 131 KB at D = 128. Checked in the
// simulator (frontend_bwd_dq_128x64); not timed yet (scripts/sweeps/
// backward.txt has the deterministic mode with and without it).
var bwdDQTiles = []launch.TunedSet{
	{When: for16Dims([]int{32, 64, 128}, wgmma), Args: map[string]string{"BLOCK_M": "128", "BLOCK_N": "64", "num_warps": "8", "fold_scale": "true"}},
}

// QBlockMask is the transposed set, for kernels walking kv blocks:
// q_num_blocks, q_indices, full_q_num_blocks, full_q_indices (counts
// [B', H', num_kv_blocks], index rows num_q_blocks long).
var QBlockMask = &launch.BlockMaskParams{
	Transposed: true,
	Counts:     "q_num_blocks", Indices: "q_indices", FullCounts: "full_q_num_blocks", FullIndices: "full_q_indices",
	StrideB: "bm_stride_b", StrideH: "bm_stride_h", RowLen: "num_q_blocks",
	BlockQAttr: "SPARSE_Q", BlockKAttr: "SPARSE_K",
}

// dqAccumDims is the f32 dQ accumulator, [B·H·SeqQ + dqAccumPad, Dim]
// (flash_bwd's adds are unmasked: a tile running past SeqQ adds zeros into
// the next head's rows, or past the last head into the padding), or one
// element when the kernels were compiled DETERMINISTIC and do not use it.
// With DQ_FRAG (dq_accum.fa's tiles) each head's rows are padded to a
// multiple of 64.
func dqAccumDims(p launch.Problem) []int {
	if a, ok := p.Attrs["DETERMINISTIC"]; ok && a != 0 {
		return []int{1}
	}
	rows := p.Shape.SeqQ
	if a, ok := p.Attrs["DQ_FRAG"]; ok && a != 0 {
		rows = launch.CeilDiv(rows, 64) * 64
	}
	return []int{p.Shape.Batch*p.Shape.Heads*rows + dqAccumPad, p.Shape.Dim}
}

// rowWorkDims is lse_log2's and Δ's, one f32 per query row, [B·H·SeqQ +
// dqAccumPad]: flash_bwd reads a tile's rows unmasked (a tile running past
// SeqQ reads the next head's rows or the padding, and drops those rows by
// its sequence-end test), which saves each iteration a compare per row.
func rowWorkDims(p launch.Problem) []int {
	return []int{p.Shape.Batch*p.Shape.Heads*p.Shape.SeqQ + dqAccumPad}
}

// dqAccumPad is the rows of padding after dQ's accumulator: a tile starts
// inside the last block of the block mask, so it ends less than SPARSE_Q
// rows past SeqQ. A constant, so that every kernel of the backward (the
// preprocess allocates the buffer on the CPU device) agrees on the size;
// checkBwd keeps SPARSE_Q within it. 512 KB at D = 128.
const dqAccumPad = 1024

// checkBwd is flash_bwd's check: the head dims compiled in, and SPARSE_Q
// within dq_accum's padding.
func checkBwd(p launch.Problem) error {
	if err := checkHeadDim(p); err != nil {
		return err
	}
	if sq := p.Attr("SPARSE_Q"); sq > dqAccumPad {
		return fmt.Errorf("SPARSE_Q = %d: the backward's dQ accumulator pads %d rows, so SPARSE_Q must be at most that", sq, dqAccumPad)
	}
	if a, ok := p.Attrs["DQ_FRAG"]; ok && a != 0 && p.Attr("HEAD_DIM")%16 != 0 {
		return fmt.Errorf("DQ_FRAG: the accumulator's tiles take a HEAD_DIM that is a multiple of 16, not %d", p.Attr("HEAD_DIM"))
	}
	return nil
}

// checkDim rejects a problem whose head dims are not the ones compiled in:
// Q's and K's (HEAD_DIM) and, for a kernel that reads V or O, V's
// (HEAD_DIM_V).
func checkDim(p launch.Problem) error {
	if d := p.Attr("HEAD_DIM"); p.Shape.Dim != d {
		return fmt.Errorf("shape: head dim %d, but the kernel was compiled for %d", p.Shape.Dim, d)
	}
	if dv, ok := p.Attrs["HEAD_DIM_V"]; ok && int64(p.Shape.VDim()) != dv {
		return fmt.Errorf("shape: value head dim %d, but the kernel was compiled for %d (HEAD_DIM_V)", p.Shape.VDim(), dv)
	}
	return nil
}

func init() {
	register(FlashBwdPreprocess)
	register(FlashBwd)
	register(FlashBwdPostprocess)
	register(FlashBwdDQ)
}

// Backward is the backward pass: Δ and a zeroed dQ accumulator, flash_bwd
// (dK, dV; dQ through atomics), then dQ scaled; or, deterministic,
// flash_bwd_dq in place of the atomics and the postprocess. With sinks,
// flash_bwd_sinks follows (it reads Δ).
var Backward = &Variant{
	Name: "backward",
	Kernels: func(o VariantOptions) ([]*launch.Contract, error) {
		ks := []*launch.Contract{FlashBwdPreprocess, FlashBwd, FlashBwdPostprocess}
		if o.Deterministic {
			ks = []*launch.Contract{FlashBwdPreprocess, FlashBwd, FlashBwdDQ}
		}
		if o.Sinks {
			ks = append(ks, FlashBwdSinks)
		}
		return ks, nil
	},
	Main:      1,
	Workspace: []string{"lse_log2", "delta", "dq_accum"},
	Results:   []string{"dq", "dk", "dv"},
}

func init() { registerVariant(Backward) }
