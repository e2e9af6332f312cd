package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/tir"
)

func TestShapes(t *testing.T) {
	ty := tir.Tensor(tir.F32, 2, 3)
	m := fnModule([]tir.Type{ty, tir.Tensor(tir.F32, 1, 3), tir.Tensor(tir.F32, 2, 1), tir.Tensor(tir.F32, 2, 1, 3)},
		func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
			return []*tir.Value{
				b.Trans(ps[0]),
				b.Broadcast(ps[1], []int{2, 3}),
				b.Broadcast(ps[2], []int{2, 3}),
				b.Reshape(ps[0], []int{3, 2}),
				b.Broadcast(ps[3], []int{2, 4, 3}),
				b.Splat(b.Const(tir.Scalar(tir.F32), 2.5), []int{2, 2}),
				b.Trans(b.Trans(ps[0])),
			}
		})
	x := []float64{1, 2, 3, 4, 5, 6}
	res, err := Call(m, "f", Tensor{Type: ty, Vals: x},
		Tensor{Type: tir.Tensor(tir.F32, 1, 3), Vals: []float64{7, 8, 9}},
		Tensor{Type: tir.Tensor(tir.F32, 2, 1), Vals: []float64{10, 11}},
		Tensor{Type: tir.Tensor(tir.F32, 2, 1, 3), Vals: x})
	if err != nil {
		t.Fatal(err)
	}
	var b3 []float64
	for i := 0; i < 2; i++ {
		for j := 0; j < 4; j++ {
			b3 = append(b3, x[i*3:i*3+3]...)
		}
	}
	wants := [][]float64{
		{1, 4, 2, 5, 3, 6},
		{7, 8, 9, 7, 8, 9},
		{10, 10, 10, 11, 11, 11},
		x,
		b3,
		{2.5, 2.5, 2.5, 2.5},
		x,
	}
	for i, w := range wants {
		if !sameSlice(res[i].Vals, w) {
			t.Errorf("result %d (%s) = %v, want %v", i, res[i].Type, res[i].Vals, w)
		}
	}
	if got := res[0].Type.String(); got != "tensor<3x2xf32>" {
		t.Errorf("trans type %s", got)
	}
}

func randBF16(r *rand.Rand, n int) []float64 {
	return ints(n, func(int) float64 { return half.RoundBF16(r.NormFloat64()) })
}

func TestDot(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const M, K, N = 16, 24, 8
	at, bt, ct := tir.Tensor(tir.BF16, M, K), tir.Tensor(tir.BF16, N, K), tir.Tensor(tir.F32, M, N)
	m := fnModule([]tir.Type{at, bt, ct}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
		return []*tir.Value{b.Dot(ps[0], b.Trans(ps[1]), ps[2])}
	})
	a, bb := randBF16(r, M*K), randBF16(r, N*K)
	c := ints(M*N, func(int) float64 { return float64(float32(r.NormFloat64())) })
	got := call1(t, m, Tensor{Type: at, Vals: a}, Tensor{Type: bt, Vals: bb}, Tensor{Type: ct, Vals: c})
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			acc := float32(c[i*N+j])
			for k := 0; k < K; k++ {
				acc = float32(float64(acc) + a[i*K+k]*bb[j*K+k])
			}
			if got.Vals[i*N+j] != float64(acc) {
				t.Fatalf("dot[%d][%d] = %v, want %v", i, j, got.Vals[i*N+j], acc)
			}
		}
	}

	// Integer dot wraps.
	it := tir.Tensor(tir.I32, 1, 2)
	m = fnModule([]tir.Type{it, tir.Tensor(tir.I32, 2, 1), tir.Tensor(tir.I32, 1, 1)}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
		return []*tir.Value{b.Dot(ps[0], ps[1], ps[2])}
	})
	got = call1(t, m, Tensor{Type: it, Vals: []float64{65536, 3}},
		Tensor{Type: tir.Tensor(tir.I32, 2, 1), Vals: []float64{32768, 5}},
		Tensor{Type: tir.Tensor(tir.I32, 1, 1), Vals: []float64{1}})
	if got.Vals[0] != mInt+16 {
		t.Errorf("i32 dot = %v, want %v", got.Vals[0], mInt+16)
	}
}

func TestReduce(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	shape := []int{3, 4, 5}
	ty := tir.Tensor(tir.F32, shape...)
	x := ints(60, func(int) float64 { return float64(float32(r.NormFloat64() * 1e3)) })
	x[7] = 1e8 // makes f32 summation order visible
	for axis := 0; axis < 3; axis++ {
		for _, kind := range []string{"sum", "max", "min"} {
			m := fnModule([]tir.Type{ty}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
				return []*tir.Value{b.Reduce(kind, ps[0], axis)}
			})
			got := call1(t, m, Tensor{Type: ty, Vals: x})
			// Naive: iterate the output index, fold along axis in order.
			var want []float64
			for i := 0; i < 3; i++ {
				for j := 0; j < 4; j++ {
					for k := 0; k < 5; k++ {
						idx := []int{i, j, k}
						if idx[axis] != 0 {
							continue
						}
						var acc float64
						for l := 0; l < shape[axis]; l++ {
							idx[axis] = l
							v := x[idx[0]*20+idx[1]*5+idx[2]]
							switch {
							case l == 0:
								acc = v
							case kind == "sum":
								acc = float64(float32(acc + v))
							case kind == "max":
								acc = max(acc, v)
							default:
								acc = min(acc, v)
							}
						}
						want = append(want, acc)
					}
				}
			}
			if !sameSlice(got.Vals, want) {
				t.Errorf("reduce %s axis %d = %v, want %v", kind, axis, got.Vals, want)
			}
		}
	}
	// NaN propagates through max; i32 sums wrap.
	ft := tir.Tensor(tir.F32, 3)
	m := fnModule([]tir.Type{ft}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
		return []*tir.Value{b.Reduce("max", ps[0], 0)}
	})
	if got := call1(t, m, Tensor{Type: ft, Vals: []float64{1, nan, 2}}); !same(got.Vals[0], nan) {
		t.Errorf("max with NaN = %v", got.Vals[0])
	}
	it := tir.Tensor(tir.I32, 2)
	m = fnModule([]tir.Type{it}, func(b *tir.Builder, ps []*tir.Value) []*tir.Value {
		return []*tir.Value{b.Reduce("sum", ps[0], 0)}
	})
	if got := call1(t, m, Tensor{Type: it, Vals: []float64{xInt, 2}}); got.Vals[0] != mInt+1 {
		t.Errorf("i32 sum = %v, want wrapped", got.Vals[0])
	}
}
