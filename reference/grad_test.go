package reference

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttentionGradFiniteDifferences checks AttentionGrad against central
// differences of L = Σ O∘dO, for every element of q, k, v and of a learned
// bias table, on a small problem with grouped-query heads, Sq ≠ Sk, a mask
// that empties a row and a nonlinear score mod reading the table; with V's
// head dim equal to Q's and K's, larger and smaller.
func TestAttentionGradFiniteDifferences(t *testing.T) {
	for _, sh := range []Shape{
		{B: 2, H: 4, HKV: 2, Sq: 5, Sk: 7, D: 3},
		{B: 2, H: 4, HKV: 2, Sq: 5, Sk: 7, D: 3, DV: 5},
		{B: 1, H: 2, HKV: 1, Sq: 6, Sk: 4, D: 4, DV: 2},
	} {
		t.Run(fmt.Sprintf("D=%d,DV=%d", sh.D, sh.VD()), func(t *testing.T) { gradFiniteDifferences(t, sh) })
	}
}

func gradFiniteDifferences(t *testing.T, sh Shape) {
	rng := rand.New(rand.NewPCG(1, 2))
	randn := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		return x
	}
	q, k, v := randn(sh.B*sh.H*sh.Sq*sh.D), randn(sh.B*sh.HKV*sh.Sk*sh.D), randn(sh.B*sh.HKV*sh.Sk*sh.VD())
	do := randn(sh.B * sh.H * sh.Sq * sh.VD())
	bias := randn(4)
	const scale = 0.7
	// Row 0 keeps nothing; the rest see keys up to two past the diagonal.
	mask := func(b, h, i, j int) bool { return i > 0 && j <= i+2 }
	idx := func(i, j int) int { return min(abs(i-j), 3) }
	score := func(s float64, b, h, i, j int) float64 {
		return 3*math.Tanh(s/3) + bias[idx(i, j)]*float64(h+1)
	}
	deriv := func(s float64, b, h, i, j int, aux func(string, int, float64)) float64 {
		aux("bias", idx(i, j), float64(h+1))
		th := math.Tanh(s / 3)
		return 1 - th*th
	}
	loss := func() float64 {
		o, _ := Attention(q, k, v, sh, scale, mask, score)
		l := 0.0
		for i := range o {
			l += o[i] * do[i]
		}
		return l
	}
	g := AttentionGrad(q, k, v, do, sh, scale, mask, score, deriv, map[string]int{"bias": len(bias)})
	check := func(name string, x, grad []float64) {
		t.Helper()
		const eps = 1e-6
		worst := 0.0
		for i := range x {
			x0 := x[i]
			x[i] = x0 + eps
			lp := loss()
			x[i] = x0 - eps
			lm := loss()
			x[i] = x0
			fd := (lp - lm) / (2 * eps)
			if e := math.Abs(fd-grad[i]) / math.Max(1, math.Abs(fd)); e > worst {
				worst = e
			}
		}
		if worst > 1e-7 {
			t.Errorf("d%s: worst error against finite differences %.3g", name, worst)
		}
	}
	check("q", q, g.DQ)
	check("k", k, g.DK)
	check("v", v, g.DV)
	check("bias", bias, g.DAux["bias"])
	// The emptied row has no gradient at all.
	for b := 0; b < sh.B; b++ {
		for h := 0; h < sh.H; h++ {
			for d := 0; d < sh.D; d++ {
				if x := g.DQ[((b*sh.H+h)*sh.Sq)*sh.D+d]; x != 0 {
					t.Fatalf("dQ of a row that keeps nothing is %v", x)
				}
			}
		}
	}
}

// TestAttentionGradIdentity checks the score-free path (no deriv needed)
// against the same finite differences on dq.
func TestAttentionGradIdentity(t *testing.T) {
	sh := Shape{B: 1, H: 1, HKV: 1, Sq: 3, Sk: 4, D: 2}
	q := []float64{0.1, -0.4, 0.3, 0.9, -1.2, 0.5}
	k := []float64{0.2, 0.7, -0.3, 0.4, 1.1, -0.6, 0.05, 0.8}
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	do := []float64{0.3, -0.2, 0.5, 0.1, -0.7, 0.4}
	g := AttentionGrad(q, k, v, do, sh, 1, nil, nil, nil, nil)
	for i := range q {
		const eps = 1e-6
		x0 := q[i]
		q[i] = x0 + eps
		op, _ := Attention(q, k, v, sh, 1, nil, nil)
		q[i] = x0 - eps
		om, _ := Attention(q, k, v, sh, 1, nil, nil)
		q[i] = x0
		fd := 0.0
		for j := range op {
			fd += (op[j] - om[j]) * do[j] / (2 * eps)
		}
		if math.Abs(fd-g.DQ[i]) > 1e-8 {
			t.Errorf("dq[%d] = %v, finite differences %v", i, g.DQ[i], fd)
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestAttentionGradSinksFiniteDifferences checks AttentionGradSinks against
// central differences of L = Σ O∘dO with AttentionSinks, for every element
// of q, k, v and of the sinks (dsink[h] = −Σ_{b,i} P_sink·Δ), with grouped
// heads, Sq ≠ Sk, a softcap score, and rows that keep nothing (P_sink = 1
// there, and O = 0, so they add nothing): one sink far above the scores,
// one far below; with V's head dim equal to Q's and K's, and not.
func TestAttentionGradSinksFiniteDifferences(t *testing.T) {
	for _, sh := range []Shape{{B: 2, H: 4, HKV: 2, Sq: 5, Sk: 7, D: 3}, {B: 2, H: 4, HKV: 2, Sq: 5, Sk: 7, D: 3, DV: 2}} {
		t.Run(fmt.Sprintf("D=%d,DV=%d", sh.D, sh.VD()), func(t *testing.T) { gradSinksFiniteDifferences(t, sh) })
	}
}

func gradSinksFiniteDifferences(t *testing.T, sh Shape) {
	rng := rand.New(rand.NewPCG(3, 4))
	randn := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		return x
	}
	q, k, v := randn(sh.B*sh.H*sh.Sq*sh.D), randn(sh.B*sh.HKV*sh.Sk*sh.D), randn(sh.B*sh.HKV*sh.Sk*sh.VD())
	do := randn(sh.B * sh.H * sh.Sq * sh.VD())
	sinks := []float64{0.3, 6, -1.5, -20}
	const scale = 0.7
	// Row 0 keeps nothing; the others a window of up to three keys.
	mask := func(b, h, i, j int) bool { return i > 0 && j <= i && i-j < 3 }
	score := func(s float64, b, h, i, j int) float64 { return 3 * math.Tanh(s/3) }
	deriv := func(s float64, b, h, i, j int, aux func(string, int, float64)) float64 {
		th := math.Tanh(s / 3)
		return 1 - th*th
	}
	loss := func() float64 {
		o, _ := AttentionSinks(q, k, v, sh, scale, mask, score, sinks)
		l := 0.0
		for i := range o {
			l += o[i] * do[i]
		}
		return l
	}
	g := AttentionGradSinks(q, k, v, do, sh, scale, mask, score, deriv, nil, sinks)
	if len(g.DSinks) != sh.H {
		t.Fatalf("DSinks has %d values, want %d", len(g.DSinks), sh.H)
	}
	for name, c := range map[string]struct{ x, grad []float64 }{
		"q": {q, g.DQ}, "k": {k, g.DK}, "v": {v, g.DV}, "sinks": {sinks, g.DSinks}} {
		const eps = 1e-6
		worst := 0.0
		for i := range c.x {
			x0 := c.x[i]
			c.x[i] = x0 + eps
			lp := loss()
			c.x[i] = x0 - eps
			lm := loss()
			c.x[i] = x0
			fd := (lp - lm) / (2 * eps)
			worst = math.Max(worst, math.Abs(fd-c.grad[i])/math.Max(1, math.Abs(fd)))
		}
		if worst > 1e-7 {
			t.Errorf("d%s: worst error against finite differences %.3g", name, worst)
		}
	}
	// The sink far above the scores takes the mass and a real gradient;
	// the formula by hand from the forward's LSE and Δ = rowsum(dO∘O).
	o, lse := AttentionSinks(q, k, v, sh, scale, mask, score, sinks)
	for h := range sh.H {
		want := 0.0
		for b := range sh.B {
			for i := range sh.Sq {
				r := (b*sh.H+h)*sh.Sq + i
				delta := 0.0
				for d := range sh.VD() {
					delta += o[r*sh.VD()+d] * do[r*sh.VD()+d]
				}
				want -= math.Exp(sinks[h]-lse[r]) * delta
			}
		}
		if math.Abs(want-g.DSinks[h]) > 1e-12*math.Max(1, math.Abs(want)) {
			t.Errorf("dsink[%d] = %v, −Σ P_sink·Δ = %v", h, g.DSinks[h], want)
		}
	}
	if g.DSinks[1] == 0 {
		t.Error("dsink of the dominant sink is 0")
	}
	// Without sinks, no DSinks; with sinks of -inf, the plain gradients.
	if g0 := AttentionGrad(q, k, v, do, sh, scale, mask, score, deriv, nil); g0.DSinks != nil {
		t.Error("AttentionGrad returned DSinks")
	} else {
		inf := math.Inf(-1)
		g1 := AttentionGradSinks(q, k, v, do, sh, scale, mask, score, deriv, nil, []float64{inf, inf, inf, inf})
		for i := range g0.DQ {
			if g0.DQ[i] != g1.DQ[i] {
				t.Fatalf("-inf sinks: dQ[%d] = %v, without sinks %v", i, g1.DQ[i], g0.DQ[i])
			}
		}
		for h, x := range g1.DSinks {
			if x != 0 {
				t.Errorf("-inf sink %d has gradient %v", h, x)
			}
		}
	}
}
