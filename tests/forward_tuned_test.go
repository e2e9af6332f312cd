package tests

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/internal/half"
)

// TestForwardTunedDefaultsOnCPU runs flash_fwd as the Go API compiles it
// for sm_90a (Options.Target.Arch: the tuned sets) on the CPU device against the
// float64 reference: at D = 64 the three consumer groups on 192-row mask
// blocks (which the CPU device runs in turn) for none and causal (causal
// launched heads-minor in groups of 16 heads), 128×128 tiles otherwise,
// with heads_minor in groups of 16 heads for document at D = 128, and for
// sliding window 128×64 tiles on 64-key blocks, two CTAs a multiprocessor. Odd, unequal lengths and GQA, then decoding shapes (split-KV
// and PackGQA over the groups' 192-row blocks).
func TestForwardTunedDefaultsOnCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, d := range []int{64, 128} {
		for mi, m := range masks {
			switch m.expr {
			case "causal", "sliding_window(20, 3)", "document", "none":
			default:
				continue
			}
			fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, DType: "bf16", Target: codegen.TargetConfig{Arch: "sm_90a"}}, d)
			if err != nil {
				t.Fatal(err)
			}
			a := fwd.Result().Attrs()
			wantG, wantSQ, wantSK, wantHM, wantHG, wantCTAs := int64(1), int64(128), int64(128), int64(0), int64(0), int64(1)
			short := m.expr == "document" || m.expr == "sliding_window(20, 3)"
			switch {
			case d == 64 && m.expr == "causal":
				wantG, wantSQ, wantHM, wantHG = 3, 192, 1, 16
			case d == 64 && !short:
				wantG, wantSQ = 3, 192
			case d == 128 && m.expr == "document":
				wantHM, wantHG = 1, 16
			case d == 128 && short:
				wantSK, wantHM, wantHG, wantCTAs = 64, 1, 16, 2
			}
			got := []int64{max(1, a["consumer_groups"]), a["SPARSE_Q"], a["SPARSE_K"], a["heads_minor"], a["heads_group"], max(1, a["ctas_per_sm"])}
			if want := []int64{wantG, wantSQ, wantSK, wantHM, wantHG, wantCTAs}; !slices.Equal(got, want) {
				t.Fatalf("d%d %s: consumer_groups, SPARSE_Q, SPARSE_K, heads_minor, heads_group, ctas_per_sm = %v; want %v", d, m.expr, got, want)
			}
			for si, sl := range [][2]int{{300, 257}, {1, 900}, {7, 900}, {193, 193}} {
				sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: sl[0], SeqK: sl[1], Dim: d}
				in := inputs(sh, uint64(100*mi+si+d))
				o, lse, err := fwd.RunCPU(only(fwd, in), sh)
				name := fmt.Sprintf("d%d %s %dx%d", d, m.expr, sl[0], sl[1])
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				ro, rlse := goReference(roundInputs(in, "bf16"), sh, m.fn, nil)
				check(t, name, o, lse, ro, rlse, sh, 2e-2)
			}
		}
	}
}

// TestForwardTunedBlocksMismatch: a FlexAttention-style block mask of
// 128-row blocks given to the D = 64 tuned forward (192-row blocks) is
// refused with the way out: the Consts that select 128-row blocks, which
// then run.
func TestForwardTunedBlocksMismatch(t *testing.T) {
	sh := fac.Shape{Batch: 1, Heads: 2, KVHeads: 2, SeqQ: 300, SeqK: 300, Dim: 64}
	bm, _, err := fac.CreateBlockMask(t.Context(), fac.BlockMaskOptions{Mask: "causal", SeqQ: sh.SeqQ, SeqK: sh.SeqK})
	if err != nil {
		t.Fatal(err)
	}
	in := inputs(sh, 3)
	in.Aux, in.BlockMask = nil, bm
	fwd, err := fac.CompileForward(fac.Options{Mask: "causal", DType: "bf16", Target: codegen.TargetConfig{Arch: "sm_90a"}}, 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := fwd.RunCPU(in, sh); err == nil || !strings.Contains(err.Error(), "compile with Consts SPARSE_Q=128, SPARSE_K=128") {
		t.Fatalf("err = %v, want the Consts that fit the block mask", err)
	}
	fwd, err = fac.CompileForward(fac.Options{Mask: "causal", DType: "bf16", Target: codegen.TargetConfig{Arch: "sm_90a"}, Consts: map[string]string{"SPARSE_Q": "128", "SPARSE_K": "128"}}, 64)
	if err != nil {
		t.Fatal(err)
	}
	o, lse, err := fwd.RunCPU(in, sh)
	if err != nil {
		t.Fatal(err)
	}
	ro, rlse := goReference(roundInputs(in, "bf16"), sh, maskFn("causal"), nil)
	check(t, "causal with 128-row blocks", o, lse, ro, rlse, sh, 2e-2)
}

// roundInputs rounds q, k, v to the kernel's storage type, as the GPU sees them.
func roundInputs(in fac.Inputs, dtype string) fac.Inputs {
	r := func(xs []float32) []float32 {
		out := make([]float32, len(xs))
		for i, x := range xs {
			if dtype == "bf16" {
				out[i] = half.BF16ToF32(half.F32ToBF16(x))
			} else {
				out[i] = half.F16ToF32(half.F32ToF16(x))
			}
		}
		return out
	}
	in.Q, in.K, in.V = r(in.Q), r(in.K), r(in.V)
	return in
}

// TestForwardHeadsGroupOnCPU: heads_minor with heads_group (programs q tile
// by q tile across groups of heads) covers every tile once, plain and
// persistent: 18 heads in groups of 9 (the tuned 16, sliding window), 3
// (asked 5: document, and causal persistent) and 3 (asked 3: causal); and
// on D = 64's three consumer groups, whose programs take 192 rows each
// (groups of 3 asked 4, and of 9 asked 16).
func TestForwardHeadsGroupOnCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	groups := func(hg string) map[string]string {
		return map[string]string{"BLOCK_M": "64", "BLOCK_N": "128", "num_warps": "4", "consumer_groups": "3",
			"SPARSE_Q": "192", "SPARSE_K": "128", "num_stages": "4", "warp_specialize": "true", "overlap": "true",
			"tma_store": "true", "lazy_rescale": "true", "fold_scale": "true", "heads_minor": "true", "heads_group": hg}
	}
	for i, c := range []struct {
		mask   string
		d      int
		consts map[string]string
	}{
		{"sliding_window(20, 3)", 128, nil}, // heads_minor and heads_group from the tuned set
		{"document", 128, map[string]string{"heads_group": "5"}},
		{"causal", 128, map[string]string{"heads_minor": "true", "heads_group": "3"}},
		{"causal", 128, map[string]string{"heads_minor": "true", "heads_group": "5", "persistent": "true"}},
		{"causal", 64, groups("4")},
		{"none", 64, groups("16")},
	} {
		fwd, err := fac.CompileForward(fac.Options{Mask: c.mask, DType: "bf16", Target: codegen.TargetConfig{Arch: "sm_90a"}, Consts: c.consts}, c.d)
		if err != nil {
			t.Fatal(err)
		}
		if a := fwd.Result().Attrs(); a["heads_minor"] != 1 || a["heads_group"] == 0 || c.d == 64 && a["consumer_groups"] != 3 {
			t.Fatalf("%s %v: heads_minor %d, heads_group %d, consumer_groups %d", c.mask, c.consts, a["heads_minor"], a["heads_group"], a["consumer_groups"])
		}
		for si, sl := range [][2]int{{300, 257}, {1, 900}} {
			sh := fac.Shape{Batch: 3, Heads: 6, KVHeads: 3, SeqQ: sl[0], SeqK: sl[1], Dim: c.d}
			in := inputs(sh, uint64(10*i+si+7))
			o, lse, err := fwd.RunCPU(only(fwd, in), sh)
			name := fmt.Sprintf("%s %v %dx%d", c.mask, c.consts, sl[0], sl[1])
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ro, rlse := goReference(roundInputs(in, "bf16"), sh, maskFn(c.mask), nil)
			check(t, name, o, lse, ro, rlse, sh, 2e-2)
		}
	}
}

// TestVarlenTunedDefaultsOnCPU runs flash_fwd_varlen as the Go API compiles
// it for sm_90a (Options.Target.Arch: its tuned set, 128×128 tiles with
// loads bounded by the packed tensor) on the CPU device against the
// float64 reference, at lengths whose tiles run into the next sequence.
// The attributes are checked first: CompileForwardVarlen once dropped the
// arch, so the GPU ran the kernel's untuned 64×64 defaults.
func TestVarlenTunedDefaultsOnCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	const heads, kvHeads = 4, 2
	lensQ := []int{129, 0, 7, 300, 1}
	lensK := []int{127, 5, 7, 257, 130}
	cq, ck := cumsum(lensQ), cumsum(lensK)
	tq, tk := int(cq[len(cq)-1]), int(ck[len(ck)-1])
	for _, d := range []int{64, 128} {
		rng := rand.New(rand.NewPCG(uint64(d), 28))
		randn := normals(rng)
		r := roundInputs(fac.Inputs{Q: randn(tq * heads * d), K: randn(tk * kvHeads * d), V: randn(tk * kvHeads * d)}, "bf16")
		for _, c := range varlenSparseCases {
			if c.expr != "causal" && c.expr != "document" {
				continue
			}
			fwd, err := fac.CompileForwardVarlen(fac.Options{Mask: c.expr, DType: "bf16", Target: codegen.TargetConfig{Arch: "sm_90a"}, Sources: map[string]string{"varlen_mods.fa": varlenMods}}, d)
			if err != nil {
				t.Fatal(err)
			}
			a := fwd.Result().Attrs()
			if a["BLOCK_M"] != 128 || a["BLOCK_N"] != 128 || a["num_warps"] != 8 || a["packed_loads"] != 1 {
				t.Fatalf("d%d %s: BLOCK_M %d, BLOCK_N %d, num_warps %d, packed_loads %d; want the tuned 128, 128, 8, 1",
					d, c.expr, a["BLOCK_M"], a["BLOCK_N"], a["num_warps"], a["packed_loads"])
			}
			in := fac.VarlenInputs{Q: r.Q, K: r.K, V: r.V, CuSeqlensQ: cq, CuSeqlensK: ck, Scalars: c.scalars}
			if len(fwd.AuxTensors()) > 0 {
				in.Aux = map[string]any{"doc": varlenDoc(300)}
			}
			o, lse, err := fwd.RunCPU(in, heads, kvHeads)
			if err != nil {
				t.Fatal(err)
			}
			ro, rlse := varlenReference(in, heads, kvHeads, d, c.fn)
			checkFlat(t, fmt.Sprintf("varlen tuned d%d %s", d, c.expr), o, lse, ro, rlse, 2e-2)
		}
	}
}
