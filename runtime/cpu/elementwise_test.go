package cpu

import (
	"math"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

var (
	nan  = math.NaN()
	inf  = math.Inf(1)
	p2   = math.Ldexp
	sc   = tir.Scalar
	mInt = float64(math.MinInt32)
	xInt = float64(math.MaxInt32)
)

func TestBinary(t *testing.T) {
	cases := []struct {
		k    tir.Kind
		e    tir.Elem
		a, b any
		want float64
	}{
		{tir.OpAdd, tir.I32, int32(math.MaxInt32), int32(1), mInt},
		{tir.OpSub, tir.I32, int32(math.MinInt32), int32(1), xInt},
		{tir.OpMul, tir.I32, int32(65536), int32(65536), 0},
		{tir.OpMul, tir.I32, int32(math.MaxInt32), int32(math.MaxInt32), 1},
		{tir.OpDiv, tir.I32, int32(-7), int32(2), -3},
		{tir.OpDiv, tir.I32, int32(7), int32(-2), -3},
		{tir.OpDiv, tir.I32, int32(math.MinInt32), int32(-1), mInt},
		{tir.OpRem, tir.I32, int32(-7), int32(2), -1},
		{tir.OpRem, tir.I32, int32(7), int32(-2), 1},
		{tir.OpMin, tir.I32, int32(-3), int32(2), -3},
		{tir.OpMax, tir.I32, int32(-3), int32(2), 2},
		{tir.OpAnd, tir.I32, int32(12), int32(10), 8},
		{tir.OpOr, tir.I32, int32(12), int32(10), 14},
		{tir.OpXor, tir.I32, int32(-1), int32(5), -6},
		{tir.OpAnd, tir.I1, true, false, 0},
		{tir.OpOr, tir.I1, true, false, 1},
		{tir.OpXor, tir.I1, true, true, 0},
		{tir.OpAdd, tir.I64, int64(1) << 40, int64(1) << 40, 1 << 41},
		{tir.OpDiv, tir.I64, int64(-9), int64(4), -2},
		{tir.OpAdd, tir.F32, 1.0, p2(1, -24), 1},                             // tie to even
		{tir.OpAdd, tir.F32, 1.0, 3 * p2(1, -24), 1 + p2(1, -22)},            // tie up to even
		{tir.OpMul, tir.F32, 1 + p2(1, -12), 1 + p2(1, -12), 1 + p2(1, -11)}, // 2^-24 term rounds away
		{tir.OpDiv, tir.F32, 1.0, 3.0, float64(float32(1.0 / 3))},            // exact f32 division
		{tir.OpAdd, tir.BF16, 1.0, p2(1, -8), 1},                             // bf16 tie
		{tir.OpAdd, tir.BF16, 1.0, 3 * p2(1, -8), 1 + p2(1, -6)},             //
		{tir.OpAdd, tir.F16, 65504.0, 16.0, inf},                             // f16 overflow
		{tir.OpDiv, tir.F32, 1.0, 0.0, inf},                                  //
		{tir.OpRem, tir.F32, -7.5, 2.0, -1.5},                                //
		{tir.OpMin, tir.F32, nan, 1.0, nan},                                  // NaN wins
		{tir.OpMin, tir.F32, 1.0, nan, nan},                                  //
		{tir.OpMax, tir.F32, nan, 1.0, nan},                                  //
		{tir.OpMax, tir.F32, -inf, 1.0, 1},                                   //
		{tir.OpSub, tir.F32, inf, inf, nan},                                  //
	}
	for _, c := range cases {
		m := fnModule([]tir.Type{sc(c.e), sc(c.e)}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
			return []*tir.Value{b.Binary(c.k, ps[0], ps[1])}
		})
		got := call1(t, m, c.a, c.b).Vals[0]
		if !same(got, c.want) {
			t.Errorf("%s %s(%v, %v) = %v, want %v", c.k, c.e, c.a, c.b, got, c.want)
		}
	}
}

func TestDivByZero(t *testing.T) {
	for _, k := range []tir.Kind{tir.OpDiv, tir.OpRem} {
		m := fnModule([]tir.Type{tir.Tensor(tir.I32, 2), tir.Tensor(tir.I32, 2)}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
			b.Pos = tir.Pos{File: "m.fa", Line: 3, Col: 7}
			return []*tir.Value{b.Binary(k, ps[0], ps[1])}
		})
		ty := tir.Tensor(tir.I32, 2)
		_, err := Call(m, "f", Tensor{Type: ty, Vals: []float64{1, 2}}, Tensor{Type: ty, Vals: []float64{1, 0}})
		want := "cpu: func f: integer division by zero (at m.fa:3:7)"
		if err == nil || err.Error() != want {
			t.Errorf("%s by zero: got %v, want %s", k, err, want)
		}
	}
}

func TestCmp(t *testing.T) {
	type row struct {
		e    tir.Elem
		a, b any
		want string // results for eq ne lt le gt ge, as 0/1
	}
	preds := []string{"eq", "ne", "lt", "le", "gt", "ge"}
	for _, c := range []row{
		{tir.F32, 1.0, 2.0, "011100"},
		{tir.F32, 2.0, 2.0, "100101"},
		{tir.F32, nan, 2.0, "010000"},
		{tir.F32, nan, nan, "010000"},
		{tir.F32, -inf, inf, "011100"},
		{tir.I32, int32(-5), int32(3), "011100"},
		{tir.I32, int32(math.MaxInt32), int32(math.MinInt32), "010011"},
		{tir.I1, true, false, "010011"},
	} {
		for i, p := range preds {
			m := fnModule([]tir.Type{sc(c.e), sc(c.e)}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
				return []*tir.Value{b.Cmp(p, ps[0], ps[1])}
			})
			got := call1(t, m, c.a, c.b)
			want := float64(c.want[i] - '0')
			if got.Vals[0] != want || got.Type.Elem != tir.I1 {
				t.Errorf("cmp %s %s(%v, %v) = %v, want %v", p, c.e, c.a, c.b, got.Vals[0], want)
			}
		}
	}
}

func TestUnary(t *testing.T) {
	cases := []struct {
		k    tir.Kind
		e    tir.Elem
		a    any
		want float64
	}{
		{tir.OpNeg, tir.I32, int32(math.MinInt32), mInt},
		{tir.OpNeg, tir.I32, int32(5), -5},
		{tir.OpAbs, tir.I32, int32(-5), 5},
		{tir.OpAbs, tir.I32, int32(math.MinInt32), mInt},
		{tir.OpNot, tir.I32, int32(0), -1},
		{tir.OpNot, tir.I1, true, 0},
		{tir.OpNot, tir.I1, false, 1},
		{tir.OpNeg, tir.F32, 0.0, math.Copysign(0, -1)},
		{tir.OpAbs, tir.F32, -2.5, 2.5},
		{tir.OpExp, tir.F32, 1.0, float64(float32(math.E))},
		{tir.OpExp2, tir.F32, 3.0, 8},
		{tir.OpExp2, tir.F32, -inf, 0},
		{tir.OpExp2, tir.BF16, 0.5, 1.4140625}, // sqrt2 rounded to bf16
		{tir.OpLog, tir.F32, 0.0, -inf},
		{tir.OpLog2, tir.F32, 8.0, 3},
		{tir.OpLog, tir.F32, -1.0, nan},
		{tir.OpTanh, tir.F32, 100.0, 1},
		{tir.OpSqrt, tir.F32, 2.0, float64(float32(math.Sqrt2))},
		{tir.OpSqrt, tir.F32, -1.0, nan},
		{tir.OpExp, tir.F16, 12.0, inf},
	}
	for _, c := range cases {
		m := fnModule([]tir.Type{sc(c.e)}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
			return []*tir.Value{b.Unary(c.k, ps[0])}
		})
		got := call1(t, m, c.a).Vals[0]
		if !same(got, c.want) || math.Signbit(got) != math.Signbit(c.want) && got == 0 {
			t.Errorf("%s %s(%v) = %v, want %v", c.k, c.e, c.a, got, c.want)
		}
	}
	// exp on an integer is not an op.
	m := fnModule([]tir.Type{sc(tir.I32)}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
		return []*tir.Value{b.Unary(tir.OpExp, ps[0])}
	})
	if _, err := Call(m, "f", int32(1)); err == nil || !strings.Contains(err.Error(), "exp on i32") {
		t.Errorf("exp on i32: err = %v", err)
	}
}

func TestCast(t *testing.T) {
	cases := []struct {
		from, to tir.Elem
		a        any
		want     float64
	}{
		{tir.F32, tir.BF16, 1 + p2(1, -8), 1},               // tie to even
		{tir.F32, tir.BF16, 1 + 3*p2(1, -8), 1 + p2(1, -6)}, // tie to even, up
		{tir.F32, tir.BF16, 1 + p2(1, -8) + p2(1, -20), 1 + p2(1, -7)},
		{tir.F32, tir.BF16, float64(math.MaxFloat32), inf},
		{tir.F32, tir.BF16, nan, nan},
		{tir.F32, tir.F16, 1 + p2(1, -11), 1},
		{tir.F32, tir.F16, 70000.0, inf},
		{tir.F32, tir.F16, p2(1, -25), 0}, // subnormal tie to zero
		{tir.BF16, tir.F32, 1.5, 1.5},
		{tir.F32, tir.I32, -2.7, -2},
		{tir.F32, tir.I32, 2.7, 2},
		{tir.F32, tir.I32, 1e10, xInt},
		{tir.F32, tir.I32, -1e10, mInt},
		{tir.F32, tir.I32, nan, 0},
		{tir.F32, tir.I32, inf, xInt},
		{tir.F32, tir.I64, -1e10, -1e10},
		{tir.I1, tir.I32, true, 1},
		{tir.I1, tir.F32, true, 1},
		{tir.I32, tir.I1, int32(-4), 1},
		{tir.I32, tir.I1, int32(0), 0},
		{tir.F32, tir.I1, 0.5, 1},
		{tir.I64, tir.I32, int64(1)<<32 + 5, 5},
		{tir.I64, tir.I32, int64(1) << 31, mInt},
		{tir.I32, tir.I64, int32(-3), -3},
		{tir.I32, tir.F32, int32(16777217), 16777216}, // 2^24+1 rounds to even
		{tir.I32, tir.BF16, int32(257), 256},
	}
	for _, c := range cases {
		m := fnModule([]tir.Type{sc(c.from)}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
			return []*tir.Value{b.Cast(ps[0], c.to)}
		})
		got := call1(t, m, c.a)
		if !same(got.Vals[0], c.want) || got.Type.Elem != c.to {
			t.Errorf("cast %s->%s(%v) = %v %s, want %v", c.from, c.to, c.a, got.Vals[0], got.Type, c.want)
		}
	}
}

func TestSelectConstArange(t *testing.T) {
	ty := tir.Tensor(tir.I1, 4)
	m := fnModule([]tir.Type{ty}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
		x := b.Cast(b.Arange(3, 7), tir.F32)
		y := b.Const(tir.Tensor(tir.F32, 4), -1.5)
		return []*tir.Value{b.Select(ps[0], x, y), b.Const(tir.Tensor(tir.BF16, 2), 1+p2(1, -8)), b.Const(sc(tir.I32), int64(1)<<32+1)}
	})
	res, err := Call(m, "f", Tensor{Type: ty, Vals: []float64{1, 0, 1, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{3, -1.5, 5, -1.5}; !sameSlice(res[0].Vals, want) {
		t.Errorf("select = %v, want %v", res[0].Vals, want)
	}
	if want := []float64{1, 1}; !sameSlice(res[1].Vals, want) {
		t.Errorf("bf16 const = %v, want %v (rounded)", res[1].Vals, want)
	}
	if res[2].Vals[0] != 1 {
		t.Errorf("i32 const = %v, want 1 (wrapped)", res[2].Vals[0])
	}
}
