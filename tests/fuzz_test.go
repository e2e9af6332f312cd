package tests

import (
	"fmt"
	"math"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/reference"
)

// modGen turns fuzz bytes into a random mask: source text in the tile
// language and the same expression evaluated in Go.
type modGen struct {
	data []byte
	pos  int
}

func (g *modGen) next(n int) int {
	if g.pos >= len(g.data) {
		return 0
	}
	v := int(g.data[g.pos]) % n
	g.pos++
	return v
}

type intExpr struct {
	src  string
	eval func(b, h, i, j int) int
}

type boolExpr struct {
	src  string
	eval func(b, h, i, j int) bool
}

func (g *modGen) intExpr(depth int) intExpr {
	switch k := g.next(7); {
	case depth <= 0 || k == 0:
		c := g.next(40) - 8
		return intExpr{fmt.Sprint(c), func(b, h, i, j int) int { return c }}
	case k == 1:
		vars := []string{"q_idx", "kv_idx", "b", "h"}
		v := g.next(4)
		return intExpr{vars[v], func(b, h, i, j int) int { return [4]int{i, j, b, h}[v] }}
	case k <= 4:
		x, y := g.intExpr(depth-1), g.intExpr(depth-1)
		ops := []string{"+", "-", "*"}
		o := g.next(3)
		return intExpr{"(" + x.src + " " + ops[o] + " " + y.src + ")", func(b, h, i, j int) int {
			a, c := x.eval(b, h, i, j), y.eval(b, h, i, j)
			return [3]int{a + c, a - c, a * c}[o]
		}}
	default:
		x := g.intExpr(depth - 1)
		d := g.next(9) + 1
		if g.next(2) == 0 {
			return intExpr{"(" + x.src + " / " + fmt.Sprint(d) + ")", func(b, h, i, j int) int { return x.eval(b, h, i, j) / d }}
		}
		return intExpr{"(" + x.src + " % " + fmt.Sprint(d) + ")", func(b, h, i, j int) int { return x.eval(b, h, i, j) % d }}
	}
}

func (g *modGen) boolExpr(depth int) boolExpr {
	switch k := g.next(5); {
	case depth <= 0 || k <= 1:
		x, y := g.intExpr(2), g.intExpr(2)
		ops := []string{"<", "<=", "==", "!=", ">", ">="}
		o := g.next(6)
		return boolExpr{x.src + " " + ops[o] + " " + y.src, func(b, h, i, j int) bool {
			a, c := x.eval(b, h, i, j), y.eval(b, h, i, j)
			return [6]bool{a < c, a <= c, a == c, a != c, a > c, a >= c}[o]
		}}
	case k == 2:
		x := g.boolExpr(depth - 1)
		return boolExpr{"!(" + x.src + ")", func(b, h, i, j int) bool { return !x.eval(b, h, i, j) }}
	default:
		x, y := g.boolExpr(depth-1), g.boolExpr(depth-1)
		if k == 3 {
			return boolExpr{"(" + x.src + " && " + y.src + ")", func(b, h, i, j int) bool { return x.eval(b, h, i, j) && y.eval(b, h, i, j) }}
		}
		return boolExpr{"(" + x.src + " || " + y.src + ")", func(b, h, i, j int) bool { return x.eval(b, h, i, j) || y.eval(b, h, i, j) }}
	}
}

// FuzzKernelVsReference compiles random masks into flash_fwd (block mask
// built by the analytic or CPU builder, blocks skipped) and compares the
// CPU device's output with float64 attention using the Go evaluation of
// the same mask: a wrong block classification, a miscompiled mod or a
// mask applied on the wrong blocks shows as a difference.
func FuzzKernelVsReference(f *testing.F) {
	for _, seed := range [][]byte{{}, {1, 1, 0, 2, 1, 1}, {3, 4, 2, 1, 0, 1, 5, 3}, {4, 0, 1, 2, 3, 1, 6, 2, 4, 1, 9}, {2, 2, 5, 1, 1, 5, 5, 6, 1, 0, 3}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &modGen{data: data}
		m := g.boolExpr(3)
		src := "mask fuzzed(b, h, q_idx, kv_idx) {\n    return " + m.src + "\n}\n"
		fwd, err := fac.CompileForward(fac.Options{Mask: "fuzzed", Sources: map[string]string{"fuzz.fa": src},
			Consts: map[string]string{"BLOCK_M": "16", "BLOCK_N": "16", "SPARSE_Q": "32", "SPARSE_K": "32"}}, 16)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		sh := fac.Shape{Batch: 2, Heads: 2, KVHeads: 1, SeqQ: 45, SeqK: 70, Dim: 16}
		in := inputs(sh, uint64(len(data)))
		in.Aux = nil
		o, lse, err := fwd.RunCPU(in, sh)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		scale := float64(float32(1 / math.Sqrt(float64(sh.Dim))))
		ro, rlse := reference.Attention(to64(in.Q), to64(in.K), to64(in.V),
			reference.Shape{B: sh.Batch, H: sh.Heads, HKV: sh.KVHeads, Sq: sh.SeqQ, Sk: sh.SeqK, D: sh.Dim}, scale, m.eval, nil)
		check(t, src, o, lse, ro, rlse, sh, 1e-5)
	})
}
