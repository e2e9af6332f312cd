package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac"
)

// pagedMods are the paged suites' own masks: decoding's sliding window (the
// last keys of each sequence's cache) and a look-back that differs by head,
// whose block-mask rows differ inside a kv head's group, so packed tiles
// give way to one head a tile.
const pagedMods = `
mask paged_window<window: i32 = 100>(b, h, q_idx, kv_idx) {
    let q = q_idx + seqlen_k - seqlen_q
    return kv_idx <= q && q - kv_idx < window
}
mask paged_lookback(b, h, q_idx, kv_idx) {
    let qk = q_idx + seqlen_k - seqlen_q
    return kv_idx <= qk && qk - kv_idx < 20 + 37 * h
}
`

// pagedSuiteMasks are the masks of the paged GPU suite
// (TestGPUPagedMatchesReference), whose kernels suiteJobs lists.
var pagedSuiteMasks = []string{"causal_bottom_right", "sliding_window(20, 3)", "paged_window", "paged_lookback"}

// pagedSuiteDims are the head dims of the paged GPU suite.
var pagedSuiteDims = []int{64, 128}

// pagedTile16 makes 16-key pages one per tile (the paged GPU suite runs it
// on causal_bottom_right at D = 128).
var pagedTile16 = map[string]string{"BLOCK_N": "16"}

// pagedOpts are a paged suite case's options.
func pagedOpts(mask, dtype string, splits int) fac.Options {
	return fac.Options{Mask: mask, DType: dtype, NumSplits: splits, Sources: map[string]string{"paged_mods.fa": pagedMods}}
}

// pagedCache makes a paged call's inputs for sequences of lengths lens: q
// [B, H, sq, d], the caches in pages of pageSize keys (hkv heads), one page
// no sequence uses, every page at a random place, sequence 1 sharing
// sequence 0's whole leading pages (a common prefix); table entries past a
// sequence's pages are -1, which the kernel must never read.
func pagedCache(lens []int32, pageSize, heads, hkv, sq, d int, seed uint64) (fac.PagedInputs, fac.PagedShape) {
	rng := rand.New(rand.NewPCG(seed, 11))
	randn := normals(rng)
	maxPages := 1
	for _, n := range lens {
		maxPages = max(maxPages, (int(n)+pageSize-1)/pageSize)
	}
	table := make([]int32, len(lens)*maxPages)
	for i := range table {
		table[i] = -1
	}
	next := int32(0)
	for b, n := range lens {
		for j := 0; j < (int(n)+pageSize-1)/pageSize; j++ {
			if b == 1 && j < int(min(n, lens[0]))/pageSize {
				table[maxPages+j] = table[j]
				continue
			}
			table[b*maxPages+j] = next
			next++
		}
	}
	numPages := int(next) + 1
	perm := rng.Perm(numPages)
	for i, p := range table {
		if p >= 0 {
			table[i] = int32(perm[p])
		}
	}
	ps := fac.PagedShape{Batch: len(lens), Heads: heads, KVHeads: hkv, SeqQ: sq, PageSize: pageSize}
	return fac.PagedInputs{
		Q:            randn(len(lens) * heads * sq * d),
		KCache:       randn(numPages * pageSize * hkv * d),
		VCache:       randn(numPages * pageSize * hkv * d),
		PageTable:    table,
		CacheSeqlens: lens,
	}, ps
}

// TestPagedSuiteCPU runs the paged GPU suite's masks on the CPU device at
// two page sizes against PagedReference, so the suite's sources and cases
// are checked where no GPU is: shuffled and shared pages, lengths 0 and 1,
// GQA 4, bf16 rounding.
func TestPagedSuiteCPU(t *testing.T) {
	lens := []int32{300, 170, 0, 1, 65}
	for i, m := range pagedSuiteMasks {
		for _, ps := range []int{1, 16} {
			fwd, err := fac.CompileForward(pagedOpts(m, "bf16", []int{0, 3}[i%2]), 32)
			if err != nil {
				t.Fatal(err)
			}
			in, shape := pagedCache(lens, ps, 8, 2, 3, 32, uint64(10*i+ps))
			o, lse, err := fwd.RunPagedCPU(in, shape)
			if err != nil {
				t.Fatalf("%s page %d: %v", m, ps, err)
			}
			ro, rlse, err := fwd.PagedReference(in, shape)
			if err != nil {
				t.Fatal(err)
			}
			checkFlat(t, fmt.Sprintf("%s/page%d", m, ps), o, lse, ro, rlse, 2e-2)
			for i := 2 * 8 * 3; i < 3*8*3; i++ { // the empty cache's rows
				if !math.IsInf(float64(lse[i]), -1) || o[i*32] != 0 {
					t.Fatalf("%s page %d: a sequence of no keys got LSE %g, O %g", m, ps, lse[i], o[i*32])
				}
			}
		}
	}
}

// TestPagedFusedCombineCPU runs paged decoding merged in place
// (DecodeConsts fused_combine: flash_fwd_paged's last program per q tile
// merges, no flash_fwd_combine) on the CPU device against the same call
// merged by the combine and against PagedReference: page sizes 1, 16 and
// 64, GQA 4 packed, an empty cache, 3 and 7 splits; and an appending call
// (kv_append first), checked as TestPagedAppendCPU checks one.
func TestPagedFusedCombineCPU(t *testing.T) {
	lens := []int32{300, 170, 0, 1, 65}
	fused := map[string]string{"fused_combine": "true"}
	for i, ps := range []int{1, 16, 64} {
		m := pagedSuiteMasks[i]
		opts := pagedOpts(m, "f32", []int{3, 7, 3}[i])
		split, err := fac.CompileForward(opts, 32)
		if err != nil {
			t.Fatal(err)
		}
		opts.DecodeConsts = fused
		fwd, err := fac.CompileForward(opts, 32)
		if err != nil {
			t.Fatal(err)
		}
		in, shape := pagedCache(lens, ps, 8, 2, 3, 32, uint64(70+i))
		plan, err := fwd.PagedPlan(shape, 300, 0)
		if err != nil || !plan.FusedCombine || len(plan.Kernels()) != 1 {
			t.Fatalf("%s page %d: plan %v (%v), %v: want flash_fwd_paged merging in place", m, ps, plan, plan.Kernels(), err)
		}
		o, lse, err := fwd.RunPagedCPU(in, shape)
		if err != nil {
			t.Fatalf("%s page %d: %v", m, ps, err)
		}
		so, slse, err := split.RunPagedCPU(in, shape)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("fused/%s/page%d", m, ps)
		checkFlat(t, name+" vs split + combine", o, lse, f64s(so), f64s(slse), 1e-5)
		ro, rlse, err := fwd.PagedReference(in, shape)
		if err != nil {
			t.Fatal(err)
		}
		checkFlat(t, name, o, lse, ro, rlse, 1e-5)
	}
	c := appendCPUCases[1]
	opts := c.opts()
	opts.DecodeConsts = fused
	fwd, err := fac.CompileForward(opts, c.d)
	if err != nil {
		t.Fatal(err)
	}
	in, ps := appendInputs(c, 8, 2, 90)
	before := beforeCall(in)
	o, lse, err := fwd.RunPagedCPU(in, ps)
	if err != nil {
		t.Fatalf("%v: %v", c, err)
	}
	checkAppend(t, "fused/"+c.String(), fwd, before, in, ps, o, lse, 1e-5)
}
