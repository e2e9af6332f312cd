package tests

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/reference"
)

// example is one file of examples/masks with the mod to run and the same
// pattern written separately in Go, as the float64 reference sees it.
type example struct {
	file, mask, score string
	goMask            func(b, h, i, j int) bool
	goScore           func(s float64, b, h, i, j int) float64
	aux               func(sh fac.Shape) map[string]any
}

func docIDs(sh fac.Shape) map[string]any {
	doc := make([]int32, max(sh.SeqQ, sh.SeqK))
	for i := range doc {
		doc[i] = int32(i / 29)
	}
	return map[string]any{"doc": doc}
}

func slopes(sh fac.Shape) map[string]any {
	sl := make([]float32, sh.Heads)
	for h := range sl {
		sl[h] = float32(math.Exp2(-8 * float64(h+1) / float64(sh.Heads)))
	}
	return map[string]any{"slopes": sl}
}

func iabs(x int) int { return max(x, -x) }

var examples = []example{
	{file: "causal.fa", mask: "causal_attention", goMask: func(b, h, i, j int) bool { return i >= j }},
	{file: "sliding_window.fa", mask: "sliding_window_attention(40)", goMask: func(b, h, i, j int) bool { return i >= j && i-j < 40 }},
	{file: "prefix_lm.fa", mask: "prefix_lm_attention(30)", goMask: func(b, h, i, j int) bool { return j < 30 || i >= j }},
	{file: "document.fa", mask: "document_attention", aux: docIDs, goMask: func(b, h, i, j int) bool { return i/29 == j/29 }},
	{file: "causal_document.fa", mask: "causal_document", aux: docIDs, goMask: func(b, h, i, j int) bool { return i/29 == j/29 && j <= i }},
	{file: "natten.fa", mask: "natten(width=12, radius=2)", goMask: func(b, h, i, j int) bool {
		return iabs(i/12-j/12) <= 2 && iabs(i%12-j%12) <= 2
	}},
	{file: "dilated.fa", mask: "dilated(3)", goMask: func(b, h, i, j int) bool { return j <= i && (i-j)%3 == 0 }},
	{file: "block_diagonal.fa", mask: "block_diagonal(32)", goMask: func(b, h, i, j int) bool { return i/32 == j/32 }},
	{file: "head_strided.fa", mask: "head_strided(window=16, stride=5)", goMask: func(b, h, i, j int) bool {
		if h%2 == 0 {
			return j <= i && i-j < 16
		}
		return j <= i && (i-j)%5 == 0
	}},
	{file: "sink_window.fa", mask: "sink_window(sinks=3, window=20)", goMask: func(b, h, i, j int) bool {
		return (i >= j && i-j < 20) || (j < 3 && j <= i)
	}},
	{file: "alibi.fa", mask: "causal", score: "alibi_bias", aux: slopes, goMask: func(b, h, i, j int) bool { return i >= j }},
	{file: "softcap_causal.fa", score: "softcap_causal(5.0)", goScore: func(s float64, b, h, i, j int) float64 {
		if j > i {
			return math.Inf(-1)
		}
		return 5 * math.Tanh(s/5)
	}},
}

// TestExampleMasks runs every pattern of examples/masks on the CPU device
// against the float64 reference with the pattern written again in Go, at
// tile-unaligned and unequal sequence lengths, with grouped-query heads.
func TestExampleMasks(t *testing.T) {
	for _, ex := range examples {
		src, err := os.ReadFile(filepath.Join("..", "examples", "masks", ex.file))
		if err != nil {
			t.Fatal(err)
		}
		fwd, err := fac.CompileForward(fac.Options{Mask: ex.mask, Score: ex.score, Sources: map[string]string{ex.file: string(src)}}, dim)
		if err != nil {
			t.Fatalf("%s: %v", ex.file, err)
		}
		for li, sl := range [][2]int{{150, 150}, {70, 150}, {150, 97}} {
			sh := fac.Shape{Batch: 1, Heads: 4, KVHeads: 2, SeqQ: sl[0], SeqK: sl[1], Dim: dim}
			in := inputs(sh, uint64(li+1))
			in.Aux = map[string]any{}
			if ex.aux != nil {
				in.Aux = ex.aux(sh)
			}
			o, lse, err := fwd.RunCPU(in, sh)
			if err != nil {
				t.Fatalf("%s %v: %v", ex.file, sl, err)
			}
			var mf reference.MaskFunc
			var sf reference.ScoreFunc
			if ex.goMask != nil {
				mf = ex.goMask
			}
			if ex.goScore != nil {
				sf = ex.goScore
			}
			if ex.score == "alibi_bias" {
				sls := in.Aux["slopes"].([]float32)
				sf = func(s float64, b, h, i, j int) float64 { return s + float64(sls[h])*float64(j-i) }
			}
			q, k, v := to64(in.Q), to64(in.K), to64(in.V)
			scale := float64(float32(1 / math.Sqrt(float64(sh.Dim))))
			ro, rlse := reference.Attention(q, k, v, reference.Shape{B: sh.Batch, H: sh.Heads, HKV: sh.KVHeads, Sq: sh.SeqQ, Sk: sh.SeqK, D: sh.Dim}, scale, mf, sf)
			check(t, fmt.Sprintf("%s %s/%s %v", ex.file, ex.mask, ex.score, sl), o, lse, ro, rlse, sh, 1e-5)
		}
	}
}
