package cpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

var (
	pf32 = tir.PtrTo(tir.F32)
	i32s = tir.Scalar(tir.I32)
)

// copyKernel: out[i] = x[i] for i < n (masked), lanes 0..7, other = -1;
// masked-off lanes read and write nothing even though they are out of bounds.
func copyKernel(pos tir.Pos, masked bool) *tir.Module {
	return kernelModule([]tir.Type{pf32, pf32, i32s}, []string{"x", "out", "n"}, func(b *tir.Builder, ps []*tir.Value) {
		b.Pos = pos
		idx := b.Arange(0, 8)
		var mask, other *tir.Value
		if masked {
			mask = b.Cmp("lt", idx, b.Splat(ps[2], []int{8}))
			other = b.Const(tir.Tensor(tir.F32, 8), -1.0)
		}
		x := b.Load(b.AddPtr(b.Splat(ps[0], []int{8}), idx), mask, other)
		// Stores go to out[idx] for idx < n, so out may be shorter than 8.
		b.Store(b.AddPtr(b.Splat(ps[1], []int{8}), idx), b.Binary(tir.OpAdd, x, b.Const(tir.Tensor(tir.F32, 8), 0.5)), mask)
	})
}

func TestMaskedLoadStore(t *testing.T) {
	m := copyKernel(tir.Pos{}, true)
	x := FromF32("x", []float32{1, 2, 3, 4, 5})
	out := FromF32("out", []float32{9, 9, 9, 9, 9})
	if err := Launch(m, "k", [3]int{1, 1, 1}, x, out, 3); err != nil {
		t.Fatal(err)
	}
	if got, want := out.F32(), []float32{1.5, 2.5, 3.5, 9, 9}; !equalF32(got, want) {
		t.Errorf("out = %v, want %v", got, want)
	}
	// The other value flows to masked lanes: n = 5 with a 5-element out.
	out2 := NewBuffer("out", tir.F32, 5)
	if err := Launch(m, "k", [3]int{1, 1, 1}, x, out2, int64(5)); err != nil {
		t.Fatal(err)
	}
	if got, want := out2.F32(), []float32{1.5, 2.5, 3.5, 4.5, 5.5}; !equalF32(got, want) {
		t.Errorf("out = %v, want %v", got, want)
	}
}

func TestStoreRounds(t *testing.T) {
	m := kernelModule([]tir.Type{tir.PtrTo(tir.BF16), tir.Scalar(tir.F32)}, []string{"o", "v"}, func(b *tir.Builder, ps []*tir.Value) {
		b.Store(ps[0], b.Cast(ps[1], tir.BF16), nil)
	})
	o := NewBuffer("o", tir.BF16, 1)
	if err := Launch(m, "k", [3]int{1, 1, 1}, o, float32(1+p2(1, -8)+p2(1, -20))); err != nil {
		t.Fatal(err)
	}
	if o.Vals[0] != 1+p2(1, -7) {
		t.Errorf("bf16 store = %v", o.Vals[0])
	}
	// A buffer filled by hand is rounded when loaded.
	b := FromFloats("b", tir.BF16, []float64{1 + p2(1, -8) + p2(1, -30)})
	if b.Vals[0] != 1+p2(1, -7) {
		t.Errorf("FromFloats = %v", b.Vals[0])
	}
}

func TestOutOfBounds(t *testing.T) {
	pos := tir.Pos{File: "flash_fwd.fa", Line: 12, Col: 9}
	x := FromF32("q", []float32{1, 2, 3, 4})
	out := NewBuffer("out", tir.F32, 8)
	err := Launch(copyKernel(pos, false), "k", [3]int{1, 1, 1}, x, out, 3)
	want := `cpu: kernel k: load out of bounds: buffer "q" has 4 elements, index 4 (at flash_fwd.fa:12:9)`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Op == nil || e.Op.Kind != tir.OpLoad {
		t.Errorf("error does not carry the op: %#v", err)
	}
	// Store out of bounds, negative offsets, no position.
	err = Launch(copyKernel(tir.Pos{}, false), "k", [3]int{1, 1, 1}, FromF32("x", make([]float32, 8)), FromF32("o", make([]float32, 6)), 3)
	want = `cpu: kernel k: store out of bounds: buffer "o" has 6 elements, index 6 (in op store)`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant  %s", err, want)
	}
	m := kernelModule([]tir.Type{pf32}, []string{"x"}, func(b *tir.Builder, ps []*tir.Value) {
		b.Load(b.AddPtr(ps[0], b.Const(i32s, int64(-1))), nil, nil)
	})
	if err := Launch(m, "k", [3]int{1, 1, 1}, x); err == nil || !strings.Contains(err.Error(), "index -1") {
		t.Errorf("negative index: err = %v", err)
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFor(t *testing.T) {
	// Carries a scalar sum of the induction variable, a tensor, and a pair
	// yielded swapped, over [lo, hi) by step.
	t2 := tir.Tensor(tir.F32, 2)
	m := fnModule([]tir.Type{i32s, i32s, i32s}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
		zero := b.Const(i32s, int64(0))
		a, c := b.Const(t2, 1.0), b.Const(t2, 2.0)
		loop, body := b.For(ps[0], ps[1], ps[2], []*tir.Value{zero, b.Const(t2, 0.0), a, c})
		args := body.Block.Args
		sum := body.Binary(tir.OpAdd, args[1], args[0])
		acc := body.Binary(tir.OpAdd, args[2], body.Binary(tir.OpMul, args[3], args[4]))
		body.Yield(sum, acc, args[4], args[3])
		return loop.Results
	})
	p, err := Prepare(m, "f")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lo, hi, step int
		sum          float64
		acc          float64
		a            float64
	}{
		{0, 5, 1, 10, 10, 2},
		{2, 9, 3, 2 + 5 + 8, 6, 2},
		{5, 5, 1, 0, 0, 1},
		{7, 2, 1, 0, 0, 1},
	} {
		res, err := p.Call(c.lo, c.hi, c.step)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Vals[0] != c.sum || res[1].Vals[1] != c.acc || res[2].Vals[0] != c.a || res[3].Vals[0] != 3-c.a {
			t.Errorf("for(%d, %d, %d) = %v %v %v %v", c.lo, c.hi, c.step, res[0].Vals, res[1].Vals, res[2].Vals, res[3].Vals)
		}
	}
	if _, err := p.Call(0, 5, 0); err == nil || !strings.Contains(err.Error(), "step must be > 0, got 0") {
		t.Errorf("step 0: err = %v", err)
	}
}

func TestNestedForIf(t *testing.T) {
	// for i in 0..4: for j in 0..3: acc += (i > j ? i*j : -1)
	m := fnModule(nil, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
		c := func(b *tir.Builder, v int64) *tir.Value { return b.Const(i32s, v) }
		outer, ob := b.For(c(b, 0), c(b, 4), c(b, 1), []*tir.Value{c(b, 0)})
		inner, ib := ob.For(c(ob, 0), c(ob, 3), c(ob, 1), []*tir.Value{ob.Block.Args[1]})
		i, j, acc := ob.Block.Args[0], ib.Block.Args[0], ib.Block.Args[1]
		minus1 := c(ib, -1)
		ifop, th, el := ib.If(ib.Cmp("gt", i, j), []tir.Type{i32s})
		th.Yield(th.Binary(tir.OpMul, i, j))
		el.Yield(minus1) // a value from outside the region
		ib.Yield(ib.Binary(tir.OpAdd, acc, ifop.Result()))
		ob.Yield(inner.Result())
		return outer.Results
	})
	want := 0
	for i := 0; i < 4; i++ {
		for j := 0; j < 3; j++ {
			if i > j {
				want += i * j
			} else {
				want--
			}
		}
	}
	if got := call1(t, m).Vals[0]; got != float64(want) {
		t.Errorf("nested loops = %v, want %d", got, want)
	}
}

func TestIfNoResults(t *testing.T) {
	// if (v > 0) store 1 else store 2; regions without results.
	m := kernelModule([]tir.Type{pf32, i32s}, []string{"o", "v"}, func(b *tir.Builder, ps []*tir.Value) {
		_, th, el := b.If(b.Cmp("gt", ps[1], b.Const(i32s, int64(0))), nil)
		th.Store(ps[0], th.Const(tir.Scalar(tir.F32), 1.0), nil)
		th.Yield()
		el.Store(ps[0], el.Const(tir.Scalar(tir.F32), 2.0), nil)
		el.Yield()
	})
	for v, want := range map[int]float64{5: 1, -5: 2} {
		o := NewBuffer("o", tir.F32, 1)
		if err := Launch(m, "k", [3]int{1, 1, 1}, o, v); err != nil {
			t.Fatal(err)
		}
		if o.Vals[0] != want {
			t.Errorf("v=%d: stored %v, want %v", v, o.Vals[0], want)
		}
	}
}

func TestCall(t *testing.T) {
	// @sq(x) = x*x on tensors; @f(x) = sq(sq(x)) + sq(x); @k calls @f in a loop.
	t4 := tir.Tensor(tir.F32, 4)
	sq := &tir.Func{Name: "sq", Params: []*tir.Value{{Type: t4, Name: "x"}}, Result: []tir.Type{t4}, Body: &tir.Block{}}
	{
		b := &tir.Builder{Block: sq.Body}
		b.Return(b.Binary(tir.OpMul, sq.Params[0], sq.Params[0]))
	}
	f := &tir.Func{Name: "f", Params: []*tir.Value{{Type: t4, Name: "x"}}, Result: []tir.Type{t4, t4}, Body: &tir.Block{}}
	{
		b := &tir.Builder{Block: f.Body}
		s := b.Call("sq", []*tir.Value{f.Params[0]}, t4).Result()
		s2 := b.Call("sq", []*tir.Value{s}, t4).Result()
		b.Return(b.Binary(tir.OpAdd, s2, s), f.Params[0])
	}
	m := &tir.Module{Funcs: []*tir.Func{sq, f}}
	res, err := Call(m, "f", Tensor{Type: t4, Vals: []float64{1, 2, 3, -1}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{2, 20, 90, 2}; !sameSlice(res[0].Vals, want) {
		t.Errorf("f = %v, want %v", res[0].Vals, want)
	}
	if want := []float64{1, 2, 3, -1}; !sameSlice(res[1].Vals, want) {
		t.Errorf("f passthrough = %v, want %v", res[1].Vals, want)
	}

	// A kernel calling @f inside a loop, where the call's results are carried.
	k := &tir.Func{Name: "k", Kernel: true, Params: []*tir.Value{{Type: pf32, Name: "o"}}, Body: &tir.Block{}}
	{
		b := &tir.Builder{Block: k.Body}
		c := func(v int64) *tir.Value { return b.Const(i32s, v) }
		loop, body := b.For(c(0), c(2), c(1), []*tir.Value{b.Const(t4, 1.0)})
		r := body.Call("f", []*tir.Value{body.Block.Args[1]}, t4, t4)
		body.Yield(r.Results[0])
		b.Store(b.AddPtr(b.Splat(k.Params[0], []int{4}), b.Arange(0, 4)), loop.Result(), nil)
		b.Return()
	}
	m.Funcs = append(m.Funcs, k)
	o := NewBuffer("o", tir.F32, 4)
	if err := Launch(m, "k", [3]int{1, 1, 1}, o); err != nil {
		t.Fatal(err)
	}
	if want := []float64{20, 20, 20, 20}; !sameSlice(o.Vals, want) { // 1 -> 2 -> 4+16
		t.Errorf("k = %v, want %v", o.Vals, want)
	}

	// Recursion gives an error, not a stack overflow.
	rec := &tir.Func{Name: "rec", Params: []*tir.Value{{Type: i32s, Name: "x"}}, Result: []tir.Type{i32s}, Body: &tir.Block{}}
	{
		b := &tir.Builder{Block: rec.Body}
		b.Return(b.Call("rec", rec.Params, i32s).Result())
	}
	m = &tir.Module{Funcs: []*tir.Func{rec}}
	if _, err := Call(m, "rec", 1); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("recursion: err = %v", err)
	}
	// Unknown callee.
	bad := fnModule(nil, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
		return b.Call("nope", nil, i32s).Results
	})
	if _, err := Call(bad, "f"); err == nil || !strings.Contains(err.Error(), "unknown function @nope") {
		t.Errorf("unknown callee: err = %v", err)
	}
}

func TestProgramIDGrid(t *testing.T) {
	// Each program writes pid0 + 10*pid1 + 100*pid2 to its own slot.
	m := kernelModule([]tir.Type{tir.PtrTo(tir.I32), i32s, i32s}, []string{"o", "g0", "g1"}, func(b *tir.Builder, ps []*tir.Value) {
		p0, p1, p2 := b.ProgramID(0), b.ProgramID(1), b.ProgramID(2)
		c := func(v int64) *tir.Value { return b.Const(i32s, v) }
		val := b.Binary(tir.OpAdd, p0, b.Binary(tir.OpAdd, b.Binary(tir.OpMul, p1, c(10)), b.Binary(tir.OpMul, p2, c(100))))
		slot := b.Binary(tir.OpAdd, p0, b.Binary(tir.OpMul, ps[1], b.Binary(tir.OpAdd, p1, b.Binary(tir.OpMul, ps[2], p2))))
		b.Store(b.AddPtr(ps[0], slot), val, nil)
	})
	for _, g := range [][3]int{{4, 3, 1}, {3, 2, 2}, {1, 1, 1}, {37, 5, 1}} {
		o := FromI32("o", make([]int32, g[0]*g[1]*g[2]))
		for i := range o.Vals {
			o.Vals[i] = -1
		}
		if err := Launch(m, "k", g, o, g[0], g[1]); err != nil {
			t.Fatal(err)
		}
		got := o.I32()
		for z := 0; z < g[2]; z++ {
			for y := 0; y < g[1]; y++ {
				for x := 0; x < g[0]; x++ {
					if v := got[x+g[0]*(y+g[1]*z)]; v != int32(x+10*y+100*z) {
						t.Fatalf("grid %v: slot (%d,%d,%d) = %d", g, x, y, z, v)
					}
				}
			}
		}
	}
	// An empty grid runs nothing.
	if err := Launch(m, "k", [3]int{0, 1, 1}, NewBuffer("o", tir.I32, 0), 0, 1); err != nil {
		t.Error(err)
	}
}

// TestGridSizeAndPrefetch: num_programs is the launch grid's size and
// num_sms 1; a prefetch reads nothing but fails where a load would, unless
// masked off.
func TestGridSizeAndPrefetch(t *testing.T) {
	m := kernelModule([]tir.Type{tir.PtrTo(tir.I32), i32s}, []string{"o", "ahead"}, func(b *tir.Builder, ps []*tir.Value) {
		c := func(v int64) *tir.Value { return b.Const(i32s, v) }
		lin := b.Binary(tir.OpAdd, b.ProgramID(0), b.Binary(tir.OpMul, b.ProgramID(1), b.NumPrograms(0)))
		// Slot lin: nx + 10 ny + 100 nz + 1000 num_sms.
		val := b.Binary(tir.OpAdd, b.NumPrograms(0), b.Binary(tir.OpAdd, b.Binary(tir.OpMul, b.NumPrograms(1), c(10)),
			b.Binary(tir.OpAdd, b.Binary(tir.OpMul, b.NumPrograms(2), c(100)), b.Binary(tir.OpMul, b.NumSMs(), c(1000)))))
		next := b.Binary(tir.OpAdd, lin, ps[1])
		total := b.Binary(tir.OpMul, b.NumPrograms(0), b.NumPrograms(1))
		b.Prefetch(b.AddPtr(ps[0], next), b.Cmp("lt", next, total))
		b.Store(b.AddPtr(ps[0], lin), val, nil)
	})
	g := [3]int{3, 2, 1}
	o := FromI32("o", make([]int32, 6))
	if err := Launch(m, "k", g, o, 1); err != nil {
		t.Fatal(err)
	}
	for i, v := range o.I32() {
		if v != 3+20+100+1000 {
			t.Fatalf("slot %d = %d, want 1123", i, v)
		}
	}
	// Five programs ahead is past the buffer for every program but the
	// first: masked, nothing fails; unmasked, the prefetch does.
	if err := Launch(m, "k", g, o, 5); err != nil {
		t.Fatal(err)
	}
	m2 := kernelModule([]tir.Type{tir.PtrTo(tir.I32)}, []string{"o"}, func(b *tir.Builder, ps []*tir.Value) {
		b.Prefetch(b.AddPtr(ps[0], b.Const(i32s, int64(6))), nil)
	})
	want := `cpu: kernel k: prefetch out of bounds: buffer "o" has 6 elements, index 6 (in op prefetch)`
	if err := Launch(m2, "k", g, o); err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant  %s", err, want)
	}
}

func TestLaunchErrorProgram(t *testing.T) {
	// Programs with pid >= 3 go out of bounds; the lowest failing one is reported.
	m := kernelModule([]tir.Type{pf32}, []string{"o"}, func(b *tir.Builder, ps []*tir.Value) {
		b.Store(b.AddPtr(ps[0], b.ProgramID(0)), b.Const(tir.Scalar(tir.F32), 1.0), nil)
	})
	err := Launch(m, "k", [3]int{64, 1, 1}, NewBuffer("o", tir.F32, 3))
	var e *Error
	if !errors.As(err, &e) || e.Program != [3]int{3, 0, 0} || !strings.Contains(e.Msg, "index 3") {
		t.Errorf("err = %v (%+v)", err, e)
	}
}

func TestArgErrors(t *testing.T) {
	m := copyKernel(tir.Pos{}, true)
	x, out := FromF32("x", make([]float32, 8)), FromF32("out", make([]float32, 8))
	cases := []struct {
		args []any
		want string
	}{
		{[]any{x, out}, "cpu: kernel k: got 2 arguments, want 3 (%x: ptr<f32>, %out: ptr<f32>, %n: i32)"},
		{[]any{x, out, 1.5}, "cpu: kernel k: argument 2 (%n: i32): got float64, want int32, int or int64"},
		{[]any{x, out, int64(1) << 40}, "cpu: kernel k: argument 2 (%n: i32): 1099511627776 does not fit i32"},
		{[]any{x, 3, 3}, "cpu: kernel k: argument 1 (%out: ptr<f32>): got int, want *cpu.Buffer"},
		{[]any{FromI32("xi", nil), out, 3}, `cpu: kernel k: argument 0 (%x: ptr<f32>): buffer "xi" holds i32, want f32`},
		{[]any{(*Buffer)(nil), out, 3}, "cpu: kernel k: argument 0 (%x: ptr<f32>): nil buffer"},
	}
	for _, c := range cases {
		err := Launch(m, "k", [3]int{1, 1, 1}, c.args...)
		if err == nil || err.Error() != c.want {
			t.Errorf("got  %v\nwant %s", err, c.want)
		}
	}
	if err := Launch(m, "nope", [3]int{1, 1, 1}); err == nil || !strings.Contains(err.Error(), "no function @nope") {
		t.Errorf("missing kernel: %v", err)
	}
	f := fnModule([]tir.Type{tir.Scalar(tir.I1), tir.Tensor(tir.F32, 2)}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value { return ps })
	if err := Launch(f, "f", [3]int{1, 1, 1}, true, Tensor{}); err == nil || !strings.Contains(err.Error(), "not a kernel") {
		t.Errorf("func launched: %v", err)
	}
	if _, err := Call(f, "f", 1, Tensor{}); err == nil || !strings.Contains(err.Error(), "got int, want bool") {
		t.Errorf("i1 param: %v", err)
	}
	if _, err := Call(f, "f", true, Tensor{Type: tir.Tensor(tir.F32, 3), Vals: make([]float64, 3)}); err == nil ||
		!strings.Contains(err.Error(), "got tensor of tensor<3xf32>") {
		t.Errorf("tensor param: %v", err)
	}
}

// Malformed IR that slips past compile checks still gives an error naming the op.
func TestRecoverPanic(t *testing.T) {
	m := fnModule([]tir.Type{tir.Scalar(tir.I1), tir.Tensor(tir.F32, 2)}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
		ifop, th, el := b.If(ps[0], []tir.Type{tir.Tensor(tir.F32, 4)}) // yields a 2-vector as a 4-vector
		th.Yield(ps[1])
		el.Yield(ps[1])
		b.Pos = tir.Pos{File: "bad.tir", Line: 2, Col: 3}
		return []*tir.Value{b.Binary(tir.OpAdd, ifop.Result(), ifop.Result())}
	})
	_, err := Call(m, "f", true, Tensor{Type: tir.Tensor(tir.F32, 2), Vals: []float64{1, 2}})
	if err == nil || !strings.Contains(err.Error(), "internal error") || !strings.Contains(err.Error(), "(at bad.tir:2:3)") {
		t.Errorf("err = %v", err)
	}
}

func TestPreparedAllocs(t *testing.T) {
	// The naive reference calls a mask func millions of times on scalars.
	m := fnModule([]tir.Type{i32s, i32s, i32s, i32s}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
		return []*tir.Value{b.Cmp("ge", ps[2], ps[3])}
	})
	p, err := Prepare(m, "f")
	if err != nil {
		t.Fatal(err)
	}
	var q, kv int32 = 300, 200
	allocs := testing.AllocsPerRun(100, func() {
		res, err := p.Call(int32(0), int32(1), q, kv)
		if err != nil || res[0].Vals[0] != 1 {
			t.Fatal(res, err)
		}
	})
	if allocs > 6 {
		t.Errorf("Prepared.Call allocates %v times per call", allocs)
	}
	t.Logf("%v allocs per call", allocs)
}

func TestMalformed(t *testing.T) {
	// Nil pieces anywhere give errors, not panics.
	f := &tir.Func{Name: "f", Body: &tir.Block{Ops: []*tir.Op{nil}}}
	g := &tir.Func{Name: "g", Params: []*tir.Value{nil}, Body: &tir.Block{}}
	h := &tir.Func{Name: "h", Body: &tir.Block{Ops: []*tir.Op{tir.NewOp(tir.OpNeg, []*tir.Value{nil}, tir.Scalar(tir.F32))}}}
	m := &tir.Module{Funcs: []*tir.Func{f, g, h}}
	for _, name := range []string{"f", "g", "h"} {
		if _, err := Call(m, name); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Call(&tir.Module{Funcs: []*tir.Func{nil}}, "f"); err == nil {
		t.Error("nil func: no error")
	}
	if err := Launch(nil, "k", [3]int{1, 1, 1}); err == nil {
		t.Error("nil module: no error")
	}
}
