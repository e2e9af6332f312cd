package tests

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/passes"
)

// TestMaskRangeRunTimeOverflow is issue 46 item 4: the mask-range pass
// computed its per-row bounds in i32 from the mods' values, so a mod
// `kv_idx <= q_idx + offset` with offset = 2^31 - 1, or
// sliding_window(0, 2147483647), silently gave every row LSE = -inf. The
// pass must never change a result: each case runs on the CPU device with
// and without it (identical bits) and against the float64 reference.
func TestMaskRangeRunTimeOverflow(t *testing.T) {
	src := map[string]string{"offs.fa": `
mask offs(b, h, q_idx, kv_idx, offset: i32) {
    return kv_idx <= q_idx + offset
}
mask offs_lo(b, h, q_idx, kv_idx, offset: i32) {
    return q_idx - offset <= kv_idx && kv_idx <= q_idx
}
mask offs_col(b, h, q_idx, kv_idx, offset: i32) {
    return kv_idx + offset <= q_idx
}
`}
	sh := fac.Shape{Batch: 1, Heads: 2, SeqQ: 70, SeqK: 90, Dim: 16}
	rng := rand.New(rand.NewPCG(46, 4))
	in := fac.Inputs{Q: randVals(rng, sh.Batch*sh.Heads*sh.SeqQ*sh.Dim), K: randVals(rng, sh.Batch*sh.KV()*sh.SeqK*sh.Dim),
		V: randVals(rng, sh.Batch*sh.KV()*sh.SeqK*sh.Dim)}
	const maxI, minI = math.MaxInt32, math.MinInt32
	cases := []struct {
		mask   string
		offset any // nil: no run-time parameter
	}{
		{"offs", maxI}, {"offs", maxI - 40}, {"offs", minI}, {"offs", minI + 60}, {"offs", 5}, {"offs", -20},
		{"offs_lo", maxI}, {"offs_lo", minI}, {"offs_lo", 7},
		{"offs_col", maxI}, {"offs_col", minI}, {"offs_col", maxI - 50}, {"offs_col", -3},
		{"sliding_window(0, 2147483647)", nil}, {"sliding_window(2147483647, 0)", nil},
		{"sliding_window(2147483647, 2147483647)", nil}, {"prefix_lm(2147483647)", nil},
		{"and_masks(causal, sliding_window(2147483600, 0))", nil},
	}
	for _, c := range cases {
		name := c.mask
		if c.offset != nil {
			name += "/" + strconv.Itoa(c.offset.(int))
			in.Scalars = map[string]any{"offset": c.offset}
		} else {
			in.Scalars = nil
		}
		t.Run(name, func(t *testing.T) {
			run := func(disable bool) (o, lse []float32) {
				opts := fac.Options{Mask: c.mask, Sources: src, Consts: map[string]string{"SPARSE_Q": "64", "SPARSE_K": "64"}}
				if disable {
					opts.Passes = passes.Options{Disable: map[string]bool{"mask-range": true}}
				}
				fwd, err := fac.CompileForward(opts, sh.Dim)
				if err != nil {
					t.Fatal(err)
				}
				o, lse, err = fwd.RunCPU(in, sh)
				if err != nil {
					t.Fatal(err)
				}
				if !disable {
					ro, rlse, err := fwd.Reference(in, sh)
					if err != nil {
						t.Fatal(err)
					}
					for i := range rlse {
						if r := rlse[i]; math.IsInf(r, -1) != math.IsInf(float64(lse[i]), -1) || !math.IsInf(r, -1) && math.Abs(r-float64(lse[i])) > 1e-4 {
							t.Fatalf("issue 46 item 4: LSE[%d] = %v, the reference's %v", i, lse[i], r)
						}
					}
					for i := range ro {
						if math.Abs(ro[i]-float64(o[i])) > 1e-4 {
							t.Fatalf("issue 46 item 4: O[%d] = %v, the reference's %v", i, o[i], ro[i])
						}
					}
				}
				return o, lse
			}
			o, lse := run(false)
			wo, wlse := run(true)
			for i := range o {
				if math.Float32bits(o[i]) != math.Float32bits(wo[i]) {
					t.Fatalf("issue 46 item 4: mask-range changed O[%d]: %v, without the pass %v", i, o[i], wo[i])
				}
			}
			for i := range lse {
				if math.Float32bits(lse[i]) != math.Float32bits(wlse[i]) {
					t.Fatalf("issue 46 item 4: mask-range changed LSE[%d]: %v, without the pass %v", i, lse[i], wlse[i])
				}
			}
		})
	}
}

func randVals(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64())
	}
	return out
}
