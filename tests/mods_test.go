package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/reference"
)

// modPattern is a pattern that needs the mods' inputs: N-D aux tensors
// with declared shapes, run-time parameters, batch and num_heads, mods
// calling mods that read aux tensors. values makes a call's aux tensors and
// run-time parameters; goMask and goScore are the pattern written again in
// Go over the same values, as the float64 reference sees it.
type modPattern struct {
	name        string
	file        string // in examples/masks; "" for the stdlib alone
	mask, score string
	values      func(sh fac.Shape, rng *rand.Rand) (aux, scalars map[string]any)
	goMask      func(sh fac.Shape, aux, scalars map[string]any) reference.MaskFunc
	goScore     func(sh fac.Shape, aux, scalars map[string]any) reference.ScoreFunc
}

// docsPerBatch gives batch entry b documents of 17 + 11·b tokens, as a
// [batch, seqlen_k] int64 array (NumPy's default integer type).
func docsPerBatch(sh fac.Shape) fac.Array {
	ids := make([]int64, sh.Batch*sh.SeqK)
	for b := range sh.Batch {
		for i := range sh.SeqK {
			ids[b*sh.SeqK+i] = int64(i / (17 + 11*b))
		}
	}
	return fac.Array{Shape: []int{sh.Batch, sh.SeqK}, Data: ids}
}

// flatDocs are 1-D document ids of 23 tokens, covering every position.
func flatDocs(sh fac.Shape) []int32 {
	doc := make([]int32, max(sh.SeqQ, sh.SeqK))
	for i := range doc {
		doc[i] = int32(i / 23)
	}
	return doc
}

// at reads xs[i], 0 outside it: what an aux tensor reads out of range.
func at[T any](xs []T, i int) T {
	var zero T
	if i < 0 || i >= len(xs) {
		return zero
	}
	return xs[i]
}

var modPatterns = []modPattern{
	{name: "per-batch document", file: "document_batched.fa", mask: "document_batched",
		values: func(sh fac.Shape, _ *rand.Rand) (map[string]any, map[string]any) {
			return map[string]any{"doc": docsPerBatch(sh)}, nil
		},
		goMask: func(sh fac.Shape, aux, _ map[string]any) reference.MaskFunc {
			ids := aux["doc"].(fac.Array).Data.([]int64)
			doc := func(b, i int) int64 {
				if i >= sh.SeqK {
					return 0 // past the declared [batch, seqlen_k]
				}
				return ids[b*sh.SeqK+i]
			}
			return func(b, h, i, j int) bool { return doc(b, i) == doc(b, j) }
		}},
	{name: "causal and document (stdlib)", mask: "and_masks(causal, document)",
		values: func(sh fac.Shape, _ *rand.Rand) (map[string]any, map[string]any) {
			return map[string]any{"doc": flatDocs(sh)}, nil
		},
		goMask: func(sh fac.Shape, aux, _ map[string]any) reference.MaskFunc {
			doc := aux["doc"].([]int32)
			return func(b, h, i, j int) bool { return j <= i && at(doc, i) == at(doc, j) }
		}},
	{name: "causal and document (a mod calling and_masks)", file: "causal_and_document.fa", mask: "causal_and_document",
		values: func(sh fac.Shape, _ *rand.Rand) (map[string]any, map[string]any) {
			return map[string]any{"doc": flatDocs(sh)}, nil
		},
		goMask: func(sh fac.Shape, aux, _ map[string]any) reference.MaskFunc {
			doc := aux["doc"].([]int32)
			return func(b, h, i, j int) bool { return j <= i && at(doc, i) == at(doc, j) }
		}},
	{name: "or, not and noop", mask: "or_masks(not_mask(causal), and_masks(noop_mask, sliding_window(5, 0)))",
		goMask: func(fac.Shape, map[string]any, map[string]any) reference.MaskFunc {
			return func(b, h, i, j int) bool { return !(i >= j) || (i-5 <= j && j <= i) }
		}},
	{name: "relative position bias", file: "relative_bias.fa", mask: "causal", score: "relative_bias",
		values: func(sh fac.Shape, rng *rand.Rand) (map[string]any, map[string]any) {
			bias := make([]float32, sh.Heads*(sh.SeqQ+sh.SeqK-1))
			for i := range bias {
				bias[i] = float32(rng.NormFloat64())
			}
			return map[string]any{"bias": bias}, nil
		},
		goMask: func(fac.Shape, map[string]any, map[string]any) reference.MaskFunc {
			return func(b, h, i, j int) bool { return i >= j }
		},
		goScore: func(sh fac.Shape, aux, _ map[string]any) reference.ScoreFunc {
			bias := aux["bias"].([]float32)
			w := sh.SeqQ + sh.SeqK - 1
			return func(s float64, b, h, i, j int) float64 { return s + float64(bias[h*w+i-j+sh.SeqK-1]) }
		}},
	{name: "decode offset", file: "decode_offset.fa", mask: "decode_offset",
		values: func(sh fac.Shape, _ *rand.Rand) (map[string]any, map[string]any) {
			return nil, map[string]any{"offset": sh.SeqK - sh.SeqQ}
		},
		goMask: func(_ fac.Shape, _, sc map[string]any) reference.MaskFunc {
			off := sc["offset"].(int)
			return func(b, h, i, j int) bool { return j <= i+off }
		}},
	{name: "decode offset 13", file: "decode_offset.fa", mask: "decode_offset",
		values: func(fac.Shape, *rand.Rand) (map[string]any, map[string]any) {
			return nil, map[string]any{"mask.offset": int64(13)}
		},
		goMask: func(fac.Shape, map[string]any, map[string]any) reference.MaskFunc {
			return func(b, h, i, j int) bool { return j <= i+13 }
		}},
	{name: "head-dependent window", file: "head_window.fa", mask: "head_window(16)",
		goMask: func(sh fac.Shape, _, _ map[string]any) reference.MaskFunc {
			return func(b, h, i, j int) bool { return j <= i && (i-j < 16*(h+1) || h == sh.Heads-1) }
		}},
	{name: "per-head mask", file: "per_head_mask.fa", mask: "per_head_mask",
		values: func(sh fac.Shape, rng *rand.Rand) (map[string]any, map[string]any) {
			// NumPy's bool arrays are bytes: give one as uint8 with its shape.
			m := make([]uint8, sh.Heads*sh.SeqQ*sh.SeqK)
			for i := range m {
				if rng.IntN(3) > 0 {
					m[i] = 1
				}
			}
			return map[string]any{"m": fac.Array{Shape: []int{sh.Heads, sh.SeqQ, sh.SeqK}, Data: m}}, nil
		},
		goMask: func(sh fac.Shape, aux, _ map[string]any) reference.MaskFunc {
			m := aux["m"].(fac.Array).Data.([]uint8)
			return func(b, h, i, j int) bool { return m[(h*sh.SeqQ+i)*sh.SeqK+j] == 1 }
		}},
	{name: "per-batch key padding", file: "key_padding.fa", mask: "key_padding",
		values: func(sh fac.Shape, _ *rand.Rand) (map[string]any, map[string]any) {
			lens := make([]int64, sh.Batch)
			for b := range lens {
				lens[b] = int64(sh.SeqK - 37*b)
			}
			return map[string]any{"lens": lens}, nil
		},
		goMask: func(sh fac.Shape, aux, _ map[string]any) reference.MaskFunc {
			lens := aux["lens"].([]int64)
			return func(b, h, i, j int) bool { return int64(j) < lens[b] }
		}},
	{name: "run-time temperature", file: "temperature.fa", mask: "causal", score: "temperature",
		values: func(fac.Shape, *rand.Rand) (map[string]any, map[string]any) {
			return nil, map[string]any{"temp": 0.7}
		},
		goMask: func(fac.Shape, map[string]any, map[string]any) reference.MaskFunc {
			return func(b, h, i, j int) bool { return i >= j }
		},
		goScore: func(fac.Shape, map[string]any, map[string]any) reference.ScoreFunc {
			temp := float64(float32(0.7))
			return func(s float64, b, h, i, j int) float64 { return s / temp }
		}},
}

func compilePattern(t *testing.T, p modPattern) *fac.Forward {
	t.Helper()
	return compilePatternAs(t, p, "f32", dim)
}

// compilePatternAs compiles a pattern's forward kernel for a dtype and head
// dim, with the pattern's example file as the only user source.
func compilePatternAs(t *testing.T, p modPattern, dtype string, d int) *fac.Forward {
	t.Helper()
	var srcs map[string]string
	if p.file != "" {
		src, err := os.ReadFile(filepath.Join("..", "examples", "masks", p.file))
		if err != nil {
			t.Fatal(err)
		}
		srcs = map[string]string{p.file: string(src)}
	}
	fwd, err := fac.CompileForward(fac.Options{Mask: p.mask, Score: p.score, Sources: srcs, DType: dtype}, d)
	if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	return fwd
}

// TestModPatterns runs each pattern on the CPU device and with
// Forward.Reference (the mods evaluated element by element) against the
// float64 reference with the pattern written in Go: batch 2, 4 query heads
// over 2 kv heads, tile-unaligned and unequal sequence lengths. One compiled
// kernel serves every shape and every value of the run-time parameters.
func TestModPatterns(t *testing.T) {
	for pi, p := range modPatterns {
		t.Run(p.name, func(t *testing.T) {
			fwd := compilePattern(t, p)
			for li, sl := range [][2]int{{150, 150}, {70, 150}, {150, 97}} {
				sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: sl[0], SeqK: sl[1], Dim: dim}
				in := inputs(sh, uint64(10*pi+li))
				in.Aux = nil
				var aux, scalars map[string]any
				if p.values != nil {
					aux, scalars = p.values(sh, rand.New(rand.NewPCG(uint64(pi), uint64(li))))
				}
				in.Aux, in.Scalars = aux, scalars
				o, lse, err := fwd.RunCPU(in, sh)
				if err != nil {
					t.Fatalf("%v: %v", sl, err)
				}
				var mf reference.MaskFunc
				var sf reference.ScoreFunc
				if p.goMask != nil {
					mf = p.goMask(sh, aux, scalars)
				}
				if p.goScore != nil {
					sf = p.goScore(sh, aux, scalars)
				}
				q, k, v := to64(in.Q), to64(in.K), to64(in.V)
				scale := float64(float32(1 / math.Sqrt(float64(sh.Dim))))
				ro, rlse := reference.Attention(q, k, v, reference.Shape{B: sh.Batch, H: sh.Heads, HKV: sh.KVHeads, Sq: sh.SeqQ, Sk: sh.SeqK, D: sh.Dim}, scale, mf, sf)
				check(t, fmt.Sprintf("%s %v on the CPU device", p.name, sl), o, lse, ro, rlse, sh, 1e-5)
				// Forward.Reference evaluates the same mods in the interpreter.
				fo, flse, err := fwd.Reference(in, sh)
				if err != nil {
					t.Fatalf("%v: Reference: %v", sl, err)
				}
				check(t, fmt.Sprintf("%s %v by Forward.Reference", p.name, sl), to32(fo), to32(flse), ro, rlse, sh, 1e-5)
			}
		})
	}
}

func to32(xs []float64) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = float32(x)
	}
	return out
}

// TestModInputErrors checks that a call's aux tensors and run-time
// parameters are checked against the mods' declarations before anything
// runs, with errors that name the mod, the tensor and the dimension.
func TestModInputErrors(t *testing.T) {
	byName := map[string]modPattern{}
	for _, p := range modPatterns {
		byName[p.file] = p
	}
	sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 40, SeqK: 40, Dim: dim}
	in := inputs(sh, 1)
	cases := []struct {
		file    string
		aux     map[string]any
		scalars map[string]any
		want    string
	}{
		{"document_batched.fa", map[string]any{"doc": fac.Array{Shape: []int{3, 40}, Data: make([]int32, 120)}}, nil,
			"mask document_batched: aux tensor doc (tensor[i32][batch, seqlen_k]) has 3 rows (dimension 0, batch), the call has batch 2"},
		{"document_batched.fa", map[string]any{"doc": fac.Array{Shape: []int{2, 39}, Data: make([]int32, 78)}}, nil,
			"aux tensor doc (tensor[i32][batch, seqlen_k]) has 39 columns (dimension 1, seqlen_k), the call has seqlen_k 40"},
		{"document_batched.fa", map[string]any{"doc": make([]int32, 40)}, nil,
			"aux tensor doc (tensor[i32][batch, seqlen_k]) has 40 elements; for this call it is [2 40], 80 elements"},
		{"document_batched.fa", map[string]any{"doc": fac.Array{Shape: []int{2, 40}, Data: make([]int32, 79)}}, nil,
			"shape [2 40] has 80 elements, its data 79"},
		{"document_batched.fa", map[string]any{"doc": []float32{1.5}}, nil, "element 0 is 1.5, not an integer"},
		{"relative_bias.fa", map[string]any{"bias": make([]float32, 4*78)}, nil,
			"score relative_bias: aux tensor bias (tensor[f32][num_heads, seqlen_q + seqlen_k - 1]) has 312 elements; for this call it is [4 79], 316 elements"},
		{"per_head_mask.fa", map[string]any{"m": fac.Array{Shape: []int{4, 40, 40}, Data: append(make([]int32, 6399), 2)}}, nil,
			"element 6399 is 2; a bool tensor takes 0 or 1"},
		{"key_padding.fa", map[string]any{"lens": []int64{1 << 40, 3}}, nil, "element 0 is 1099511627776, outside i32"},
		{"decode_offset.fa", nil, nil, `missing run-time parameter "offset" (parameter mask.offset)`},
		{"decode_offset.fa", nil, map[string]any{"offset": 1.5}, "run-time parameter offset (i32) takes an integer, got float64"},
		{"decode_offset.fa", nil, map[string]any{"offset": 1, "window": 3}, `run-time parameter "window" is not read by the mods (they read: offset)`},
	}
	for _, c := range cases {
		p := byName[c.file]
		fwd := compilePattern(t, p)
		in.Aux, in.Scalars = c.aux, c.scalars
		_, _, err := fwd.RunCPU(in, sh)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with %v %v: got %v, want %q", c.file, c.aux, c.scalars, err, c.want)
		}
		if _, _, err := fwd.Reference(in, sh); err == nil {
			t.Errorf("%s with %v %v: Reference accepts it", c.file, c.aux, c.scalars)
		}
	}
}

// TestRuntimeScalarBlockMask checks that a mask's run-time parameters reach
// the block-mask builders: the analytic one takes them as constants (and
// is exact), the evaluated one as arguments.
func TestRuntimeScalarBlockMask(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "examples", "masks", "decode_offset.fa"))
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int{-40, 0, 63, 64, 200} {
		o := fac.BlockMaskOptions{Mask: "decode_offset", Sources: map[string]string{"decode_offset.fa": string(src)},
			SeqQ: 300, SeqK: 500, BlockQ: 64, BlockK: 64, Scalars: map[string]any{"offset": off}}
		bm, method, err := fac.CreateBlockMask(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		if method.String() != "analytic" {
			t.Errorf("offset %d: built by %s, want analytic", off, method)
		}
		for qb := range bm.NumQ {
			for kb := range bm.NumK {
				// The block's keys run from kb*64, its queries to qb*64+63.
				full := min(kb*64+63, 499) <= qb*64+off
				empty := kb*64 > min(qb*64+63, 299)+off
				want := "partial"
				switch {
				case full:
					want = "full"
				case empty:
					want = "empty"
				}
				if got := bm.Class(0, 0, qb, kb).String(); got != want {
					t.Fatalf("offset %d: block (%d, %d) is %s, want %s", off, qb, kb, got, want)
				}
			}
		}
	}
}
