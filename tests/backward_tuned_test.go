package tests

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/codegen"
)

// TestBackwardTunedTilesAgree runs the backward (dense, also in the
// DETERMINISTIC mode, and varlen) on the CPU device with the kernels'
// default tiles and with the tiles tuned for sm_90a (Options.Target.Arch),
// bf16 at D 32, 64 and 128, causal, GQA 2, unequal odd
// lengths: dK and dV must agree exactly (each is summed in one program in
// the same order whatever the tile height) and dQ within f32 accumulation
// order (its atomic adds come in other groupings). The default tiles run
// with the tuned set's fold_scale, which rounds P differently.
func TestBackwardTunedTilesAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	const heads, kvHeads = 4, 2
	for _, d := range []int{32, 64, 128} {
		rng := rand.New(rand.NewPCG(uint64(d), 2))
		randn := normals(rng)
		// Dense.
		sh := fac.Shape{Batch: 1, Heads: heads, KVHeads: kvHeads, SeqQ: 200, SeqK: 261, Dim: d}
		in := fac.Inputs{Q: randn(200 * heads * d), K: randn(261 * kvHeads * d), V: randn(261 * kvHeads * d)}
		do := randn(len(in.Q))
		// One forward (the tuned one's tiles change O's and LSE's rounding).
		fwd, err := fac.CompileForward(fac.Options{Mask: "causal", DType: "bf16"}, d)
		if err != nil {
			t.Fatal(err)
		}
		o, lse, err := fwd.RunCPU(in, sh)
		if err != nil {
			t.Fatal(err)
		}
		for _, det := range []bool{false, true} {
			var dense [2]*fac.Grads
			for i, arch := range []string{"", "sm_90a"} {
				opts := tunedRounding(arch)
				if det {
					// flash_bwd_dq's tuned tiles too.
					opts.Consts = maps.Clone(opts.Consts)
					if opts.Consts == nil {
						opts.Consts = map[string]string{}
					}
					opts.Consts["DETERMINISTIC"] = "true"
				}
				bwd, err := fac.CompileBackward(opts, d)
				if err != nil {
					t.Fatal(err)
				}
				g, err := bwd.RunCPUGrads(t.Context(), fac.BackwardInputs{Q: in.Q, K: in.K, V: in.V, O: o, LSE: lse, DO: do}, sh)
				if err != nil {
					t.Fatal(err)
				}
				dense[i] = g
			}
			gradsAgree(t, fmt.Sprintf("dense (DETERMINISTIC %v)", det), d, dense)
		}
		// Varlen.
		cq, ck := cumsum([]int{1, 0, 130, 7, 200}), cumsum([]int{1, 5, 129, 7, 260})
		tq, tk := int(cq[len(cq)-1]), int(ck[len(ck)-1])
		vin := fac.VarlenInputs{Q: randn(tq * heads * d), K: randn(tk * kvHeads * d), V: randn(tk * kvHeads * d), CuSeqlensQ: cq, CuSeqlensK: ck}
		vdo := randn(len(vin.Q))
		vfwd, err := fac.CompileForwardVarlen(fac.Options{Mask: "causal", DType: "bf16"}, d)
		if err != nil {
			t.Fatal(err)
		}
		vo, vlse, err := vfwd.RunCPU(vin, heads, kvHeads)
		if err != nil {
			t.Fatal(err)
		}
		var varlen [2]*fac.Grads
		for i, arch := range []string{"", "sm_90a"} {
			bwd, err := fac.CompileBackwardVarlen(tunedRounding(arch), d)
			if err != nil {
				t.Fatal(err)
			}
			g, err := bwd.RunCPU(fac.VarlenBackwardInputs{VarlenInputs: vin, O: vo, LSE: vlse, DO: vdo}, heads, kvHeads)
			if err != nil {
				t.Fatal(err)
			}
			varlen[i] = g
		}
		gradsAgree(t, "varlen", d, varlen)
	}
}

// tunedRounding is the causal bf16 backward's options for arch, with the
// tuned set's fold_scale on the default tiles ("").
func tunedRounding(arch string) fac.Options {
	o := fac.Options{Mask: "causal", DType: "bf16", Target: codegen.TargetConfig{Arch: arch}}
	if arch == "" {
		o.Consts = map[string]string{"fold_scale": "true"}
	}
	return o
}

// gradsAgree compares the default tiles' gradients (g[0]) with the tuned
// ones' (g[1]).
func gradsAgree(t *testing.T, what string, d int, g [2]*fac.Grads) {
	t.Helper()
	for _, p := range []struct {
		name string
		a, b []float32
		tol  float64
	}{{"dQ", g[0].DQ, g[1].DQ, 1e-3}, {"dK", g[0].DK, g[1].DK, 0}, {"dV", g[0].DV, g[1].DV, 0}} {
		top, diff := 0.0, 0.0
		for i := range p.a {
			top = math.Max(top, math.Abs(float64(p.a[i])))
			diff = math.Max(diff, math.Abs(float64(p.a[i]-p.b[i])))
		}
		if diff > p.tol*top {
			t.Errorf("%s d%d %s: tuned tiles differ by %.3g (max |%s| %.3g)", what, d, p.name, diff, p.name, top)
		}
	}
}
