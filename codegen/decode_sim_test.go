package codegen

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// splitKVCase is flash_fwd_splitkv (front-end snapshot) on one problem: q
// [B, H, sq, D], k, v [B, H/group, sk, D] (bf16), the query heads of a kv
// head packed pack to a tile, q_per_tile positions per tile, splits
// programs per tile; the block mask is one row per (b, kv head or 1, q
// block) listing the kv blocks as partial (odd) and full (even), so both
// branches run; slopes is the alibi score's aux tensor when the snapshot
// has one.
func splitKVCase(file string, D, B, H, group, pack, qpt, splits, sq, sk int, slopes bool) simCase {
	Hk := H / group
	hx := H / pack
	nq, nk := (sq+127)/128, (sk+127)/128
	rows := B * hx * nq
	return simCase{kernel: file, grid: [3]int{(sq + qpt - 1) / qpt, B * hx, splits}, rtol: 1e-2, atol: 2e-3,
		args: func(rng *rand.Rand) []any {
			counts, idx := make([]int32, rows), make([]int32, rows*nk)
			fcounts, fidx := make([]int32, rows), make([]int32, rows*nk)
			for r := 0; r < rows; r++ {
				for kb := 0; kb < nk; kb++ {
					if kb%2 == 1 {
						idx[r*nk+int(counts[r])] = int32(kb)
						counts[r]++
					} else {
						fidx[r*nk+int(fcounts[r])] = int32(kb)
						fcounts[r]++
					}
				}
			}
			args := []any{
				randBuf(rng, "q", tir.BF16, B*H*sq*D, 1), randBuf(rng, "k", tir.BF16, B*Hk*sk*D, 1),
				randBuf(rng, "v", tir.BF16, B*Hk*sk*D, 1),
				cpu.NewBuffer("o_partial", tir.F32, splits*B*H*sq*D), cpu.NewBuffer("lse_partial", tir.F32, splits*B*H*sq),
				H * sq * D, sq * D, D, // q strides
				Hk * sk * D, sk * D, D, // k
				Hk * sk * D, sk * D, D, // v
				H, group, sq, sk, float32(1 / math.Sqrt(float64(D))),
				pack, qpt, splits, B * H * sq,
				cpu.FromI32("kv_num_blocks", counts), cpu.FromI32("kv_indices", idx),
				cpu.FromI32("full_kv_num_blocks", fcounts), cpu.FromI32("full_kv_indices", fidx),
				hx * nq, nq, nk,
			}
			if slopes {
				args = append(args, randBuf(rng, "slopes", tir.F32, H, 0.5), H)
			}
			return args
		}}
}

// fusedSplitKVCase is splitKVCase for flash_fwd_splitkv compiled with
// fused_combine (front-end snapshot file: frontend_splitkv_fused, 16-row
// tiles, D = 64, the alibi score; frontend_splitkv_m64_fused, 64 rows, D =
// 128): the kernel also takes o [B, H, sq, D] (bf16), lse [B, H, sq], o's
// strides and one counter per q tile, zeroed, which the last program of
// each tile leaves zeroed after merging the tile's splits into o and lse.
func fusedSplitKVCase(file string, D, B, H, group, pack, qpt, splits, sq, sk int, slopes bool) simCase {
	c := splitKVCase(file, D, B, H, group, pack, qpt, splits, sq, sk, slopes)
	args, tiles := c.args, c.grid[0]*c.grid[1]
	c.args = func(rng *rand.Rand) []any {
		a := args(rng)
		n := len(a)
		if slopes {
			n -= 2 // the score's slopes and their length come after the kernel's own parameters
		}
		fused := []any{cpu.NewBuffer("o", tir.BF16, B*H*sq*D), cpu.NewBuffer("lse", tir.F32, B*H*sq), H * sq * D, sq * D, D,
			cpu.FromI32("split_counters", make([]int32, tiles))}
		return slices.Concat(a[:n], fused, a[n:])
	}
	return c
}

// pagedCase is flash_fwd_paged (front-end snapshot file: frontend_paged,
// keys gathered by page, frontend_paged_tiles, TILE_PAGES=1: a page per
// 64-key tile, or frontend_paged_tiles4, TILE_PAGES=4: four 16-key pages
// per tile; D = 64, bf16) on B = len(lens) sequences of the given cache
// lengths: q [B, H, sq, D], k and v
// caches of pageSize-key pages in a shuffled order, the last sequence
// sharing the first one's first page, the query heads of a kv head packed
// pack to a tile of qpt positions, splits programs per tile. Each
// sequence's block-mask row (shared by its heads) lists its kv blocks as
// partial (odd) and full (even), varlen's layout.
func pagedCase(file string, B, H, group, pack, qpt, splits, sq, pageSize int, lens []int32) simCase {
	const D = 64
	Hk, hx := H/group, H/pack
	maxPages := 0
	for _, n := range lens {
		maxPages = max(maxPages, (int(n)+pageSize-1)/pageSize)
	}
	return simCase{kernel: file, grid: [3]int{(sq + qpt - 1) / qpt, B * hx, splits}, rtol: 1e-2, atol: 2e-3,
		args: func(rng *rand.Rand) []any {
			numPages, table := shuffledPages(rng, B, maxPages)
			table[(B-1)*maxPages] = table[0]
			rowStart, counts, fcounts, listStart, idx := seqBlockRows(lens, make([]int32, B), H)
			cache := numPages * pageSize * Hk * D
			return []any{
				randBuf(rng, "q", tir.BF16, B*H*sq*D, 1), randBuf(rng, "k_cache", tir.BF16, cache, 1),
				randBuf(rng, "v_cache", tir.BF16, cache, 1),
				cpu.NewBuffer("o_partial", tir.F32, splits*B*H*sq*D), cpu.NewBuffer("lse_partial", tir.F32, splits*B*H*sq),
				cpu.FromI32("page_table", table), cpu.FromI32("cache_seqlens", lens),
				H * sq * D, sq * D, D, // q strides
				pageSize * Hk * D, Hk * D, D, // k_cache
				pageSize * Hk * D, Hk * D, D, // v_cache
				maxPages, pageSize,
				H, group, sq, float32(1 / math.Sqrt(float64(D))),
				pack, qpt, splits, B * H * sq,
				cpu.FromI32("kv_row_start", rowStart), cpu.FromI32("kv_num_blocks", counts),
				cpu.FromI32("full_kv_num_blocks", fcounts), cpu.FromI32("kv_list_start", listStart), cpu.FromI32("kv_indices", idx),
			}
		}}
}

// fusedPagedCase is pagedCase for flash_fwd_paged compiled with
// fused_combine (front-end snapshot frontend_paged_tiles_fused: a page
// per 64-key tile): the kernel also takes o [B, H, sq, 64] (bf16), lse,
// o's strides and one counter per q tile, zeroed, which the last program
// of each tile leaves zeroed after merging the tile's splits.
func fusedPagedCase(B, H, group, pack, qpt, splits, sq, pageSize int, lens []int32) simCase {
	const D = 64
	c := pagedCase("frontend_paged_tiles_fused", B, H, group, pack, qpt, splits, sq, pageSize, lens)
	args, tiles := c.args, c.grid[0]*c.grid[1]
	c.args = func(rng *rand.Rand) []any {
		return append(args(rng), cpu.NewBuffer("o", tir.BF16, B*H*sq*D), cpu.NewBuffer("lse", tir.F32, B*H*sq), H*sq*D, sq*D, D,
			cpu.FromI32("split_counters", make([]int32, tiles)))
	}
	return c
}

// raggedCase is flash_fwd_paged_varlen (front-end snapshot file:
// frontend_paged_varlen, keys gathered by page, or
// frontend_paged_varlen_tiles4, four 16-key pages per 64-key tile; D = 64,
// bf16, causal) on a ragged batch: sequence b's qlens[b] queries are the
// last of its lens[b] cached keys, q packed [total_q, H, D], caches of
// pageSize-key pages in a shuffled order with the last sequence sharing
// the first one's first page, the query heads of a kv head packed pack to
// a tile of qpt positions, splits programs per tile. The tile list cuts
// each sequence's queries at multiples of qpt; each sequence's block-mask
// rows (shared by its heads) start at its first query's q block and list
// its kv blocks as partial (odd) and full (even).
func raggedCase(file string, H, group, pack, qpt, splits, pageSize int, qlens, lens []int32) simCase {
	const D = 64
	B, Hk, hx := len(lens), H/group, H/pack
	maxPages, totalQ := 0, 0
	var tileSeq, tileQ []int32
	for b, n := range lens {
		maxPages = max(maxPages, (int(n)+pageSize-1)/pageSize)
		totalQ += int(qlens[b])
		off := n - qlens[b]
		for p := off; p < n; p = (p/int32(qpt) + 1) * int32(qpt) {
			tileSeq, tileQ = append(tileSeq, int32(b)), append(tileQ, p-off)
		}
	}
	return simCase{kernel: file, grid: [3]int{len(tileSeq), hx, splits}, rtol: 1e-2, atol: 2e-3,
		args: func(rng *rand.Rand) []any {
			numPages, table := shuffledPages(rng, B, maxPages)
			table[(B-1)*maxPages] = table[0]
			cu := []int32{0}
			for b := range lens {
				cu = append(cu, cu[b]+qlens[b])
			}
			rowStart, counts, fcounts, listStart, idx := seqBlockRows(lens, qlens, H)
			cache := numPages * pageSize * Hk * D
			return []any{
				randBuf(rng, "q", tir.BF16, totalQ*H*D, 1), randBuf(rng, "k_cache", tir.BF16, cache, 1),
				randBuf(rng, "v_cache", tir.BF16, cache, 1),
				cpu.NewBuffer("o_partial", tir.F32, splits*H*totalQ*D), cpu.NewBuffer("lse_partial", tir.F32, splits*H*totalQ),
				cpu.FromI32("page_table", table), cpu.FromI32("cache_seqlens", lens), cpu.FromI32("cu_seqlens_q", cu),
				cpu.FromI32("tile_seq", tileSeq), cpu.FromI32("tile_q", tileQ),
				H * D, D, // q strides
				pageSize * Hk * D, Hk * D, D, // k_cache
				pageSize * Hk * D, Hk * D, D, // v_cache
				maxPages, pageSize,
				H, group, totalQ, float32(1 / math.Sqrt(float64(D))),
				pack, qpt, splits, H * totalQ,
				cpu.FromI32("kv_row_start", rowStart), cpu.FromI32("kv_num_blocks", counts),
				cpu.FromI32("full_kv_num_blocks", fcounts), cpu.FromI32("kv_list_start", listStart), cpu.FromI32("kv_indices", idx),
			}
		}}
}

// seqBlockRows is a per-sequence block mask in varlen's layout for
// sequences of lens keys and 128-key blocks, shared by the H heads of a
// sequence: one row (q block 0) where qlens[b] is 0, else the rows of the
// q blocks that the last qlens[b] positions touch (a ragged batch's). Each
// row lists the sequence's kv blocks as partial (odd ones) and full (even
// ones), so that a kernel runs both branches.
func seqBlockRows(lens, qlens []int32, H int) (rowStart, counts, fcounts, listStart, idx []int32) {
	rowStart = make([]int32, len(lens)*H)
	for b, n := range lens {
		for h := range H {
			rowStart[b*H+h] = int32(len(counts))
		}
		first, last := int32(0), int32(0)
		if qlens[b] > 0 {
			first, last = (n-qlens[b])/128, (n-1)/128
		}
		for range last - first + 1 {
			listStart = append(listStart, int32(len(idx)))
			var part, full []int32
			for kb := 0; kb < (int(n)+127)/128; kb++ {
				if kb%2 == 1 {
					part = append(part, int32(kb))
				} else {
					full = append(full, int32(kb))
				}
			}
			counts, fcounts = append(counts, int32(len(part))), append(fcounts, int32(len(full)))
			idx = append(append(idx, part...), full...)
		}
	}
	return rowStart, counts, fcounts, listStart, append(idx, 0) // never an empty buffer
}

// shuffledPages is a page table [B, maxPages] of distinct pages in a
// random order, and the page count: one more than the table holds.
func shuffledPages(rng *rand.Rand, B, maxPages int) (int, []int32) {
	numPages := B*maxPages + 1
	perm := rng.Perm(numPages)
	table := make([]int32, B*maxPages)
	for i := range table {
		table[i] = int32(perm[i])
	}
	return numPages, table
}

// appendCase is kv_append (front-end snapshot frontend_kv_append, D = 64,
// bf16) on B = len(old) sequences of lengths old before the append of sq
// rows: q_in [B, H, sq, D], k_new and v_new [B, sq, Hk, D], caches of
// pageSize-key pages in a shuffled order with a spare page, rotary tables
// [max length + 3, rotaryDim / 2] (interleaved: GPT-J's pairs, else
// GPT-NeoX's). cache_seqlens holds the lengths after the append, as the
// host passes them.
func appendCase(B, H, group, sq, pageSize, rotaryDim int, interleaved bool, old []int32) simCase {
	const D = 64
	Hk := H / group
	lens := make([]int32, B)
	maxPages, positions := 0, 0
	for b, n := range old {
		lens[b] = n + int32(sq)
		maxPages = max(maxPages, (int(lens[b])+pageSize-1)/pageSize)
		positions = max(positions, int(lens[b])+3)
	}
	il := 0
	if interleaved {
		il = 1
	}
	return simCase{kernel: "frontend_kv_append", grid: [3]int{(sq + 15) / 16, B, H}, rtol: 1e-2, atol: 2e-3,
		args: func(rng *rand.Rand) []any {
			numPages, table := shuffledPages(rng, B, maxPages)
			cache := numPages * pageSize * Hk * D
			tab := max(positions*rotaryDim/2, 1)
			return []any{
				randBuf(rng, "q_in", tir.BF16, B*H*sq*D, 1), randBuf(rng, "k_new", tir.BF16, B*sq*Hk*D, 1),
				randBuf(rng, "v_new", tir.BF16, B*sq*Hk*D, 1),
				randBuf(rng, "rotary_cos", tir.BF16, tab, 1), randBuf(rng, "rotary_sin", tir.BF16, tab, 1),
				cpu.NewBuffer("q", tir.BF16, B*H*sq*D),
				randBuf(rng, "k_cache", tir.BF16, cache, 1), randBuf(rng, "v_cache", tir.BF16, cache, 1),
				cpu.FromI32("page_table", table), cpu.FromI32("cache_seqlens", lens),
				H * sq * D, sq * D, D, // q_in strides
				H * sq * D, sq * D, D, // q
				sq * Hk * D, Hk * D, D, // k_new
				sq * Hk * D, Hk * D, D, // v_new
				pageSize * Hk * D, Hk * D, D, // k_cache
				pageSize * Hk * D, Hk * D, D, // v_cache
				maxPages, pageSize,
				group, sq, rotaryDim, il,
			}
		}}
}

// combineCase is flash_fwd_combine, or with sinks flash_fwd_combine_sinks
// (front-end snapshots, D = 64), on rows = B·H·sq rows of splits partial
// results, a quarter of the (row, split) LSEs -inf and some rows -inf in
// every split.
func combineCase(B, H, sq, splits int, sinks bool) simCase {
	const D = 64
	rows := B * H * sq
	file := "frontend_combine"
	if sinks {
		file = "frontend_combine_sinks"
	}
	return simCase{kernel: file, grid: [3]int{rows, 1, 1}, rtol: 1e-2, atol: 2e-3,
		args: func(rng *rand.Rand) []any {
			lse := randBuf(rng, "lse_partial", tir.F32, splits*rows, 4)
			for i := range lse.Vals {
				if row := i % rows; row%5 == 0 || rng.Intn(4) == 0 {
					lse.Vals[i] = math.Inf(-1)
				}
			}
			args := []any{
				randBuf(rng, "o_partial", tir.F32, splits*rows*D, 1), lse,
				cpu.NewBuffer("o", tir.BF16, rows*D), cpu.NewBuffer("lse", tir.F32, rows),
				H * sq * D, sq * D, D, H, sq, splits, rows,
			}
			if sinks {
				// Per-head sink logits, one -inf (then a row whose splits
				// are all -inf keeps nothing at all).
				sk := randBuf(rng, "sinks", tir.F32, H, 4)
				sk.Vals[0] = math.Inf(-1)
				args = append(args, sk)
			}
			return args
		}}
}

// TestSimulateDecode runs the decoding kernels' LLVM IR on the SIMT
// simulator against the CPU interpreter, as TestSimulate does for the
// others: flash_fwd_splitkv with 4 heads packed in a 16-row tile (a
// 64-key tile, the alibi score gathering per row head, a partial-block
// mask) over 3 splits, with a 64-row tile of 16 positions × 4 heads over
// 2 splits, the same merged in place (fused_combine: the last program of
// each q tile merges its splits; with empty splits, and flash_fwd_paged
// with 64-key pages, an empty cache among them), flash_fwd_combine
// with and without sinks, and flash_fwd_paged with 16-key pages (4
// heads packed, an empty cache), 1-key pages (no packing) and 64-key pages
// read a page per tile and 16-key pages four per tile (TILE_PAGES 1 and 4:
// the loads prefetched on sm_90a), flash_fwd_paged_varlen on ragged
// batches (decode rows beside chunks of 6 queries across a 128-position
// block and of 19 queries over 2 tiles, a sequence with no queries; four
// 16-key pages per tile, 4 heads packed, 2 splits; 1-key pages, no
// packing), and kv_append writing rows through the
// page table: GQA 4 with 3 rows crossing 16-key page boundaries, rotated
// in GPT-NeoX's form over part of the head dim, 20 rows (two tiles) in
// GPT-J's over all of it, and 2 rows on 1-key pages without rotary.
func TestSimulateDecode(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	cases := []simCase{
		splitKVCase("frontend_splitkv_pack", 64, 1, 8, 4, 4, 4, 3, 3, 300, true),
		splitKVCase("frontend_splitkv_m64", 128, 1, 4, 4, 4, 16, 2, 16, 200, false),
		splitKVCase("frontend_splitkv_pack_s3", 64, 1, 8, 4, 4, 4, 2, 3, 700, true),
		combineCase(2, 3, 2, 5, false),
		combineCase(2, 3, 2, 5, true),
		pagedCase("frontend_paged", 3, 8, 4, 4, 4, 3, 3, 16, []int32{300, 0, 130}),
		pagedCase("frontend_paged", 2, 4, 1, 1, 16, 2, 2, 1, []int32{70, 129}),
		pagedCase("frontend_paged_tiles", 3, 8, 4, 4, 4, 2, 3, 64, []int32{300, 0, 130}),
		pagedCase("frontend_paged_tiles4", 3, 8, 4, 4, 4, 2, 3, 16, []int32{300, 0, 130}),
		raggedCase("frontend_paged_varlen_tiles4", 8, 4, 4, 4, 2, 16, []int32{1, 6, 0, 1}, []int32{300, 131, 20, 129}),
		raggedCase("frontend_paged_varlen", 4, 2, 1, 16, 1, 1, []int32{1, 19, 1}, []int32{70, 150, 1}),
		appendCase(3, 8, 4, 3, 16, 48, false, []int32{30, 0, 14}),
		appendCase(2, 4, 1, 20, 16, 64, true, []int32{13, 1}),
		appendCase(2, 4, 2, 2, 1, 0, false, []int32{5, 0}),
		// Programmatic dependent launch (pdl): its instructions at the start.
		withAttrs(splitKVCase("frontend_splitkv_pack", 64, 1, 8, 4, 4, 4, 3, 3, 300, true), "pdl", true),
		withAttrs(combineCase(2, 3, 2, 5, false), "pdl", true),
		// Merged in place (fused_combine): 4 splits of 2 kernel tiles
		// (two of them empty) over 2 sequences' tiles of 4 heads × 3
		// positions; 3 splits of 64 rows, 16 positions × 4 heads.
		fusedSplitKVCase("frontend_splitkv_fused", 64, 2, 8, 4, 4, 4, 4, 3, 100, true),
		fusedSplitKVCase("frontend_splitkv_fused", 64, 1, 8, 4, 4, 4, 3, 3, 300, true),
		fusedSplitKVCase("frontend_splitkv_m64_fused", 128, 1, 4, 4, 4, 16, 3, 16, 200, false),
		fusedPagedCase(3, 8, 4, 4, 4, 3, 3, 64, []int32{300, 0, 130}),
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s/%d", c.kernel, i), func(t *testing.T) {
			t.Parallel()
			m, name := loadKernel(t, c.kernel)
			for k, v := range c.attrs {
				m.Func(name).SetAttr(k, v)
			}
			rng := rand.New(rand.NewSource(int64(i + 100)))
			args := c.args(rng)
			inputs := cloneArgs(args)
			if err := cpu.Launch(m, name, c.grid, args...); err != nil {
				t.Fatalf("cpu: %v", err)
			}
			var ll90 string
			for _, arch := range append(simArchs, wgmmaArch) {
				t.Run(arch, func(t *testing.T) {
					simArgs := cloneArgs(inputs)
					res, err := Lower(m, name, Options{Target: testTarget(arch)})
					if err != nil {
						t.Fatal(err)
					}
					if arch == "sm_90a" {
						ll90 = res.LL
					} else if arch == wgmmaArch && (res.LL == ll90 || strings.Contains(c.kernel, "combine")) {
						t.Skip("no dot on wgmma")
					}
					if err := simulate(res.LL, res, c.grid, simArgs, false); err != nil {
						t.Fatalf("simulate: %v", err)
					}
					compareBuffers(t, args, simArgs, c.rtol, c.atol)
				})
			}
		})
	}
}
