package cpu

import (
	"math"
	"os"
	"testing"

	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/tir"
)

// sampleModule is a copy of tir's test module (tir/sample_test.go), which
// touches every op kind; tir/testdata/sample.tir is its printed form.
func sampleModule() *tir.Module {
	m := &tir.Module{}
	mf := &tir.Func{Name: "mask", Result: []tir.Type{tir.Tensor(tir.I1, 4, 8)}, Body: &tir.Block{}}
	mf.Params = []*tir.Value{{Type: tir.Scalar(tir.I32), Name: "b"}, {Type: tir.Scalar(tir.I32), Name: "h"},
		{Type: tir.Tensor(tir.I32, 4, 1), Name: "q"}, {Type: tir.Tensor(tir.I32, 1, 8), Name: "kv"}}
	mb := &tir.Builder{Block: mf.Body}
	q := mb.Broadcast(mf.Params[2], []int{4, 8})
	kv := mb.Broadcast(mf.Params[3], []int{4, 8})
	mb.Return(mb.Cmp("ge", q, kv))
	m.Funcs = append(m.Funcs, mf)

	k := &tir.Func{Name: "sample", Kernel: true, Body: &tir.Block{}}
	k.Params = []*tir.Value{{Type: tir.PtrTo(tir.F32), Name: "x"}, {Type: tir.PtrTo(tir.F32), Name: "out"}, {Type: tir.Scalar(tir.I32), Name: "n"}}
	k.SetAttr("num_warps", int64(4))
	b := &tir.Builder{Block: k.Body}
	pid := b.ProgramID(0)
	r := b.Arange(0, 4)
	r2 := b.Reshape(r, []int{4, 1})
	c := b.Arange(0, 8)
	c2 := b.Reshape(c, []int{1, 8})
	four := b.Const(tir.Scalar(tir.I32), int64(4))
	base := b.Binary(tir.OpMul, pid, four)
	rows := b.Binary(tir.OpAdd, b.Splat(base, []int{4, 1}), r2)
	mask := b.Call("mask", []*tir.Value{pid, pid, rows, c2}, tir.Tensor(tir.I1, 4, 8)).Result()
	eight := b.Const(tir.Tensor(tir.I32, 4, 8), int64(8))
	off := b.Binary(tir.OpAdd, b.Binary(tir.OpMul, b.Broadcast(rows, []int{4, 8}), eight), b.Broadcast(c2, []int{4, 8}))
	ptrs := b.AddPtr(b.Splat(k.Params[0], []int{4, 8}), off)
	inb := b.Cmp("lt", off, b.Splat(b.Binary(tir.OpMul, k.Params[2], b.Const(tir.Scalar(tir.I32), int64(8))), []int{4, 8}))
	zero := b.Const(tir.Tensor(tir.F32, 4, 8), 0.0)
	x := b.Load(ptrs, inb, zero)
	xm := b.Select(mask, x, b.Const(tir.Tensor(tir.F32, 4, 8), -1.5))
	xt := b.Trans(b.Unary(tir.OpExp2, xm))
	acc := b.Dot(b.Cast(xm, tir.BF16), b.Cast(xt, tir.BF16), b.Const(tir.Tensor(tir.F32, 4, 4), 0.0))
	lo, hi, st := b.Const(tir.Scalar(tir.I32), int64(0)), b.Const(tir.Scalar(tir.I32), int64(3)), b.Const(tir.Scalar(tir.I32), int64(1))
	loop, body := b.For(lo, hi, st, []*tir.Value{b.Reduce("max", acc, 1)})
	iv := body.Unary(tir.OpNeg, body.Cast(body.Block.Args[0], tir.F32))
	body.Yield(body.Binary(tir.OpMax, body.Block.Args[1], body.Splat(iv, []int{4})))
	cond := b.Cmp("gt", k.Params[2], lo)
	ifop, th, el := b.If(cond, []tir.Type{tir.Tensor(tir.F32, 4)})
	th.Yield(th.Unary(tir.OpSqrt, th.Unary(tir.OpAbs, loop.Result())))
	el.Yield(el.Reduce("sum", acc, 0))
	outp := b.AddPtr(b.Splat(k.Params[1], []int{4}), b.Binary(tir.OpAdd, b.Splat(base, []int{4}), r))
	b.Store(outp, ifop.Result(), nil)
	b.Return()
	m.Funcs = append(m.Funcs, k)
	return m
}

// sampleRef computes @sample's output directly.
func sampleRef(x []float64, n, grid int) []float64 {
	out := make([]float64, 4*grid)
	r32 := func(v float64) float64 { return float64(float32(v)) }
	for pid := 0; pid < grid; pid++ {
		var xm [4][8]float64
		for i := 0; i < 4; i++ {
			for j := 0; j < 8; j++ {
				row := pid*4 + i
				v := 0.0
				if off := row*8 + j; off < n*8 {
					v = x[off]
				}
				if row < j {
					v = -1.5
				}
				xm[i][j] = v
			}
		}
		var acc [4][4]float64
		for i := 0; i < 4; i++ {
			for j := 0; j < 4; j++ {
				for k := 0; k < 8; k++ {
					// xt[k][j] = exp2(xm[j][k])
					acc[i][j] = r32(acc[i][j] + half.RoundBF16(xm[i][k])*half.RoundBF16(r32(math.Exp2(xm[j][k]))))
				}
			}
		}
		for i := 0; i < 4; i++ {
			if n > 0 {
				v := math.Inf(-1)
				for j := 0; j < 4; j++ {
					v = max(v, acc[i][j])
				}
				v = max(v, 0, -1, -2)
				out[pid*4+i] = r32(math.Sqrt(math.Abs(v)))
			} else {
				s := acc[0][i]
				for j := 1; j < 4; j++ {
					s = r32(s + acc[j][i])
				}
				out[pid*4+i] = s
			}
		}
	}
	return out
}

func runSample(t *testing.T, m *tir.Module) {
	t.Helper()
	for _, c := range []struct{ n, grid int }{{6, 2}, {0, 2}, {8, 2}, {3, 3}} {
		xs := make([]float32, c.n*8)
		for i := range xs {
			xs[i] = float32(math.Sin(float64(i)) * 2)
		}
		x, out := FromF32("x", xs), NewBuffer("out", tir.F32, 4*c.grid)
		if err := Launch(m, "sample", [3]int{c.grid, 1, 1}, x, out, c.n); err != nil {
			t.Fatal(err)
		}
		if want := sampleRef(x.Vals, c.n, c.grid); !sameSlice(out.Vals, want) {
			t.Errorf("n=%d grid=%d: out = %v\nwant %v", c.n, c.grid, out.Vals, want)
		}
	}
}

func TestSampleModule(t *testing.T) { runSample(t, sampleModule()) }

func TestSampleText(t *testing.T) {
	src, err := os.ReadFile("../../tir/testdata/sample.tir")
	if err != nil {
		t.Skip(err)
	}
	m, err := tir.Parse("sample.tir", string(src))
	if err != nil || m == nil || m.Func("sample") == nil {
		t.Skipf("tir.Parse not usable yet: %v", err)
	}
	runSample(t, m)
}
