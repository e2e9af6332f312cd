package passes

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// maskGen writes a random mask condition over an 8×16 tile whose columns
// are start + j and rows q0 + i: comparisons of sums of the column, the
// row, scalars and constants, joined by and, or and not, with conjuncts on
// the columns alone ([1, 16], as the sequence end) and on the rows alone.
type maskGen struct {
	r     *rand.Rand
	lines []string
	n     int
}

func (g *maskGen) emit(format string, args ...any) string {
	g.n++
	name := fmt.Sprintf("%%t%d", g.n)
	g.lines = append(g.lines, "  "+name+" = "+fmt.Sprintf(format, args...))
	return name
}

func (g *maskGen) intAtom() string {
	switch g.r.IntN(6) {
	case 0, 1:
		return "%cb"
	case 2:
		return "%rb"
	case 3:
		return "%ab"
	case 4:
		return g.emit("const {value = %d} : tensor<8x16xi32>", g.r.IntN(41)-20)
	}
	op := []string{"add", "sub"}[g.r.IntN(2)]
	x, y := g.intAtom(), g.intAtom()
	return g.emit("%s %s, %s : tensor<8x16xi32>", op, x, y)
}

var genPreds = []string{"lt", "le", "gt", "ge", "eq", "ne"}

func (g *maskGen) boolExpr(depth int) string {
	k := g.r.IntN(8)
	if depth == 0 {
		k = g.r.IntN(4)
	}
	switch k {
	case 0:
		return g.emit("cmp %s, %s {pred = %s} : tensor<8x16xi1>", g.intAtom(), g.intAtom(), genPreds[g.r.IntN(6)])
	case 1: // the column against the row, offset (the shape of causal and window masks)
		c := g.emit("add %%cb, %s : tensor<8x16xi32>", g.intAtom())
		x, y := c, g.emit("sub %%rb, %s : tensor<8x16xi32>", g.intAtom())
		if g.r.IntN(2) == 0 {
			x, y = y, x
		}
		return g.emit("cmp %s, %s {pred = %s} : tensor<8x16xi1>", x, y, genPreds[g.r.IntN(6)])
	case 2: // on the columns alone, broadcast
		c := g.emit("cmp %%c2, %%n2 {pred = %s} : tensor<1x16xi1>", genPreds[g.r.IntN(4)])
		return g.emit("broadcast %s : tensor<8x16xi1>", c)
	case 3: // on the rows alone, broadcast
		c := g.emit("cmp %%rows, %%b2 {pred = %s} : tensor<8x1xi1>", genPreds[g.r.IntN(6)])
		return g.emit("broadcast %s : tensor<8x16xi1>", c)
	case 4:
		return g.emit("not %s : tensor<8x16xi1>", g.boolExpr(depth-1))
	}
	op := []string{"and", "and", "or", "xor"}[g.r.IntN(4)]
	x, y := g.boolExpr(depth-1), g.boolExpr(depth-1)
	return g.emit("%s %s, %s : tensor<8x16xi1>", op, x, y)
}

const maskGenHead = `kernel @k(%p: ptr<f32>, %start: i32, %q0: i32, %a: i32, %b: i32, %n: i32) attributes {num_warps = 4} {
  %ar = arange {start = 0, end = 16} : tensor<16xi32>
  %st = splat %start : tensor<16xi32>
  %cv = add %st, %ar : tensor<16xi32>
  %c2 = reshape %cv : tensor<1x16xi32>
  %cb = broadcast %c2 : tensor<8x16xi32>
  %n2 = splat %n : tensor<1x16xi32>
  %ar8 = arange {start = 0, end = 8} : tensor<8xi32>
  %q0s = splat %q0 : tensor<8xi32>
  %qv = add %q0s, %ar8 : tensor<8xi32>
  %rows = reshape %qv : tensor<8x1xi32>
  %rb = broadcast %rows : tensor<8x16xi32>
  %ab = splat %a : tensor<8x16xi32>
  %b2 = splat %b : tensor<8x1xi32>
`

const maskGenTail = `  %s = const {value = 1.5} : tensor<8x16xf32>
  %ninf = const {value = -inf} : tensor<8x16xf32>
  %r = select %KEEP, %s, %ninf : tensor<8x16xf32>
  %i8 = reshape %ar8 : tensor<8x1xi32>
  %sixteen = const {value = 16} : tensor<8x1xi32>
  %ro = mul %i8, %sixteen : tensor<8x1xi32>
  %rob = broadcast %ro : tensor<8x16xi32>
  %j2 = reshape %ar : tensor<1x16xi32>
  %jb = broadcast %j2 : tensor<8x16xi32>
  %off = add %rob, %jb : tensor<8x16xi32>
  %pp = splat %p : tensor<8x16xptr<f32>>
  %pa = addptr %pp, %off : tensor<8x16xptr<f32>>
  store %pa, %r
  return
}
`

// TestMaskRangeMatchesInterpreter checks the rewrite on random conditions,
// tile positions and scalars against the interpreter's run of the original.
func TestMaskRangeMatchesInterpreter(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 8))
	checkMaskRangeRandom(t, r, maskGenHead, func() int32 { return int32(r.IntN(41) - 20) }, "")
}

// checkMaskRangeRandom runs maskRange on 1500 random conditions of the
// generator (with head as its kernel's head) and checks that each
// rewritten kernel keeps what the original keeps on the interpreter, for
// four draws of the tile positions and of the scalars a and b (scalar);
// at least 100 conditions must be rewritten. what prefixes a failure.
func checkMaskRangeRandom(t *testing.T, r *rand.Rand, head string, scalar func() int32, what string) {
	t.Helper()
	rewrote := 0
	for i := range 1500 {
		g := &maskGen{r: r}
		keep := g.boolExpr(3)
		src := head + strings.Join(g.lines, "\n") + "\n" + strings.ReplaceAll(maskGenTail, "%KEEP", keep)
		orig, err := tir.Parse("gen.tir", src)
		if err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, src)
		}
		m, _ := tir.Parse("gen.tir", src)
		if err := maskRange(m); err != nil {
			t.Fatal(err)
		}
		if err := tir.Verify(m); err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, m)
		}
		if m.String() != orig.String() {
			rewrote++
		}
		for range 4 {
			args := []any{int32(r.IntN(61) - 20), int32(r.IntN(51) - 10), scalar(), scalar(), int32(r.IntN(61) - 20)}
			run := func(m *tir.Module) []float64 {
				b := cpu.FromF32("p", make([]float32, 128))
				if err := cpu.Launch(m, "k", [3]int{1, 1, 1}, append([]any{b}, args...)...); err != nil {
					t.Fatalf("case %d: %v", i, err)
				}
				return b.Vals
			}
			if want, got := run(orig), run(m); !sameBuffers([][]float64{got}, [][]float64{want}) {
				t.Fatalf("%scase %d, (start, q0, a, b, n) = %v: rewritten mask keeps\n%v\nwant\n%v\nsource:\n%s\nrewritten:\n%s", what, i, args, got, want, src, m)
			}
		}
	}
	t.Logf("%d of 1500 random conditions rewritten", rewrote)
	if rewrote < 100 {
		t.Errorf("only %d of 1500 random conditions were rewritten", rewrote)
	}
}

// TestMaskRangeModValuesWrap is issue 46 item 4: with a mod's values
// (parameters named mod.NAME) near the ends of i32, the rewrite computed
// its bounds with sums that wrapped where the original's did not, and
// kept nothing (`kv_idx <= q_idx + offset`, offset = 2^31 - 1). The random
// conditions of TestMaskRangeMatchesInterpreter, with the scalars a and b
// a mod's and drawn near the ends of i32, must keep what the original
// keeps.
func TestMaskRangeModValuesWrap(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 4))
	head := strings.NewReplacer("%a: i32, %b: i32", "%mask.a: i32, %mask.b: i32", "splat %a ", "splat %mask.a ", "splat %b ", "splat %mask.b ").Replace(maskGenHead)
	if head == maskGenHead {
		t.Fatal("the generator's head changed: rename a and b again")
	}
	extreme := func() int32 {
		switch r.IntN(4) {
		case 0:
			return math.MaxInt32 - int32(r.IntN(40))
		case 1:
			return math.MinInt32 + int32(r.IntN(40))
		}
		return int32(r.IntN(41) - 20)
	}
	checkMaskRangeRandom(t, r, head, extreme, "issue 46 item 4: ")
}
