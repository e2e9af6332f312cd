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
// query heads sharing a kv head), DAux by aux tensor name, and DSinks
// ([H]) the gradients of the sink logits (AttentionGradSinks; nil without
// sinks).
type Grads struct {
	DQ, DK, DV []float64
	DAux       map[string][]float64
	DSinks     []float64
}

// AttentionGrad computes the gradients of Attention(q, k, v, sh, scale,
// mask, score) for the output gradient do ([B, H, Sq, DV], like O) in
// float64:
//
//	P = softmax(score(scale·q·kᵀ)) over kept pairs, O = P·v,
//	dP = dO·vᵀ, Δ = rowsum(dO∘O), dS = P∘(dP − Δ),
//	dQ = scale·(dS∘score')·k, dK = scale·(dS∘score')ᵀ·q, dV = Pᵀ·dO,
//	dAux[idx] = Σ dS · ∂score/∂aux[idx].
//
// deriv is needed when score is set; auxLens sizes DAux. A row that keeps
// nothing contributes nothing (its O is 0 and its gradients are 0).
func AttentionGrad(q, k, v, do []float64, sh Shape, scale float64, mask MaskFunc, score ScoreFunc, deriv ScoreDerivFunc, auxLens map[string]int) Grads {
	return AttentionGradSinks(q, k, v, do, sh, scale, mask, score, deriv, auxLens, nil)
}

// AttentionGradSinks is AttentionGrad for AttentionSinks: sinks[h] joins
// the softmax denominator of head h's rows as a score with no value, so
// P_ij = e^(s_ij − LSE) and P_sink = e^(sink − LSE) sum to 1. With
// dP_sink = 0 (no value), Δ = Σ_j P_j dP_j = rowsum(dO∘O) as without
// sinks, dQ, dK, dV keep their formulas, and
//
//	dsink[h] = Σ_{b,i} P_sink·(0 − Δ) = −Σ_{b,i} e^(sink[h] − LSE_bhi)·Δ_bhi.
//
// A row that keeps nothing has P_sink = 1 and O = 0, so Δ = 0: it adds
// nothing. nil sinks is AttentionGrad (DSinks nil).
func AttentionGradSinks(q, k, v, do []float64, sh Shape, scale float64, mask MaskFunc, score ScoreFunc, deriv ScoreDerivFunc, auxLens map[string]int, sinks []float64) Grads {
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
	// Each job's sink gradients ([H], only its group's heads), summed in
	// job order below.
	localSinks := make([][]float64, len(jobs))
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
			var dsinks []float64
			if sinks != nil {
				dsinks = make([]float64, sh.H)
			}
			for h := jb.hk * group; h < (jb.hk+1)*group; h++ {
				sink := math.Inf(-1)
				if sinks != nil {
					sink = sinks[h]
				}
				ds := headGrad(q, k, v, do, g, daux, sh, scale, mask, score, deriv, jb.b, h, jb.hk, sink)
				if dsinks != nil {
					dsinks[h] = ds
				}
			}
			local[ji] = daux
			localSinks[ji] = dsinks
		}()
	}
	wg.Wait()
	if sinks != nil {
		g.DSinks = make([]float64, sh.H)
		for _, ds := range localSinks {
			for h, x := range ds {
				g.DSinks[h] += x
			}
		}
	}
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
// head; dK, dV of its kv head) and daux, and returns the gradient of its
// sink logit (−Σ_i P_sink·Δ; 0 when sink is −inf, no sink).
func headGrad(q, k, v, do []float64, g Grads, daux map[string][]float64, sh Shape, scale float64,
	mask MaskFunc, score ScoreFunc, deriv ScoreDerivFunc, b, h, hk int, sink float64) (dsink float64) {
	s := make([]float64, sh.Sk)   // modded scores
	raw := make([]float64, sh.Sk) // scale·q·k, the score mod's input
	p := make([]float64, sh.Sk)
	keep := make([]bool, sh.Sk)
	// Rows of Q, K and their gradients are D long; of V, dO and dV, DV.
	row := func(x []float64, heads, seq, hh, i int) []float64 {
		return x[((b*heads+hh)*seq+i)*sh.D:][:sh.D]
	}
	dv := sh.VD()
	vrowOf := func(x []float64, heads, seq, hh, i int) []float64 {
		return x[((b*heads+hh)*seq+i)*dv:][:dv]
	}
	for i := 0; i < sh.Sq; i++ {
		qrow := row(q, sh.H, sh.Sq, h, i)
		dorow := vrowOf(do, sh.H, sh.Sq, h, i)
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
		m = math.Max(m, sink)
		if math.IsInf(m, -1) {
			continue // nothing kept (or every score -inf) and no sink: no gradient
		}
		// The sink is one more score of the row's softmax, with no value.
		sum := math.Exp(sink - m)
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
			vrow := vrowOf(v, sh.HKV, sh.Sk, hk, j)
			for d := range vrow {
				dp[j] += dorow[d] * vrow[d]
			}
			delta += p[j] * dp[j]
		}
		// dP_sink = 0: dsink += P_sink·(0 − Δ).
		dsink -= math.Exp(sink-m) / sum * delta
		dqrow := row(g.DQ, sh.H, sh.Sq, h, i)
		for j := 0; j < sh.Sk; j++ {
			if p[j] == 0 {
				continue
			}
			dvrow := vrowOf(g.DV, sh.HKV, sh.Sk, hk, j)
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
	return dsink
}
