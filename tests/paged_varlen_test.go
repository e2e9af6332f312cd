package tests

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac"
)

// raggedSuiteMasks are the masks of the ragged GPU suite
// (TestGPUPagedVarlenMatchesReference): the paged suite's, whose kernels
// suiteJobs bundles with flash_fwd_paged_varlen among them, and
// top-left causal (in a ragged batch the mods see seqlen_q = seqlen_k, so
// it keeps causal_bottom_right's pairs).
var raggedSuiteMasks = append([]string{"causal"}, pagedSuiteMasks...)

// raggedBatch makes a ragged call's inputs for sequences of qlens queries
// and lens keys: the cache as pagedCache lays it out (pages shuffled,
// sequence 1 sharing sequence 0's leading pages, -1 past each sequence's
// pages), q packed [total_q, heads, d].
func raggedBatch(qlens, lens []int32, pageSize, heads, hkv, d int, seed uint64) (fac.PagedVarlenInputs, fac.PagedVarlenShape) {
	pc, _ := pagedCache(lens, pageSize, heads, hkv, 1, d, seed)
	cu := []int32{0}
	for _, n := range qlens {
		cu = append(cu, cu[len(cu)-1]+n)
	}
	q := normals(rand.New(rand.NewPCG(seed, 13)))(int(cu[len(cu)-1]) * heads * d)
	return fac.PagedVarlenInputs{Q: q, CuSeqlensQ: cu, KCache: pc.KCache, VCache: pc.VCache, PageTable: pc.PageTable, CacheSeqlens: lens},
		fac.PagedVarlenShape{Batch: len(lens), Heads: heads, KVHeads: hkv, PageSize: pageSize}
}

// TestPagedVarlenSuiteCPU runs the ragged GPU suite's masks on the CPU
// device at two page sizes against PagedVarlenReference, so the suite's
// sources and batches are checked where no GPU is: decode rows beside a
// 40-query chunk and a whole 129-key sequence, a sequence with no
// queries, shuffled and shared pages, GQA 4, bf16 rounding, splits auto
// and forced.
func TestPagedVarlenSuiteCPU(t *testing.T) {
	qlens, lens := []int32{1, 40, 1, 0, 129, 3}, []int32{300, 170, 1, 50, 129, 65}
	for i, m := range raggedSuiteMasks {
		for _, ps := range []int{1, 16} {
			fwd, err := fac.CompileForward(pagedOpts(m, "bf16", []int{0, 3}[i%2]), 32)
			if err != nil {
				t.Fatal(err)
			}
			in, shape := raggedBatch(qlens, lens, ps, 8, 2, 32, uint64(10*i+ps))
			o, lse, err := fwd.RunPagedVarlenCPU(in, shape)
			if err != nil {
				t.Fatalf("%s page %d: %v", m, ps, err)
			}
			ro, rlse, err := fwd.PagedVarlenReference(in, shape)
			if err != nil {
				t.Fatal(err)
			}
			checkFlat(t, fmt.Sprintf("%s/page%d", m, ps), o, lse, ro, rlse, 2e-2)
		}
	}
}
