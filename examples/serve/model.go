package main

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
)

// model stands in for a transformer layer: random projections of a hidden
// state to one token's q (all query heads), k and v (the kv heads), and of
// the attention output back to the next token's hidden state. It has no
// meaning, but it is deterministic, so the loop needs nothing from outside
// and every run with one seed does the same work.
type model struct {
	hidden, heads, kvHeads, dim int
	// wq is [hidden, heads·dim], wk and wv [hidden, kvHeads·dim], wo
	// [heads·dim, hidden], row-major, with variance 1/fan-in so that q, k,
	// v and the next hidden state stay of order 1.
	wq, wk, wv, wo []float32
}

func newModel(hidden, heads, kvHeads, dim int, rng *rand.Rand) *model {
	m := &model{hidden: hidden, heads: heads, kvHeads: kvHeads, dim: dim}
	m.wq = randn(rng, hidden*heads*dim, 1/math.Sqrt(float64(hidden)))
	m.wk = randn(rng, hidden*kvHeads*dim, 1/math.Sqrt(float64(hidden)))
	m.wv = randn(rng, hidden*kvHeads*dim, 1/math.Sqrt(float64(hidden)))
	m.wo = randn(rng, heads*dim*hidden, 1/math.Sqrt(float64(heads*dim)))
	return m
}

// randn is n normal values of standard deviation sd.
func randn(rng *rand.Rand, n int, sd float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * sd)
	}
	return x
}

// token is a new hidden state: random, of unit RMS (a prompt token's
// embedding).
func (m *model) token(rng *rand.Rand) []float32 {
	return normalize(randn(rng, m.hidden, 1))
}

// project writes x's projections: q, one row of dim per query head
// (q[h·qStride:]), and k and v, one row per kv head (k[h·kvStride:]), so
// that the caller can place them in [B, H, Sq, D] and [B, Sq, Hkv, D]
// tensors.
func (m *model) project(x []float32, q []float32, qStride int, k, v []float32, kvStride int) {
	d := m.dim
	for h := range m.heads {
		matvec(q[h*qStride:][:d], x, m.wq, m.heads*d, h*d)
	}
	for h := range m.kvHeads {
		matvec(k[h*kvStride:][:d], x, m.wk, m.kvHeads*d, h*d)
		matvec(v[h*kvStride:][:d], x, m.wv, m.kvHeads*d, h*d)
	}
}

// matvec sets out[i] = Σ_j x[j]·w[j·cols + col + i]: columns col … of x·w.
func matvec(out, x, w []float32, cols, col int) {
	clear(out)
	for j, xj := range x {
		row := w[j*cols+col:][:len(out)]
		for i, wi := range row {
			out[i] += xj * wi
		}
	}
}

// next is the hidden state of the token that an attention output makes:
// o holds one position's rows, o[h·stride:][:dim] for each query head,
// projected by wo and normalized.
func (m *model) next(o []float32, stride int) []float32 {
	x := make([]float32, m.hidden)
	for h := range m.heads {
		for i, oi := range o[h*stride:][:m.dim] {
			row := m.wo[(h*m.dim+i)*m.hidden:][:m.hidden]
			for j, w := range row {
				x[j] += oi * w
			}
		}
	}
	return normalize(x)
}

// normalize scales x to unit RMS (RMSNorm without a gain).
func normalize(x []float32) []float32 {
	s := 0.0
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	if s == 0 {
		return x
	}
	r := float32(1 / math.Sqrt(s/float64(len(x))))
	for i := range x {
		x[i] *= r
	}
	return x
}

// parallel runs f(i) for i in [0, n) on up to GOMAXPROCS goroutines: the
// projections of a step's tokens are independent.
func parallel(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				f(i)
			}
		})
	}
	wg.Wait()
}
