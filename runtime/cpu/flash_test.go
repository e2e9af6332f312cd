package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

// flashModule builds a flash-attention forward kernel over [B*H, S, D]
// tensors of elem, with bm x bn tiles, as the front end would lower it:
// grid (ceil(S/bm), B*H), online softmax carried through a loop.
func flashModule(elem tir.Elem, bm, bn, d int) *tir.Module {
	pt := tir.PtrTo(elem)
	f32 := tir.Scalar(tir.F32)
	return kernelModule([]tir.Type{pt, pt, pt, tir.PtrTo(tir.F32), i32s, f32}, []string{"q", "k", "v", "o", "s", "scale"},
		func(b *tir.Builder, ps []*tir.Value) {
			q, k, v, o, seq, scale := ps[0], ps[1], ps[2], ps[3], ps[4], ps[5]
			ci := func(b *tir.Builder, x int64) *tir.Value { return b.Const(i32s, x) }
			bin := func(b *tir.Builder, kd tir.Kind, x, y *tir.Value) *tir.Value { return b.Binary(kd, x, y) }
			col := func(b *tir.Builder, x *tir.Value, n int) *tir.Value { // [r] -> [r, n]
				r := x.Type.Shape[0]
				return b.Broadcast(b.Reshape(x, []int{r, 1}), []int{r, n})
			}
			row := func(b *tir.Builder, x *tir.Value, n int) *tir.Value { // [c] -> [n, c]
				c := x.Type.Shape[0]
				return b.Broadcast(b.Reshape(x, []int{1, c}), []int{n, c})
			}
			// tile returns pointers base + rows*d + cols and the mask rows < seq.
			tile := func(b *tir.Builder, p, base, rows *tir.Value) (*tir.Value, *tir.Value) {
				n := rows.Type.Shape[0]
				off := bin(b, tir.OpAdd, bin(b, tir.OpMul, col(b, rows, d), b.Const(tir.Tensor(tir.I32, n, d), int64(d))), row(b, b.Arange(0, d), n))
				ptrs := b.AddPtr(b.Splat(b.AddPtr(p, base), []int{n, d}), off)
				return ptrs, b.Cmp("lt", col(b, rows, d), b.Splat(seq, []int{n, d}))
			}
			pm, bh := b.ProgramID(0), b.ProgramID(1)
			base := bin(b, tir.OpMul, bh, bin(b, tir.OpMul, seq, ci(b, int64(d))))
			rm := bin(b, tir.OpAdd, b.Splat(bin(b, tir.OpMul, pm, ci(b, int64(bm))), []int{bm}), b.Arange(0, bm))
			qp, qmask := tile(b, q, base, rm)
			qt := b.Load(qp, qmask, b.Const(tir.Tensor(elem, bm, d), 0.0))
			inits := []*tir.Value{
				b.Const(tir.Tensor(tir.F32, bm), math.Inf(-1)),
				b.Const(tir.Tensor(tir.F32, bm), 0.0),
				b.Const(tir.Tensor(tir.F32, bm, d), 0.0),
			}
			loop, lb := b.For(ci(b, 0), seq, ci(b, int64(bn)), inits)
			start, mi, li, acc := lb.Block.Args[0], lb.Block.Args[1], lb.Block.Args[2], lb.Block.Args[3]
			rn := bin(lb, tir.OpAdd, lb.Splat(start, []int{bn}), lb.Arange(0, bn))
			kp, kvmask := tile(lb, k, base, rn)
			kt := lb.Load(kp, kvmask, lb.Const(tir.Tensor(elem, bn, d), 0.0))
			s := lb.Dot(qt, lb.Trans(kt), lb.Const(tir.Tensor(tir.F32, bm, bn), 0.0))
			s = bin(lb, tir.OpMul, s, lb.Splat(scale, []int{bm, bn}))
			valid := lb.Cmp("lt", row(lb, rn, bm), lb.Splat(seq, []int{bm, bn}))
			s = lb.Select(valid, s, lb.Const(tir.Tensor(tir.F32, bm, bn), math.Inf(-1)))
			mnew := bin(lb, tir.OpMax, mi, lb.Reduce("max", s, 1))
			p := lb.Unary(tir.OpExp, bin(lb, tir.OpSub, s, col(lb, mnew, bn)))
			alpha := lb.Unary(tir.OpExp, bin(lb, tir.OpSub, mi, mnew))
			lnew := bin(lb, tir.OpAdd, bin(lb, tir.OpMul, li, alpha), lb.Reduce("sum", p, 1))
			vp, _ := tile(lb, v, base, rn)
			vt := lb.Load(vp, kvmask, lb.Const(tir.Tensor(elem, bn, d), 0.0))
			accnew := lb.Dot(lb.Cast(p, elem), vt, bin(lb, tir.OpMul, acc, col(lb, alpha, d)))
			lb.Yield(mnew, lnew, accnew)
			out := bin(b, tir.OpDiv, loop.Results[2], col(b, loop.Results[1], d))
			op, omask := tile(b, o, base, rm)
			b.Store(op, out, omask)
		})
}

func TestFlashAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const B, H = 2, 2
	for _, c := range []struct {
		elem      tir.Elem
		bm, bn, d int
		s         int
		tol       float64
	}{
		{tir.F32, 64, 64, 64, 257, 2e-6},
		{tir.BF16, 32, 32, 64, 100, 5e-3},
		{tir.F32, 32, 64, 16, 33, 2e-6},
	} {
		n := B * H * c.s * c.d
		rnd := func() []float64 { return ints(n, func(int) float64 { return fix(c.elem, r.NormFloat64()) }) }
		qv, kv, vv := rnd(), rnd(), rnd()
		q, k, v := FromFloats("q", c.elem, qv), FromFloats("k", c.elem, kv), FromFloats("v", c.elem, vv)
		o := NewBuffer("o", tir.F32, n)
		scale := 1 / math.Sqrt(float64(c.d))
		grid := [3]int{(c.s + c.bm - 1) / c.bm, B * H, 1}
		if err := Launch(flashModule(c.elem, c.bm, c.bn, c.d), "k", grid, q, k, v, o, c.s, scale); err != nil {
			t.Fatal(err)
		}
		// Naive softmax(q k^T * scale) v in float64.
		worst := 0.0
		for bh := 0; bh < B*H; bh++ {
			at := func(x []float64, i, j int) float64 { return x[(bh*c.s+i)*c.d+j] }
			for i := 0; i < c.s; i++ {
				sc := make([]float64, c.s)
				mx := math.Inf(-1)
				for j := range sc {
					for e := 0; e < c.d; e++ {
						sc[j] += at(qv, i, e) * at(kv, j, e)
					}
					sc[j] *= float64(float32(scale))
					mx = max(mx, sc[j])
				}
				sum := 0.0
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for e := 0; e < c.d; e++ {
					want := 0.0
					for j := range sc {
						want += sc[j] * at(vv, j, e)
					}
					want /= sum
					got := o.Vals[(bh*c.s+i)*c.d+e]
					worst = max(worst, math.Abs(got-want))
				}
			}
		}
		t.Logf("%s %dx%d d=%d s=%d: max error %g", c.elem, c.bm, c.bn, c.d, c.s, worst)
		if worst > c.tol {
			t.Errorf("%s %dx%d d=%d s=%d: max error %g > %g", c.elem, c.bm, c.bn, c.d, c.s, worst, c.tol)
		}
	}
}
