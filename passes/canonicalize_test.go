package passes

import (
	"fmt"
	"math"
	"testing"

	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// Folding must compute exactly what the interpreter computes: these tests
// run small funcs through runtime/cpu before and after canonicalize and
// compare results bit for bit (NaNs alike).

var elems = []tir.Elem{tir.I1, tir.I32, tir.I64, tir.F16, tir.BF16, tir.F32}

// sampleValues are constants of e, chosen for the edges: zeros of both
// signs, NaN, infinities, overflow, rounding ties, subnormals. i64 stays
// below 2^53, where the interpreter (float64 inside) is exact.
func sampleValues(e tir.Elem) []any {
	switch {
	case e == tir.I1:
		return []any{false, true}
	case e.IsInt():
		vs := []any{int64(0), int64(1), int64(-1), int64(2), int64(-7), int64(3)}
		if e == tir.I32 {
			return append(vs, int64(math.MaxInt32), int64(math.MinInt32))
		}
		return append(vs, int64(1)<<52, -int64(1)<<52)
	}
	return []any{0.0, math.Copysign(0, -1), 1.0, -1.0, 0.1, 1.00390625, -2.75, 3e9, 65504.0, 65520.0, 1e-40,
		math.Inf(1), math.Inf(-1), math.NaN()}
}

// funcModule makes func @f with params of types ps returning what body
// builds.
func funcModule(ps []tir.Type, body func(b *tir.Builder, x []*tir.Value) *tir.Value) *tir.Module {
	f := &tir.Func{Name: "f", Body: &tir.Block{}}
	for i, t := range ps {
		f.Params = append(f.Params, &tir.Value{Type: t, Name: fmt.Sprintf("x%d", i)})
	}
	b := &tir.Builder{Block: f.Body}
	r := body(b, f.Params)
	f.Result = []tir.Type{r.Type}
	b.Return(r)
	return &tir.Module{Funcs: []*tir.Func{f}}
}

// checkSame runs build's module on each argument list before and after
// canonicalize and reports differences. It returns whether the result
// became a constant, or false when the module does not verify.
func checkSame(t *testing.T, build func() *tir.Module, argss [][]any) (folded bool) {
	t.Helper()
	before, after := build(), build()
	if tir.Verify(before) != nil {
		return false
	}
	if err := canonicalize(after); err != nil {
		t.Fatal(err)
	}
	if err := tir.Verify(after); err != nil {
		t.Fatalf("canonicalize broke\n%s\ninto\n%s: %v", before, after, err)
	}
	for _, args := range argss {
		want, werr := cpu.Call(before, "f", args...)
		got, gerr := cpu.Call(after, "f", args...)
		if (werr != nil) != (gerr != nil) {
			t.Errorf("args %v: error before %v, after %v\n%s\nbecame\n%s", args, werr, gerr, before, after)
			continue
		}
		if werr == nil && !sameResult(want[0], got[0]) {
			t.Errorf("args %v: %v before, %v after canonicalize\n%s\nbecame\n%s", args, want[0].Vals[0], got[0].Vals[0], before, after)
		}
	}
	body := after.Funcs[0].Body.Ops
	ret := body[len(body)-1].Args[0]
	return ret.Def != nil && ret.Def.Kind == tir.OpConst
}

// sameResult compares floats bit for bit, NaNs alike, and integers by
// value (the interpreter may hold an integer zero as -0.0).
func sameResult(a, b cpu.Tensor) bool {
	for i, x := range a.Vals {
		y := b.Vals[i]
		if a.Type.Elem.IsFloat() && math.Float64bits(x) != math.Float64bits(y) && !(x != x && y != y) ||
			!a.Type.Elem.IsFloat() && x != y {
			return false
		}
	}
	return len(a.Vals) == len(b.Vals)
}

func TestFoldMatchesInterpreter(t *testing.T) {
	folds := 0
	check := func(build func() *tir.Module) {
		if checkSame(t, build, [][]any{nil}) {
			folds++
		}
	}
	for _, e := range elems {
		ty := tir.Scalar(e)
		vals := sampleValues(e)
		for _, x := range vals {
			for k := tir.OpNeg; k <= tir.OpSqrt; k++ {
				check(func() *tir.Module {
					return funcModule(nil, func(b *tir.Builder, _ []*tir.Value) *tir.Value { return b.Unary(k, b.Const(ty, x)) })
				})
			}
			for _, to := range elems {
				check(func() *tir.Module {
					return funcModule(nil, func(b *tir.Builder, _ []*tir.Value) *tir.Value {
						return b.Emit(tir.NewOp(tir.OpCast, []*tir.Value{b.Const(ty, x)}, tir.Scalar(to))).Result()
					})
				})
			}
			for _, y := range vals {
				for k := tir.OpAdd; k <= tir.OpXor; k++ {
					check(func() *tir.Module {
						return funcModule(nil, func(b *tir.Builder, _ []*tir.Value) *tir.Value {
							return b.Binary(k, b.Const(ty, x), b.Const(ty, y))
						})
					})
				}
				for _, pred := range []string{"eq", "ne", "lt", "le", "gt", "ge"} {
					check(func() *tir.Module {
						return funcModule(nil, func(b *tir.Builder, _ []*tir.Value) *tir.Value {
							return b.Cmp(pred, b.Const(ty, x), b.Const(ty, y))
						})
					})
				}
			}
		}
	}
	// Guard against a vacuous pass: most of these must fold.
	if folds < 5000 {
		t.Errorf("only %d constant expressions folded", folds)
	}
}

// TestIdentitiesMatchInterpreter applies each op to a parameter and a
// special constant (either order), or to the parameter twice, and checks
// for every sample value of the parameter that canonicalize keeps the
// result: an identity that is not exact (x+0.0 at x = -0.0) fails here.
func TestIdentitiesMatchInterpreter(t *testing.T) {
	for _, e := range elems {
		ty := tir.Scalar(e)
		var argss [][]any
		for _, v := range sampleValues(e) {
			argss = append(argss, []any{argOf(v)})
		}
		specials := []any{false, true}
		if e.IsInt() {
			specials = []any{int64(0), int64(1), int64(-1)}
		} else if e.IsFloat() {
			specials = []any{0.0, math.Copysign(0, -1), 1.0, -1.0, math.NaN()}
		}
		one := func(body func(b *tir.Builder, x *tir.Value) *tir.Value) {
			checkSame(t, func() *tir.Module {
				return funcModule([]tir.Type{ty}, func(b *tir.Builder, x []*tir.Value) *tir.Value { return body(b, x[0]) })
			}, argss)
		}
		for k := tir.OpAdd; k <= tir.OpXor; k++ {
			one(func(b *tir.Builder, x *tir.Value) *tir.Value { return b.Binary(k, x, x) })
			for _, c := range specials {
				one(func(b *tir.Builder, x *tir.Value) *tir.Value { return b.Binary(k, x, b.Const(ty, c)) })
				one(func(b *tir.Builder, x *tir.Value) *tir.Value { return b.Binary(k, b.Const(ty, c), x) })
			}
		}
		for _, pred := range []string{"eq", "ne", "lt", "le", "gt", "ge"} {
			one(func(b *tir.Builder, x *tir.Value) *tir.Value {
				return b.Cast(b.Cmp(pred, x, x), tir.I32)
			})
		}
		for _, k := range []tir.Kind{tir.OpNot, tir.OpNeg} {
			one(func(b *tir.Builder, x *tir.Value) *tir.Value { return b.Unary(k, b.Unary(k, x)) })
		}
		for _, c := range []bool{false, true} {
			one(func(b *tir.Builder, x *tir.Value) *tir.Value {
				y := b.Unary(tir.OpAbs, x)
				if e == tir.I1 {
					y = b.Unary(tir.OpNot, x)
				}
				return b.Select(b.Const(tir.Scalar(tir.I1), c), x, y)
			})
		}
		one(func(b *tir.Builder, x *tir.Value) *tir.Value {
			c := b.Cmp("eq", x, x)
			return b.Select(c, x, x)
		})
		for _, z := range specials {
			for _, z2 := range specials {
				// select(c, z, select(c, z2, x)): one select when z and z2
				// are the same constant.
				one(func(b *tir.Builder, x *tir.Value) *tir.Value {
					c := b.Cmp("eq", x, b.Const(ty, z))
					return b.Select(c, b.Const(ty, z), b.Select(c, b.Const(ty, z2), x))
				})
			}
		}
		one(func(b *tir.Builder, x *tir.Value) *tir.Value {
			return b.Emit(tir.NewOp(tir.OpCast, []*tir.Value{x}, ty)).Result()
		})
	}
}

// TestNestedSelectFolds: select(c, 0.0, select(c, 0.0, x)) keeps one select
// (the backward's dS selected before and after a score's gradient), and
// -0.0 over +0.0 keeps both.
func TestNestedSelectFolds(t *testing.T) {
	for _, tc := range []struct {
		outer string
		want  int
	}{{"0.0", 1}, {"-0.0", 2}} {
		src := fmt.Sprintf(`func @f(%%x: f32) -> f32 {
%%z = const {value = 0.0} : f32
%%c = cmp %%x, %%z {pred = eq} : i1
%%i = select %%c, %%z, %%x : f32
%%z2 = const {value = %s} : f32
%%r = select %%c, %%z2, %%i : f32
return %%r
}
`, tc.outer)
		m, err := tir.Parse("case", src)
		if err != nil {
			t.Fatal(err)
		}
		if err := canonicalize(m); err != nil {
			t.Fatal(err)
		}
		if err := dce(m); err != nil {
			t.Fatal(err)
		}
		n := 0
		m.Funcs[0].Body.Walk(func(op *tir.Op) bool {
			if op.Kind == tir.OpSelect {
				n++
			}
			return true
		})
		if n != tc.want {
			t.Errorf("outer %s: %d selects, want %d:\n%s", tc.outer, n, tc.want, m)
		}
	}
}

// argOf turns a sample value into a cpu.Call argument.
func argOf(v any) any {
	if i, ok := v.(int64); ok {
		return i
	}
	return v
}

// TestSimplifyCases pins which identities apply, so a regression that
// merely stops simplifying (still correct) is noticed too.
func TestSimplifyCases(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want bool // the result simplifies to the parameter
	}{
		{"%c = const {value = 0} : i32\n%r = add %x, %c : i32", true},
		{"%c = const {value = 0} : i32\n%r = add %c, %x : i32", true},
		{"%c = const {value = 0.0} : f32\n%r = add %x, %c : f32", false},
		{"%c = const {value = -0.0} : f32\n%r = add %c, %x : f32", true},
		{"%c = const {value = 0.0} : f32\n%r = sub %x, %c : f32", true},
		{"%c = const {value = -0.0} : f32\n%r = sub %x, %c : f32", false},
		{"%c = const {value = 1.0} : f32\n%r = mul %c, %x : f32", true},
		{"%c = const {value = 1.0} : f32\n%r = div %x, %c : f32", true},
		{"%c = const {value = -1} : i32\n%r = and %x, %c : i32", true},
		{"%r = min %x, %x : f32", true},
		{"%a = neg %x : f32\n%r = neg %a : f32", true},
		{"%r = cast %x : f32", true},
		{"%r = broadcast %x : f32", true},
	} {
		typ := tc.src[len(tc.src)-3:]
		src := fmt.Sprintf("func @f(%%x: %s) -> %s {\n%s\nreturn %%r\n}\n", typ, typ, tc.src)
		m, err := tir.Parse("case", src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if err := canonicalize(m); err != nil {
			t.Fatal(err)
		}
		f := m.Funcs[0]
		got := f.Body.Ops[len(f.Body.Ops)-1].Args[0] == f.Params[0]
		if got != tc.want {
			t.Errorf("%s: simplified to the parameter = %v, want %v; got\n%s", tc.src, got, tc.want, m)
		}
	}
}
