package flash

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/blockmask"
)

// raggedSrc are user masks for the ragged tests: a look-back per head
// (its block-mask rows differ inside a kv head's group, so packing gives
// way) and a window that counts from the bottom-right diagonal, both in
// the positions the kernel passes (seqlen_q = seqlen_k there).
const raggedSrc = `
mask ragged_lookback(b, h, q_idx, kv_idx) {
    return kv_idx <= q_idx && q_idx - kv_idx < 20 + 37 * h
}
mask ragged_br_window(b, h, q_idx, kv_idx) {
    let q = q_idx + seqlen_k - seqlen_q
    return kv_idx <= q && q - kv_idx < 150
}
mask ragged_window_rt(b, h, q_idx, kv_idx, w: i32) {
    return kv_idx <= q_idx && q_idx - kv_idx < w
}
`

// raggedBatch is a ragged call's inputs: sequences with qlens queries
// and lens keys in a shuffled, shared paged cache (pagedCache), q packed
// [total_q, H, D].
func raggedBatch(rng *rand.Rand, qlens, lens []int32, pageSize, h, hkv, d, dv int) (PagedVarlenInputs, PagedVarlenShape) {
	pc := pagedCache(rng, lens, pageSize, hkv, d, dv)
	cu := []int32{0}
	for _, n := range qlens {
		cu = append(cu, cu[len(cu)-1]+n)
	}
	in := PagedVarlenInputs{Q: randF32(rng, int(cu[len(cu)-1])*h*d), CuSeqlensQ: cu, KCache: pc.KCache, VCache: pc.VCache,
		PageTable: pc.PageTable, CacheSeqlens: lens}
	return in, PagedVarlenShape{Batch: len(lens), Heads: h, KVHeads: hkv, PageSize: pageSize}
}

// TestPagedVarlenCPU checks flash_fwd_paged_varlen + flash_fwd_combine on
// the CPU device against the float64 reference, row by row (each
// sequence's pages gathered, its queries at its last positions): decode
// rows and prefill chunks in one batch (37 queries crossing a 128-position
// block, a whole 150-key sequence, one with no queries), lengths that are
// no multiple of the page or tile, shuffled and shared pages, GQA 4
// packed or not, 16- and 64-row tiles, splits auto and forced, page sizes
// gathered (1), four a tile (16) and a page a tile (64), top-left and
// bottom-right causal (the same pairs here), a sliding window, user masks
// reading h (packing gives way), the lengths or a run-time parameter, a
// score, f32 and bf16, sinks.
func TestPagedVarlenCPU(t *testing.T) {
	const H, Hkv, D = 8, 2, 32
	mixed := [2][]int32{{1, 1, 37, 0, 1, 150, 3}, {300, 1, 200, 50, 129, 150, 17}}
	decode := [2][]int32{{1, 1, 1, 1}, {300, 1, 70, 129}}
	type run struct {
		mask, score string
		batch       [2][]int32
		pageSize    int
		pack        PackGQA
		splits      int
		dtype       string
		sinks       bool
		scalars     map[string]any
	}
	runs := []run{
		{mask: "causal", batch: mixed, pageSize: 16},
		{mask: "causal_bottom_right", batch: mixed, pageSize: 1, splits: 3},
		{mask: "sliding_window(40, 0)", batch: mixed, pageSize: 64, pack: PackGQAOff},
		{mask: "ragged_lookback", batch: mixed, pageSize: 16, splits: 2},
		{mask: "ragged_br_window", score: "softcap(5.0)", batch: mixed, pageSize: 16, dtype: "bf16"},
		{mask: "none", batch: mixed, pageSize: 16, sinks: true, splits: 2},
		{mask: "ragged_window_rt", batch: mixed, pageSize: 16, scalars: map[string]any{"w": 33}},
		{mask: "causal", batch: decode, pageSize: 16},
		{mask: "sliding_window(40, 0)", batch: decode, pageSize: 1, splits: 4, sinks: true},
	}
	for i, r := range runs {
		name := fmt.Sprintf("%s/page%d/q%d/splits%d/%s", strings.NewReplacer("(", "", ")", "", ", ", "_").Replace(r.mask), r.pageSize, len(r.batch[0]), r.splits, r.dtype)
		t.Run(name, func(t *testing.T) {
			f, err := CompileForward(Options{Mask: r.mask, Score: r.score, DType: r.dtype, NumSplits: r.splits, PackGQA: r.pack, Sinks: r.sinks,
				Sources: map[string]string{"ragged.fa": raggedSrc}}, D)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(i), 17))
			in, ps := raggedBatch(rng, r.batch[0], r.batch[1], r.pageSize, H, Hkv, D, D)
			in.Scalars = r.scalars
			if r.sinks {
				in.Sinks = randF32(rng, H)
				in.Sinks[1] = float32(math.Inf(-1))
			}
			plan, err := f.PagedVarlenPlan(ps, in.CuSeqlensQ, in.CacheSeqlens, 0)
			if err != nil {
				t.Fatal(err)
			}
			wantM := 64
			if slices.Max(r.batch[0]) == 1 {
				wantM = 16
			}
			if !plan.Varlen || plan.BlockM != wantM || (r.splits > 0 && plan.NumSplits != r.splits) || (r.pack == PackGQAAuto) != (plan.Pack == 4) {
				t.Errorf("plan %v: want BLOCK_M %d, %d splits, pack %v", plan, wantM, r.splits, r.pack)
			}
			t.Logf("plan: %v", plan)
			o, lse, err := f.RunPagedVarlenCPU(in, ps)
			if err != nil {
				t.Fatal(err)
			}
			wo, wlse, err := f.PagedVarlenReference(in, ps)
			if err != nil {
				t.Fatal(err)
			}
			tol := 2e-5
			if r.dtype == "bf16" {
				tol = 2e-2
			}
			if d := maxDiff(o, wo); d > tol || math.IsNaN(d) {
				t.Errorf("O differs by %g", d)
			}
			if d := maxDiff(lse, wlse); d > tol || math.IsNaN(d) {
				t.Errorf("LSE differs by %g", d)
			}
			// A sample of rows through PagedVarlenReferenceRows gives
			// the same values.
			rows := []RefRow{{B: 0, H: 7, I: 0}, {B: 2, H: 3, I: 36}}
			if r.batch[0][2] < 37 {
				rows = rows[:1]
			}
			ro, rlse, err := f.PagedVarlenReferenceRows(in, ps, rows)
			if err != nil {
				t.Fatal(err)
			}
			for k, row := range rows {
				tok := int(in.CuSeqlensQ[row.B]) + row.I
				if !slices.Equal(ro[k*D:][:D], wo[(tok*H+row.H)*D:][:D]) || rlse[k] != wlse[row.H*len(in.Q)/(H*D)+tok] {
					t.Errorf("row %+v: PagedVarlenReferenceRows differs from PagedVarlenReference", row)
				}
			}
		})
	}
}

// TestPagedVarlenMatchesPaged: a ragged batch of equal query lengths is a
// paged call (queries at the end of each cache, causal_bottom_right),
// so both kernels, and both references, give the same rows, in their own
// layouts.
func TestPagedVarlenMatchesPaged(t *testing.T) {
	const H, Hkv, D, sq = 4, 2, 16, 3
	f, err := CompileForward(Options{Mask: "causal_bottom_right"}, D)
	if err != nil {
		t.Fatal(err)
	}
	lens := []int32{70, 3, 129}
	rng := rand.New(rand.NewPCG(1, 2))
	in, ps := raggedBatch(rng, []int32{sq, sq, sq}, lens, 16, H, Hkv, D, D)
	// The paged call's q is [B, H, Sq, D]: the same rows, transposed.
	pq := make([]float32, len(in.Q))
	for b := range 3 {
		for i := range sq {
			for h := range H {
				copy(pq[((b*H+h)*sq+i)*D:][:D], in.Q[((b*sq+i)*H+h)*D:][:D])
			}
		}
	}
	po, plse, err := f.RunPagedCPU(PagedInputs{Q: pq, KCache: in.KCache, VCache: in.VCache, PageTable: in.PageTable, CacheSeqlens: lens},
		PagedShape{Batch: 3, Heads: H, KVHeads: Hkv, SeqQ: sq, PageSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	o, lse, err := f.RunPagedVarlenCPU(in, ps)
	if err != nil {
		t.Fatal(err)
	}
	// The references agree too: PagedReference (reference.AttentionSinks
	// on each sequence's gathered pages) and PagedVarlenReference (row by
	// row, the mods at the rows' positions).
	pro, prlse, err := f.PagedReference(PagedInputs{Q: pq, KCache: in.KCache, VCache: in.VCache, PageTable: in.PageTable, CacheSeqlens: lens},
		PagedShape{Batch: 3, Heads: H, KVHeads: Hkv, SeqQ: sq, PageSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	ro, rlse, err := f.PagedVarlenReference(in, ps)
	if err != nil {
		t.Fatal(err)
	}
	for b := range 3 {
		for i := range sq {
			for h := range H {
				t1, r1 := b*sq+i, (b*H+h)*sq+i
				if d := math.Abs(rlse[h*3*sq+t1] - prlse[r1]); d > 1e-12 {
					t.Fatalf("sequence %d row %d head %d: the references' LSE differ by %g", b, i, h, d)
				}
				for x := range D {
					if d := math.Abs(ro[(t1*H+h)*D+x] - pro[r1*D+x]); d > 1e-12 {
						t.Fatalf("sequence %d row %d head %d: the references' O differ by %g", b, i, h, d)
					}
				}
				if d := math.Abs(float64(lse[h*3*sq+t1] - plse[r1])); d > 1e-5 {
					t.Fatalf("sequence %d row %d head %d: LSE %g, paged %g", b, i, h, lse[h*3*sq+t1], plse[r1])
				}
				for x := range D {
					if d := math.Abs(float64(o[(t1*H+h)*D+x] - po[r1*D+x])); d > 1e-5 {
						t.Fatalf("sequence %d row %d head %d: O differs from the paged call's by %g", b, i, h, d)
					}
				}
			}
		}
	}
}

// TestRaggedBlockMask checks a ragged batch's block mask against the mask
// evaluated element by element: for each sequence, every q block its
// queries touch (from the block of its first query, at position n − n_q)
// lists each kv block of its n keys with the class of the block's
// rectangle cut to the sequence (positions below n): full where every
// pair is kept, unlisted where none is, partial otherwise (or, at the
// sequence's end, where a block cut from the longest sequence's mask
// stays partial). Masks reading neither the lengths nor h (cut from one
// mask), the lengths (one per length), h (rows per head) and b (all
// partial).
func TestRaggedBlockMask(t *testing.T) {
	src := raggedSrc + `
mask by_seq(b, h, q_idx, kv_idx) { return q_idx >= kv_idx + b }
`
	qlens := []int32{1, 1, 37, 0, 1, 150, 3, 300, 2}
	lens := []int32{300, 1, 200, 50, 129, 150, 17, 700, 256}
	const heads = 4
	for _, mask := range []string{"causal", "sliding_window(100, 0)", "ragged_br_window", "ragged_lookback", "by_seq", "none"} {
		f, err := CompileForward(Options{Mask: mask, Sources: map[string]string{"m.fa": src}}, 16)
		if err != nil {
			t.Fatal(err)
		}
		cu := []int32{0}
		for _, n := range qlens {
			cu = append(cu, cu[len(cu)-1]+n)
		}
		c, err := f.checkRaggedGeometry(PagedVarlenShape{Batch: len(lens), Heads: heads, KVHeads: heads, PageSize: 16}, 1, 64, cu, lens, int(cu[len(cu)-1]))
		if err != nil {
			t.Fatal(err)
		}
		m, err := f.buildRaggedBlockMask(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		bq, bk := f.sparse()
		listed, total := 0, 0
		for b, n := range lens {
			nq := int(qlens[b])
			if nq == 0 {
				continue
			}
			first, nk := (int(n)-nq)/bq, cdiv(int(n), bk)
			for h := range heads {
				for qb := first; qb < cdiv(int(n), bq); qb++ {
					row := int(m.kv.rowStart[b*heads+h]) + qb - first
					got := make([]blockmask.Class, nk)
					for j, x := range m.kv.indices[m.kv.listStart[row]:][:m.kv.counts[row]+m.kv.full[row]] {
						got[x] = blockmask.Full
						if j < int(m.kv.counts[row]) {
							got[x] = blockmask.Partial
						}
					}
					for kb := range nk {
						want := f.bruteClass(t, b, h, int(n), qb*bq, min((qb+1)*bq, int(n)), kb*bk, min((kb+1)*bk, int(n)))
						total++
						if got[kb] != blockmask.Empty {
							listed++
						}
						switch {
						case got[kb] == want:
						case got[kb] == blockmask.Partial && (mask == "by_seq" || qb == cdiv(int(n), bq)-1 || kb == nk-1):
						default:
							t.Fatalf("%s sequence %d (%d keys) head %d block (%d, %d): listed %v, the mask gives %v", mask, b, n, h, qb, kb, got[kb], want)
						}
					}
				}
			}
		}
		t.Logf("%s: %d of %d blocks listed", mask, listed, total)
	}
}

// bruteClass is the class of the block q ∈ [q0, q1), kv ∈ [k0, k1) of
// sequence b (n positions; the mods see seqlen_q = seqlen_k = n), head h,
// the mask evaluated on every pair.
func (f *Forward) bruteClass(t *testing.T, b, h, n, q0, q1, k0, k1 int) blockmask.Class {
	fn, err := modTileFunc(f.res.Program, f.res.Mask, Shape{Batch: 9, Heads: 4, SeqQ: n, SeqK: n, Dim: 16}, nil, k1-k0)
	if err != nil {
		t.Fatal(err)
	}
	if fn == nil {
		return blockmask.Full
	}
	kept := 0
	for q := q0; q < q1; q++ {
		vals, err := fn(nil, b, h, q, k0)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if v != 0 {
				kept++
			}
		}
	}
	switch kept {
	case 0:
		return blockmask.Empty
	case (q1 - q0) * (k1 - k0):
		return blockmask.Full
	}
	return blockmask.Partial
}

// TestRaggedTiles checks the tile list: every query row of every sequence
// in exactly one tile, each tile within one aligned run of q_per_tile
// positions, the count raggedTileCount gives, and the tiles ordered by
// the blocks they visit, most first.
func TestRaggedTiles(t *testing.T) {
	f, err := CompileForward(Options{Mask: "causal"}, 16)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		nseq := 1 + rng.IntN(12)
		qlens, lens := make([]int32, nseq), make([]int32, nseq)
		cu := []int32{0}
		for b := range nseq {
			lens[b] = int32(rng.IntN(1000))
			qlens[b] = int32(rng.IntN(int(lens[b]) + 1))
			if rng.IntN(2) == 0 {
				qlens[b] = min(lens[b], 1)
			}
			cu = append(cu, cu[b]+qlens[b])
		}
		c, err := f.checkRaggedGeometry(PagedVarlenShape{Batch: nseq, Heads: 2, KVHeads: 2, PageSize: 16}, 1, 64, cu, lens, int(cu[nseq]))
		if err != nil {
			t.Fatal(err)
		}
		m, err := f.buildRaggedBlockMask(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, qpt := range []int{1, 4, 16, 64} {
			seq, first := raggedTiles(cu, lens, qpt, m, 2)
			if len(seq) != raggedTileCount(cu, lens, qpt) {
				t.Fatalf("qpt %d: %d tiles, raggedTileCount %d", qpt, len(seq), raggedTileCount(cu, lens, qpt))
			}
			seen := map[[2]int32]bool{}
			prev := int32(math.MaxInt32)
			for i := range seq {
				b := seq[i]
				off := lens[b] - qlens[b]
				p0 := off + first[i]
				end := min((p0/int32(qpt)+1)*int32(qpt), lens[b])
				for p := p0; p < end; p++ {
					if seen[[2]int32{b, p}] {
						t.Fatalf("qpt %d: sequence %d position %d in two tiles", qpt, b, p)
					}
					seen[[2]int32{b, p}] = true
				}
				r := m.kv.rowStart[b*2] + p0/128 - off/128
				work := m.kv.counts[r] + m.kv.full[r]
				if work > prev {
					t.Fatalf("qpt %d: tile %d visits %d blocks, after one of %d", qpt, i, work, prev)
				}
				prev = work
			}
			if len(seen) != int(cu[nseq]) {
				t.Fatalf("qpt %d: tiles cover %d query rows of %d", qpt, len(seen), cu[nseq])
			}
		}
	}
}

// TestPagedVarlenErrors checks that bad ragged inputs are refused with the
// offending value named, and that a batch with no queries runs nothing.
func TestPagedVarlenErrors(t *testing.T) {
	f, err := CompileForward(Options{Mask: "causal"}, 16)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	good, ps := raggedBatch(rng, []int32{1, 5}, []int32{20, 40}, 16, 4, 2, 16, 16)
	if _, _, err := f.RunPagedVarlenCPU(good, ps); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(in *PagedVarlenInputs, ps *PagedVarlenShape)
		want string
	}{
		{"cu length", func(in *PagedVarlenInputs, _ *PagedVarlenShape) { in.CuSeqlensQ = in.CuSeqlensQ[:2] }, "cu_seqlens_q has 2 elements: want 3"},
		{"cu start", func(in *PagedVarlenInputs, _ *PagedVarlenShape) { in.CuSeqlensQ = []int32{1, 1, 6} }, "cu_seqlens_q[0] = 1"},
		{"cu end", func(in *PagedVarlenInputs, _ *PagedVarlenShape) { in.CuSeqlensQ = []int32{0, 1, 5} }, "cu_seqlens_q ends at 5, but q has 6 tokens"},
		{"cu decreasing", func(in *PagedVarlenInputs, _ *PagedVarlenShape) { in.CuSeqlensQ = []int32{0, 7, 6} }, "cu_seqlens_q decreases at 2"},
		{"more queries than keys", func(in *PagedVarlenInputs, _ *PagedVarlenShape) { in.CacheSeqlens = []int32{20, 4} }, "sequence 1 has 5 queries but cache_seqlens[1] = 4"},
		{"lens count", func(in *PagedVarlenInputs, _ *PagedVarlenShape) { in.CacheSeqlens = []int32{20} }, "cache_seqlens has 1 elements: want 2"},
		{"lens past the table", func(in *PagedVarlenInputs, _ *PagedVarlenShape) { in.CacheSeqlens = []int32{20, 49} }, "cache_seqlens[1] = 49: want 0 to max_pages · page_size = 48"},
		{"table entry", func(in *PagedVarlenInputs, _ *PagedVarlenShape) {
			in.PageTable = slices.Clone(in.PageTable)
			in.PageTable[4] = 99
		}, "page_table[1, 1] = 99"},
		{"uncovered page", func(in *PagedVarlenInputs, _ *PagedVarlenShape) {
			in.PageTable = slices.Clone(in.PageTable)
			in.PageTable[5] = -1
		}, "page_table[1, 2] = -1"},
		{"q size", func(in *PagedVarlenInputs, _ *PagedVarlenShape) { in.Q = in.Q[:len(in.Q)-1] }, "q has 383 elements"},
		{"k cache", func(in *PagedVarlenInputs, _ *PagedVarlenShape) { in.KCache = in.KCache[:7] }, "k_cache has 7 elements"},
		{"heads", func(_ *PagedVarlenInputs, ps *PagedVarlenShape) { ps.KVHeads = 3 }, "must be a multiple of kv heads"},
		{"page size", func(_ *PagedVarlenInputs, ps *PagedVarlenShape) { ps.PageSize = 0 }, "page size 0"},
		{"sinks", func(in *PagedVarlenInputs, _ *PagedVarlenShape) { in.Sinks = []float32{1} }, "compiled without them"},
	}
	for _, c := range cases {
		in, shape := good, ps
		c.edit(&in, &shape)
		if _, _, err := f.RunPagedVarlenCPU(in, shape); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
	empty := good
	empty.Q, empty.CuSeqlensQ = nil, []int32{0, 0, 0}
	if o, lse, err := f.RunPagedVarlenCPU(empty, ps); err != nil || len(o) != 0 || len(lse) != 0 {
		t.Errorf("a batch with no queries: %d, %d values, %v", len(o), len(lse), err)
	}
	doc, err := CompileForward(Options{Mask: "document"}, 16)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := doc.RunPagedVarlenCPU(good, ps); err == nil || !strings.Contains(err.Error(), "aux tensors") {
		t.Errorf("a mask with aux tensors: %v", err)
	}
}

// TestRaggedWorkspaceBound: the partial outputs of every plan fit the
// workspace NewPagedVarlenWorkspace makes for its largest batch (splits ×
// total_q ≤ raggedWorkspaceRows), on random batches of decode rows and
// chunks, with auto and forced splits, packed or not.
func TestRaggedWorkspaceBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, opts := range []Options{{Mask: "causal"}, {Mask: "causal", PackGQA: PackGQAOff}, {Mask: "none", NumSplits: 5}, {Mask: "causal", SMs: 16}} {
		f, err := CompileForward(opts, 16)
		if err != nil {
			t.Fatal(err)
		}
		for range 200 {
			nseq := 1 + rng.IntN(40)
			ps := PagedVarlenShape{Batch: nseq, Heads: []int{4, 8, 32}[rng.IntN(3)], KVHeads: 4, PageSize: 16}
			cu, lens := []int32{0}, make([]int32, nseq)
			for b := range nseq {
				lens[b] = int32(1 + rng.IntN(40000))
				nq := int32(1)
				if rng.IntN(8) == 0 {
					nq = int32(1 + rng.IntN(int(min(lens[b], 3000))))
				}
				cu = append(cu, cu[b]+nq)
			}
			plan, err := f.PagedVarlenPlan(ps, cu, lens, 132)
			if err != nil {
				t.Fatal(err)
			}
			bound, err := f.raggedWorkspaceRows(ps, int(cu[nseq]), int(slices.Max(lens)), 132)
			if err != nil {
				t.Fatal(err)
			}
			if need := plan.NumSplits * int(cu[nseq]); need > bound {
				t.Fatalf("%+v: plan %v needs %d rows × splits, the workspace bound is %d", opts, plan, need, bound)
			}
		}
	}
}

// TestRaggedPlanLongCaches: a ragged batch whose sequences × longest cache
// would overflow 32-bit offsets as a dense [B, Hkv, Sk, D] tensor (fac bench
// --ragged's: 64 decode rows and 2 chunks of 2048 queries over caches of 4k
// to 32k keys) plans, as does the paged call of the same caches: their keys
// live in pages, which are checked on their own.
func TestRaggedPlanLongCaches(t *testing.T) {
	f, err := CompileForward(Options{Mask: "causal"}, 128)
	if err != nil {
		t.Fatal(err)
	}
	const n = 66
	cu, lens := []int32{0}, make([]int32, n)
	for b := range n {
		lens[b] = int32(4096 + b*(32768-4096)/(n-1))
		nq := int32(1)
		if b >= n-2 {
			nq = 2048
		}
		cu = append(cu, cu[b]+nq)
	}
	if _, err := f.PagedVarlenPlan(PagedVarlenShape{Batch: n, Heads: 32, KVHeads: 8, PageSize: 16}, cu, lens, 132); err != nil {
		t.Fatalf("ragged plan: %v", err)
	}
	if _, err := f.PagedPlan(PagedShape{Batch: n, Heads: 32, KVHeads: 8, SeqQ: 1, PageSize: 16}, 32768, 132); err != nil {
		t.Fatalf("paged plan: %v", err)
	}
	// The dense call of that shape cannot be addressed, and says so.
	if _, err := f.Plan(Shape{Batch: n, Heads: 32, KVHeads: 8, SeqQ: 1, SeqK: 32768, Dim: 128}, 132); err == nil || !strings.Contains(err.Error(), "32-bit") {
		t.Fatalf("dense plan: %v, want a 32-bit offsets error", err)
	}
}
