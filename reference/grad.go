package reference

import (
	"maps"
	"math"
	"runtime"
	"slices"
	"sync"
)

// ScoreDerivFunc is the derivative of a score mod at (s, b, h, i, j): it
// returns d score / d s, and calls aux once per float aux element the score
// read, with d score / d tensor[idx] (a mod without float aux never calls
// it). It is called from several goroutines at once.
type ScoreDerivFunc func(s float64, b, h, i, j int, aux func(tensor string, idx int, d float64)) float64

// Grads are the gradients of a loss L with respect to attention's inputs,
// given dO = dL/dO: DQ like q, DK and DV like k and v (summed over the
// query heads sharing a kv head), DAux by aux tensor name.
type Grads struct {
	DQ, DK, DV []float64
	DAux       map[string][]float64
}

// AttentionGrad computes the gradients of Attention(q, k, v, sh, scale,
// mask, score) for the output gradient do ([B, H, Sq, D]) in float64:
//
//	P = softmax(score(scale·q·kᵀ)) over kept pairs, O = P·v,
//	dP = dO·vᵀ, Δ = rowsum(dO∘O), dS = P∘(dP − Δ),
//	dQ = scale·(dS∘score')·k, dK = scale·(dS∘score')ᵀ·q, dV = Pᵀ·dO,
//	dAux[idx] = Σ dS · ∂score/∂aux[idx].
//
// deriv is needed when score is set; auxLens sizes DAux. A row that keeps
// nothing contributes nothing (its O is 0 and its gradients are 0).
func AttentionGrad(q, k, v, do []float64, sh Shape, scale float64, mask MaskFunc, score ScoreFunc, deriv ScoreDerivFunc, auxLens map[string]int) Grads {
	g := Grads{
		DQ:   make([]float64, len(q)),
		DK:   make([]float64, len(k)),
		DV:   make([]float64, len(v)),
		DAux: map[string][]float64{},
	}
	for name, n := range auxLens {
		g.DAux[name] = make([]float64, n)
	}
	group := sh.H / sh.HKV
	// One goroutine per kv head: it owns that head's dK and dV, so the query
	// heads of a group are summed without locks, in a fixed order. Aux
	// gradients go to per-goroutine tables, merged in order below, so the
	// result does not depend on scheduling.
	type job struct{ b, hk int }
	var jobs []job
	for b := 0; b < sh.B; b++ {
		for hk := 0; hk < sh.HKV; hk++ {
			jobs = append(jobs, job{b, hk})
		}
	}
	local := make([]map[string][]float64, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for ji, jb := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			daux := map[string][]float64{}
			for name, n := range auxLens {
				daux[name] = make([]float64, n)
			}
			for h := jb.hk * group; h < (jb.hk+1)*group; h++ {
				headGrad(q, k, v, do, g, daux, sh, scale, mask, score, deriv, jb.b, h, jb.hk)
			}
			local[ji] = daux
		}()
	}
	wg.Wait()
	for _, daux := range local {
		for _, name := range slices.Sorted(maps.Keys(daux)) {
			for i, x := range daux[name] {
				g.DAux[name][i] += x
			}
		}
	}
	return g
}

// headGrad adds the gradients of one (batch, query head) into g (dQ of the
// head; dK, dV of its kv head) and daux.
func headGrad(q, k, v, do []float64, g Grads, daux map[string][]float64, sh Shape, scale float64,
	mask MaskFunc, score ScoreFunc, deriv ScoreDerivFunc, b, h, hk int) {
	s := make([]float64, sh.Sk)   // modded scores
	raw := make([]float64, sh.Sk) // scale·q·k, the score mod's input
	p := make([]float64, sh.Sk)
	keep := make([]bool, sh.Sk)
	row := func(x []float64, heads, seq, hh, i int) []float64 {
		return x[((b*heads+hh)*seq+i)*sh.D:][:sh.D]
	}
	for i := 0; i < sh.Sq; i++ {
		qrow := row(q, sh.H, sh.Sq, h, i)
		dorow := row(do, sh.H, sh.Sq, h, i)
		m := math.Inf(-1)
		for j := 0; j < sh.Sk; j++ {
			keep[j] = mask == nil || mask(b, h, i, j)
			if !keep[j] {
				continue
			}
			krow := row(k, sh.HKV, sh.Sk, hk, j)
			dot := 0.0
			for d := range qrow {
				dot += qrow[d] * krow[d]
			}
			raw[j] = dot * scale
			s[j] = raw[j]
			if score != nil {
				s[j] = score(raw[j], b, h, i, j)
			}
			m = math.Max(m, s[j])
		}
		if math.IsInf(m, -1) {
			continue // nothing kept (or every score -inf): no gradient
		}
		sum := 0.0
		for j := 0; j < sh.Sk; j++ {
			p[j] = 0
			if keep[j] {
				p[j] = math.Exp(s[j] - m)
				sum += p[j]
			}
		}
		// dP_j = dO·v_j; Δ = Σ_j P_j dP_j, which equals dO·O.
		dp := make([]float64, sh.Sk)
		delta := 0.0
		for j := 0; j < sh.Sk; j++ {
			if p[j] == 0 {
				continue
			}
			p[j] /= sum
			vrow := row(v, sh.HKV, sh.Sk, hk, j)
			for d := range vrow {
				dp[j] += dorow[d] * vrow[d]
			}
			delta += p[j] * dp[j]
		}
		dqrow := row(g.DQ, sh.H, sh.Sq, h, i)
		for j := 0; j < sh.Sk; j++ {
			if p[j] == 0 {
				continue
			}
			dvrow := row(g.DV, sh.HKV, sh.Sk, hk, j)
			for d := range dvrow {
				dvrow[d] += p[j] * dorow[d]
			}
			ds := p[j] * (dp[j] - delta) // dL/d score output
			if score != nil {
				ds *= deriv(raw[j], b, h, i, j, func(tensor string, idx int, d float64) {
					if t := daux[tensor]; idx >= 0 && idx < len(t) {
						t[idx] += p[j] * (dp[j] - delta) * d
					}
				})
			}
			krow := row(k, sh.HKV, sh.Sk, hk, j)
			dkrow := row(g.DK, sh.HKV, sh.Sk, hk, j)
			for d := range qrow {
				dqrow[d] += scale * ds * krow[d]
				dkrow[d] += scale * ds * qrow[d]
			}
		}
	}
}
