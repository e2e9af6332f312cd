package flash

import (
	"context"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/fac-compiler/fac/runtime/cpu"
)

// fusedInputs are random inputs of shape sh.
func fusedInputs(sh Shape, seed int64) Inputs {
	rng := rand.New(rand.NewSource(seed))
	fill := func(n int) []float32 {
		xs := make([]float32, n)
		for i := range xs {
			xs[i] = float32(rng.NormFloat64())
		}
		return xs
	}
	return Inputs{Q: fill(sh.Batch * sh.Heads * sh.SeqQ * sh.Dim), K: fill(sh.Batch * sh.KV() * sh.SeqK * sh.Dim),
		V: fill(sh.Batch * sh.KV() * sh.SeqK * sh.VDim())}
}

// TestFusedCombineCounters binds one call of split-KV merged in place
// (DecodeConsts fused_combine) and runs it on the CPU device three times
// over one counters buffer: the last program of each q tile sets its
// counter back to 0, so each run merges, and gives the same O and LSE as
// split + combine.
func TestFusedCombineCounters(t *testing.T) {
	sh := Shape{Batch: 2, Heads: 8, KVHeads: 2, SeqQ: 3, SeqK: 700, Dim: 32}
	in := fusedInputs(sh, 1)
	var want [2][]float32
	for _, fused := range []bool{false, true} {
		opts := Options{Mask: "causal_bottom_right", NumSplits: 5}
		if fused {
			opts.DecodeConsts = map[string]string{"fused_combine": "true"}
		}
		f, err := CompileForward(opts, sh.Dim)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := f.Plan(sh, 0)
		if err != nil {
			t.Fatal(err)
		}
		if plan.FusedCombine != fused || fused != (len(plan.Kernels()) == 1) {
			t.Fatalf("fused %v: plan %v, kernels %v", fused, plan, plan.Kernels())
		}
		bm, err := f.blockMask(in, sh)
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.bindPlan(plan, sh, 0, bm, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		counters, _ := c.calls[0].Buffer("split_counters")
		ctr := cpu.FromI32("split_counters", make([]int32, counters.Len))
		for run := range 3 {
			host := f.hostData(in, c)
			host["split_counters"] = ctr
			out, err := runCPU(context.Background(), c.ks, c.calls, host)
			if err != nil {
				t.Fatal(err)
			}
			o, lse := f32s(out, "o"), f32s(out, "lse")
			if slices.ContainsFunc(ctr.I32(), func(n int32) bool { return n != 0 }) {
				t.Fatalf("fused %v, run %d: counters left at %v", fused, run, ctr.I32())
			}
			if want[0] == nil {
				want = [2][]float32{o, lse}
				continue
			}
			for i := range o {
				if d := math.Abs(float64(o[i] - want[0][i])); d > 1e-5 || math.IsNaN(float64(o[i])) {
					t.Fatalf("fused %v, run %d: O[%d] = %v, want %v", fused, run, i, o[i], want[0][i])
				}
			}
			for i := range lse {
				if d := math.Abs(float64(lse[i] - want[1][i])); d > 1e-5 || math.IsNaN(float64(lse[i])) {
					t.Fatalf("fused %v, run %d: LSE[%d] = %v, want %v", fused, run, i, lse[i], want[1][i])
				}
			}
		}
	}
}
