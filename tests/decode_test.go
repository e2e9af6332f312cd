package tests

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/reference"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// decodeSrc holds the decoding tests' own mods: a window per head read
// from an aux tensor (so the block mask depends on h and PackGQA takes the
// union of a group's lists), a score with a per-head bias table, a mask
// that keeps nothing on even query rows, and causal attention at a
// run-time offset.
const decodeSrc = `
mask head_lookback(b, h, q_idx, kv_idx, win: tensor[i32]) {
    let qk = q_idx + seqlen_k - seqlen_q
    return kv_idx <= qk && qk - kv_idx < win[h]
}
score head_bias(s, b, h, q_idx, kv_idx, bias: tensor[f32]) {
    return s + bias[h] * f32(kv_idx % 7)
}
mask odd_rows(b, h, q_idx, kv_idx) {
    return q_idx % 2 == 1 && kv_idx <= q_idx + seqlen_k - seqlen_q
}
mask offset_causal(b, h, q_idx, kv_idx, offset: i32) {
    return kv_idx <= q_idx + offset
}
`

// decodeCase is one mask/score of the decoding suite with the aux tensors
// and run-time parameters its mods read, and the mods in Go for the
// reference.
type decodeCase struct {
	mask, score string
	aux         func(sh fac.Shape) map[string]any
	scalars     map[string]any
	fn          goMask
	sfn         goScore
}

func maskFn(expr string) goMask {
	for _, m := range masks {
		if m.expr == expr {
			return m.fn
		}
	}
	panic("no Go mask " + expr)
}

var decodeCases = []decodeCase{
	{mask: "none"},
	{mask: "causal", fn: maskFn("causal")},
	{mask: "causal_bottom_right", fn: maskFn("causal_bottom_right")},
	{mask: "sliding_window(40, 0)", fn: func(fac.Shape, map[string]any) reference.MaskFunc {
		return func(b, h, i, j int) bool { return i-40 <= j && j <= i }
	}},
	{mask: "document", fn: maskFn("document"), aux: func(sh fac.Shape) map[string]any {
		doc := make([]int32, max(sh.SeqQ, sh.SeqK))
		for i := range doc {
			doc[i] = int32(i / 150)
		}
		return map[string]any{"doc": doc}
	}},
	{mask: "head_lookback", score: "head_bias", aux: func(sh fac.Shape) map[string]any {
		win := make([]int32, sh.Heads)
		bias := make([]float32, sh.Heads)
		for h := range win {
			win[h] = int32(1 + 97*h)
			bias[h] = float32(h%3) * 0.25
		}
		win[sh.Heads-1] = 1 << 20
		return map[string]any{"win": win, "bias": bias}
	}, fn: func(sh fac.Shape, aux map[string]any) reference.MaskFunc {
		win := aux["win"].([]int32)
		return func(b, h, i, j int) bool { qk := i + sh.SeqK - sh.SeqQ; return j <= qk && qk-j < int(win[h]) }
	}, sfn: func(_ fac.Shape, aux map[string]any) reference.ScoreFunc {
		bias := aux["bias"].([]float32)
		return func(s float64, b, h, i, j int) float64 { return s + float64(bias[h])*float64(j%7) }
	}},
	{mask: "odd_rows", fn: func(sh fac.Shape, _ map[string]any) reference.MaskFunc {
		return func(b, h, i, j int) bool { return i%2 == 1 && j <= i+sh.SeqK-sh.SeqQ }
	}},
	{mask: "offset_causal", score: "alibi", scalars: map[string]any{"offset": 333}, aux: func(sh fac.Shape) map[string]any {
		return map[string]any{"slopes": inputs(sh, 0).Aux["slopes"]}
	}, fn: func(fac.Shape, map[string]any) reference.MaskFunc {
		return func(b, h, i, j int) bool { return j <= i+333 }
	}, sfn: func(_ fac.Shape, aux map[string]any) reference.ScoreFunc {
		sl := aux["slopes"].([]float32)
		return func(s float64, b, h, i, j int) float64 { return s + float64(sl[h])*float64(j-i) }
	}},
}

// decodeForwards keeps the kernels of the decoding tests, compiled once
// per mods and options.
var decodeForwards = map[string]*fac.Forward{}

func decodeForward(t *testing.T, c decodeCase, opts fac.Options, d int) *fac.Forward {
	t.Helper()
	opts.Mask, opts.Score, opts.Sources = c.mask, c.score, map[string]string{"decode.fa": decodeSrc}
	key := fmt.Sprintf("%s|%s|%d|%v|%s|%d|%v", c.mask, c.score, opts.NumSplits, opts.PackGQA, opts.DType, d, opts.DecodeConsts)
	if f, ok := decodeForwards[key]; ok {
		return f
	}
	f, err := fac.CompileForward(opts, d)
	if err != nil {
		t.Fatal(err)
	}
	decodeForwards[key] = f
	return f
}

// decodeInputs are random inputs for sh with c's aux tensors and run-time
// parameters.
func decodeInputs(c decodeCase, sh fac.Shape, seed uint64) fac.Inputs {
	in := inputs(sh, seed)
	in.Aux = nil
	if c.aux != nil {
		in.Aux = c.aux(sh)
	}
	in.Scalars = c.scalars
	return in
}

// decodeRun runs one shape with c under opts on the CPU and checks it
// against ref (the float64 reference, computed when nil); it returns the
// plan, O, LSE and the reference.
func decodeRun(t *testing.T, c decodeCase, opts fac.Options, sh fac.Shape, seed uint64, ref *[2][]float64) (fac.DecodePlan, []float32, []float32) {
	t.Helper()
	fwd := decodeForward(t, c, opts, sh.Dim)
	in := decodeInputs(c, sh, seed)
	plan, err := fwd.Plan(sh, 0)
	if err != nil {
		t.Fatal(err)
	}
	o, lse, err := fwd.RunCPU(in, sh)
	if err != nil {
		t.Fatalf("%s %+v %v: %v", c.mask, sh, plan, err)
	}
	if ref == nil {
		ref = new([2][]float64)
	}
	if ref[0] == nil {
		ref[0], ref[1] = goReference(in, sh, c.fn, c.sfn)
	}
	name := fmt.Sprintf("%s/%s/H=%d,Hkv=%d,Sq=%d,Sk=%d/splits=%d,pack=%d", c.mask, c.score, sh.Heads, sh.KVHeads, sh.SeqQ, sh.SeqK, plan.NumSplits, plan.Pack)
	check(t, name, o, lse, ref[0], ref[1], sh, 1e-5)
	return plan, o, lse
}

// TestDecodeMatchesReference runs split-KV and PackGQA on the CPU device
// against the float64 reference and against flash_fwd alone: every mask of
// decodeCases (causal, windows, documents, a per-head mask and score from
// aux tensors, a run-time parameter, rows that keep nothing) × GQA ratios
// 1, 4 and 8 × Sq ∈ {1, 7, 16, 64}, with 1, 2, 3 and auto splits in turn.
func TestDecodeMatchesReference(t *testing.T) {
	seqQs := []int{1, 7, 16, 64}
	kvHeads := []int{8, 2, 1}
	splits := []int{1, 2, 3, 0}
	split, packed, empty := 0, 0, 0
	i := 0
	for ci, c := range decodeCases {
		for gi, hkv := range kvHeads {
			for qi, sq := range seqQs {
				i++
				sk := []int{300, 1100, 2100}[(ci+gi+qi)%3]
				if sq == 64 {
					if hkv != 2 {
						continue // the long query once per mask is enough
					}
					sk = 700
				}
				sh := fac.Shape{Batch: 2, Heads: 8, KVHeads: hkv, SeqQ: sq, SeqK: sk, Dim: dim}
				var ref [2][]float64
				opts := fac.Options{NumSplits: splits[i%len(splits)]}
				plan, o, lse := decodeRun(t, c, opts, sh, uint64(i), &ref)
				if !plan.SplitKV && sq <= 16 && hkv < 8 {
					t.Errorf("%s %+v: auto PackGQA did not pack: %v", c.mask, sh, plan)
				}
				if plan.NumSplits > 1 {
					split++
				}
				if plan.Pack > 1 {
					packed++
				}
				for _, x := range lse {
					if math.IsInf(float64(x), -1) {
						empty++
					}
				}
				// flash_fwd alone gives the same result up to rounding.
				opts = fac.Options{NumSplits: 1, PackGQA: fac.PackGQAOff}
				flat, fo, flse := decodeRun(t, c, opts, sh, uint64(i), &ref)
				if flat.SplitKV {
					t.Fatalf("NumSplits 1, PackGQA off: plan %v", flat)
				}
				for j := range o {
					if d := math.Abs(float64(o[j] - fo[j])); d > 1e-5 {
						t.Fatalf("%s %+v: O[%d] = %v with %v, %v with flash_fwd", c.mask, sh, j, o[j], plan, fo[j])
					}
				}
				for j := range lse {
					if lse[j] != flse[j] && math.Abs(float64(lse[j]-flse[j])) > 1e-5*math.Max(1, math.Abs(float64(lse[j]))) {
						t.Fatalf("%s %+v: LSE[%d] = %v with %v, %v with flash_fwd", c.mask, sh, j, lse[j], plan, flse[j])
					}
				}
			}
		}
	}
	if split == 0 || packed == 0 || empty == 0 {
		t.Errorf("untested: %d split runs, %d packed runs, %d empty rows", split, packed, empty)
	}
}

// TestDecodeEmptySplits gives more splits than a row has kernel tiles (a
// window of 40 keys visits one or two 128-key tiles, and 200 keys are two
// tiles): the splits left without blocks write LSE = -inf and must not
// disturb the combine.
func TestDecodeEmptySplits(t *testing.T) {
	for _, c := range []decodeCase{decodeCases[3], decodeCases[0], decodeCases[6]} {
		for _, n := range []int{3, 7, fac.MaxSplits} {
			sh := fac.Shape{Batch: 1, Heads: 4, KVHeads: 1, SeqQ: 5, SeqK: 200, Dim: dim}
			plan, _, _ := decodeRun(t, c, fac.Options{NumSplits: n}, sh, uint64(n), nil)
			if plan.NumSplits != n || plan.Pack != 4 {
				t.Errorf("plan %v, want %d splits packing 4 heads", plan, n)
			}
		}
	}
}

// TestDecodeFusedCombine runs split-KV merged in place (DecodeConsts
// fused_combine: the last program of each q tile merges its splits, no
// flash_fwd_combine) on the CPU device against split + combine and the
// float64 reference: Sq 1, 5, 7 and 16, GQA packed 4 and 8 heads to a
// tile and unpacked, 1 to 8 splits and auto, a window that leaves splits
// empty, rows that keep nothing, a per-head mask and score. Each call runs
// twice: the second gives the same bits.
func TestDecodeFusedCombine(t *testing.T) {
	fused := map[string]string{"fused_combine": "true"}
	for i, tc := range []struct {
		c      decodeCase
		sh     fac.Shape
		splits int
	}{
		{decodeCases[0], fac.Shape{Batch: 2, Heads: 8, KVHeads: 2, SeqQ: 1, SeqK: 1100, Dim: dim}, 1},
		{decodeCases[0], fac.Shape{Batch: 2, Heads: 8, KVHeads: 2, SeqQ: 1, SeqK: 2100, Dim: dim}, 0},
		{decodeCases[2], fac.Shape{Batch: 2, Heads: 8, KVHeads: 2, SeqQ: 16, SeqK: 2100, Dim: dim}, 3},
		{decodeCases[3], fac.Shape{Batch: 1, Heads: 4, KVHeads: 1, SeqQ: 5, SeqK: 200, Dim: dim}, 8},
		{decodeCases[6], fac.Shape{Batch: 2, Heads: 8, KVHeads: 8, SeqQ: 7, SeqK: 700, Dim: dim}, 2},
		{decodeCases[5], fac.Shape{Batch: 1, Heads: 8, KVHeads: 1, SeqQ: 1, SeqK: 900, Dim: dim}, 5},
	} {
		var ref [2][]float64
		plan, o, lse := decodeRun(t, tc.c, fac.Options{NumSplits: tc.splits, DecodeConsts: fused}, tc.sh, uint64(i), &ref)
		if !plan.FusedCombine || !slices.Equal(plan.Kernels(), []string{"flash_fwd_splitkv"}) || !strings.Contains(plan.String(), "merging in place") {
			t.Fatalf("%s %+v: plan %v (%v), want flash_fwd_splitkv merging in place", tc.c.mask, tc.sh, plan, plan.Kernels())
		}
		if tc.splits > 0 && plan.NumSplits != tc.splits {
			t.Errorf("%+v: plan %v, want %d splits", tc.sh, plan, tc.splits)
		}
		_, o2, lse2 := decodeRun(t, tc.c, fac.Options{NumSplits: tc.splits, DecodeConsts: fused}, tc.sh, uint64(i), &ref)
		if !slices.Equal(o, o2) || !slices.Equal(lse, lse2) {
			t.Errorf("%s %+v: a second fused run differs", tc.c.mask, tc.sh)
		}
		split, so, slse := decodeRun(t, tc.c, fac.Options{NumSplits: tc.splits}, tc.sh, uint64(i), &ref)
		if split.FusedCombine || split.NumSplits != plan.NumSplits || split.Pack != plan.Pack {
			t.Fatalf("%+v: plan %v without fused_combine, %v with", tc.sh, split, plan)
		}
		for j := range o {
			if d := math.Abs(float64(o[j] - so[j])); d > 1e-5 {
				t.Fatalf("%s %+v: O[%d] = %v fused, %v with flash_fwd_combine", tc.c.mask, tc.sh, j, o[j], so[j])
			}
		}
		for j := range lse {
			if lse[j] != slse[j] && math.Abs(float64(lse[j]-slse[j])) > 1e-5*math.Max(1, math.Abs(float64(lse[j]))) {
				t.Fatalf("%s %+v: LSE[%d] = %v fused, %v with flash_fwd_combine", tc.c.mask, tc.sh, j, lse[j], slse[j])
			}
		}
	}
	// Sinks keep flash_fwd_combine_sinks.
	if _, err := fac.CompileForward(fac.Options{Sinks: true, DecodeConsts: fused}, dim); err == nil || !strings.Contains(err.Error(), "sinks") {
		t.Errorf("fused_combine with sinks: error %v, want one about sinks", err)
	}
}

// TestDecodePackOn packs with PackGQA on where auto would not (Sq > 64,
// and Heads = KVHeads, where the split kernel runs one head per tile), and
// with a given block mask of one head per query head (made for a mask that
// reads h), which the packed kernel reads as the union over each group.
func TestDecodePackOn(t *testing.T) {
	c := decodeCases[5] // head_lookback: the block mask depends on h
	for _, sh := range []fac.Shape{
		{Batch: 1, Heads: 8, KVHeads: 2, SeqQ: 100, SeqK: 700, Dim: dim},
		{Batch: 2, Heads: 3, KVHeads: 3, SeqQ: 9, SeqK: 500, Dim: dim},
	} {
		plan, _, _ := decodeRun(t, c, fac.Options{PackGQA: fac.PackGQAOn, NumSplits: 2}, sh, 5, nil)
		if !plan.SplitKV || plan.Pack != sh.Heads/sh.KVHeads {
			t.Errorf("%+v: plan %v", sh, plan)
		}
	}
	// A block mask given by the caller, per head.
	sh := fac.Shape{Batch: 2, Heads: 8, KVHeads: 2, SeqQ: 3, SeqK: 900, Dim: dim}
	fwd, err := fac.CompileForward(fac.Options{Mask: c.mask, Score: c.score, Sources: map[string]string{"decode.fa": decodeSrc}, NumSplits: 3}, dim)
	if err != nil {
		t.Fatal(err)
	}
	in := inputs(sh, 9)
	in.Aux = c.aux(sh)
	bm, _, err := fwd.BuildBlockMask(sh, in.Aux)
	if err != nil {
		t.Fatal(err)
	}
	if bm.H != sh.Heads {
		t.Fatalf("block mask has %d heads, want one per query head", bm.H)
	}
	in.BlockMask = bm
	o, lse, err := fwd.RunCPU(in, sh)
	if err != nil {
		t.Fatal(err)
	}
	ro, rlse, err := fwd.Reference(in, sh)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "given per-head block mask, packed", o, lse, ro, rlse, sh, 1e-5)
}

// TestDecodeBF16 runs the decoding path at bf16, head dim 64, with the
// dtype's tolerance.
func TestDecodeBF16(t *testing.T) {
	sh := fac.Shape{Batch: 2, Heads: 8, KVHeads: 2, SeqQ: 1, SeqK: 2000, Dim: 64}
	for _, c := range []decodeCase{decodeCases[0], decodeCases[4]} {
		fwd, err := fac.CompileForward(fac.Options{Mask: c.mask, DType: "bf16"}, sh.Dim)
		if err != nil {
			t.Fatal(err)
		}
		in := inputs(sh, 3)
		in.Aux = nil
		if c.aux != nil {
			in.Aux = c.aux(sh)
		}
		plan, err := fwd.Plan(sh, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.SplitKV || plan.NumSplits < 2 || plan.Pack != 4 || plan.BlockM != 16 {
			t.Errorf("plan %v: want split and packed, BLOCK_M 16", plan)
		}
		o, lse, err := fwd.RunCPU(in, sh)
		if err != nil {
			t.Fatal(err)
		}
		ro, rlse, err := fwd.Reference(in, sh)
		if err != nil {
			t.Fatal(err)
		}
		check(t, "bf16/"+c.mask, o, lse, ro, rlse, sh, 2e-2)
	}
}

// TestDecodePlan checks the choices: the decode anchors split 4 ways with
// the group packed into a 16-row tile (Sq = 1) or a 64-row one (Sq = 16);
// a prefill-sized grid is not split; long queries are not packed; the
// overrides and their errors.
func TestDecodePlan(t *testing.T) {
	fwd, err := fac.CompileForward(fac.Options{DType: "bf16"}, 128)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sh                    fac.Shape
		split                 bool
		splits, pack, bm, qpt int
	}{
		{fac.Shape{Batch: 8, Heads: 32, KVHeads: 8, SeqQ: 1, SeqK: 8192, Dim: 128}, true, 4, 4, 16, 4},
		{fac.Shape{Batch: 8, Heads: 32, KVHeads: 8, SeqQ: 1, SeqK: 32768, Dim: 128}, true, 4, 4, 16, 4},
		{fac.Shape{Batch: 8, Heads: 32, KVHeads: 8, SeqQ: 16, SeqK: 8192, Dim: 128}, true, 4, 4, 64, 16},
		{fac.Shape{Batch: 1, Heads: 32, KVHeads: 8, SeqQ: 1, SeqK: 131072, Dim: 128}, true, 29, 4, 16, 4},
		{fac.Shape{Batch: 2, Heads: 16, KVHeads: 16, SeqQ: 8192, SeqK: 8192, Dim: 128}, false, 1, 1, 0, 0},
		{fac.Shape{Batch: 1, Heads: 8, KVHeads: 8, SeqQ: 1, SeqK: 300, Dim: 128}, false, 1, 1, 0, 0},
		{fac.Shape{Batch: 1, Heads: 8, KVHeads: 2, SeqQ: 500, SeqK: 65536, Dim: 128}, true, 4, 1, 64, 64},
	} {
		p, err := fwd.Plan(c.sh, 132)
		if err != nil {
			t.Fatal(err)
		}
		if p.SplitKV != c.split || p.NumSplits != c.splits || p.Pack != c.pack || p.BlockM != c.bm || p.QPerTile != c.qpt {
			t.Errorf("%+v: plan %+v, want split %v, %d splits, pack %d, BLOCK_M %d, %d per tile", c.sh, p, c.split, c.splits, c.pack, c.bm, c.qpt)
		}
	}
	sh := fac.Shape{Batch: 8, Heads: 32, KVHeads: 8, SeqQ: 1, SeqK: 8192, Dim: 128}
	for _, o := range []struct {
		opts fac.Options
		want string
	}{
		{fac.Options{DType: "bf16", NumSplits: fac.MaxSplits + 1}, "NumSplits"},
		{fac.Options{DType: "bf16", DecodeConsts: map[string]string{"BLOCK_N": "96"}}, "BLOCK_N"},
	} {
		f, err := fac.CompileForward(o.opts, 128)
		if err != nil {
			// Options out of range are refused up front (issue 46 item 11).
			if !strings.Contains(err.Error(), o.want) {
				t.Errorf("%+v: compile error %v, want one about %s", o.opts, err, o.want)
			}
			continue
		}
		if _, err := f.Plan(sh, 0); err == nil || !strings.Contains(err.Error(), o.want) {
			t.Errorf("%+v: error %v, want one about %s", o.opts, err, o.want)
		}
	}
	// Sinks decode as flash_fwd does, merged by flash_fwd_combine_sinks,
	// whether the choices are automatic or asked for.
	for _, o := range []fac.Options{{DType: "bf16", Sinks: true}, {DType: "bf16", Sinks: true, NumSplits: 2}, {DType: "bf16", Sinks: true, PackGQA: fac.PackGQAOn}} {
		f, err := fac.CompileForward(o, 128)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := f.Plan(sh, 0); err != nil || !p.SplitKV || !slices.Equal(p.Kernels(), []string{"flash_fwd_splitkv", "flash_fwd_combine_sinks"}) {
			t.Errorf("sinks %+v: plan %v (%v), %v", o, p, p.Kernels(), err)
		}
	}
	for _, s := range []string{"auto", "on", "off"} {
		if p, err := fac.ParsePackGQA(s); err != nil || p.String() != s {
			t.Errorf("ParsePackGQA(%q) = %v, %v", s, p, err)
		}
	}
	if _, err := fac.ParsePackGQA("maybe"); err == nil {
		t.Error("ParsePackGQA(maybe): no error")
	}
	for s, want := range map[string]int{"auto": 0, "1": 1, "64": 64} {
		if n, err := fac.ParseNumSplits(s); err != nil || n != want {
			t.Errorf("ParseNumSplits(%q) = %d, %v", s, n, err)
		}
	}
	// "0" too (issue 46 item 15): the help says "auto, or 1 (off) to 64".
	for _, s := range []string{"-1", "65", "x", "0"} {
		if _, err := fac.ParseNumSplits(s); err == nil {
			t.Errorf("ParseNumSplits(%q): no error", s)
		}
	}
}

// TestCombineEdgeCases runs flash_fwd_combine alone on partial results made
// by hand: a row whose splits are all -inf (O = 0, LSE = -inf, no NaN),
// rows with some -inf splits, one split, splits of very different LSE.
func TestCombineEdgeCases(t *testing.T) {
	res, err := compiler.Compile(compiler.Request{Kernel: attention.FlashFwdCombine.Kernel, Consts: map[string]string{"HEAD_DIM": "8"}})
	if err != nil {
		t.Fatal(err)
	}
	inf := math.Inf(-1)
	for _, c := range []struct {
		lse [][]float64 // [row][split]
	}{
		{[][]float64{{inf, inf, inf}, {0.5, inf, 2}, {inf, inf, -3}, {1, 1, 1}, {80, -80, 0}}},
		{[][]float64{{inf}, {3}}},
	} {
		rows, splits, d := len(c.lse), len(c.lse[0]), 8
		sh := launch.Shape{Batch: 1, Heads: 1, SeqQ: rows, SeqK: 1, Dim: d}
		p := launch.Problem{Shape: sh, Attrs: res.Attrs(), NumSplits: splits}
		call, err := attention.FlashFwdCombine.Bind(res.Params(), launch.Request{Problem: p})
		if err != nil {
			t.Fatal(err)
		}
		lsePart := make([]float64, splits*rows)
		oPart := make([]float64, splits*rows*d)
		for r := range rows {
			for s := range splits {
				lsePart[s*rows+r] = c.lse[r][s]
				for j := range d {
					if !math.IsInf(c.lse[r][s], -1) {
						oPart[(s*rows+r)*d+j] = float64(s+1) + float64(j)/8
					}
				}
			}
		}
		out, err := cpu.Run(context.Background(), res.Module, call, map[string]any{"o_partial": oPart, "lse_partial": lsePart})
		if err != nil {
			t.Fatal(err)
		}
		o, lse := out["o"].F32(), out["lse"].F32()
		for r := range rows {
			m := inf
			for _, x := range c.lse[r] {
				m = math.Max(m, x)
			}
			if math.IsInf(m, -1) {
				if !math.IsInf(float64(lse[r]), -1) {
					t.Errorf("row %d: all splits -inf, LSE = %v", r, lse[r])
				}
				for j := range d {
					if o[r*d+j] != 0 {
						t.Errorf("row %d: all splits -inf, O[%d] = %v, want 0", r, j, o[r*d+j])
					}
				}
				continue
			}
			sum := 0.0
			for _, x := range c.lse[r] {
				sum += math.Exp(x - m)
			}
			want := m + math.Log(sum)
			if math.Abs(float64(lse[r])-want) > 1e-5*math.Max(1, math.Abs(want)) {
				t.Errorf("row %d: LSE %v, want %v", r, lse[r], want)
			}
			for j := range d {
				w := 0.0
				for s, x := range c.lse[r] {
					if !math.IsInf(x, -1) {
						w += math.Exp(x-want) * (float64(s+1) + float64(j)/8)
					}
				}
				if got := float64(o[r*d+j]); math.IsNaN(got) || math.Abs(got-w) > 1e-5*math.Max(1, math.Abs(w)) {
					t.Errorf("row %d: O[%d] = %v, want %v", r, j, got, w)
				}
			}
		}
	}
}

// f64s widens xs.
func f64s(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}
