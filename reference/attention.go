// Package reference is naive attention in float64: the full score matrix,
// the mask and score mods applied element by element, softmax, then V. Tests
// compare every kernel against it.
package reference

import (
	"math"
	"runtime"
	"sync"
)

// Shape is the problem size. Tensors are contiguous: q is [B, H, Sq, D],
// k [B, HKV, Sk, D], v [B, HKV, Sk, DV], o [B, H, Sq, DV] and lse
// [B, H, Sq]. DV is V's head dim; 0 means D.
type Shape struct{ B, H, HKV, Sq, Sk, D, DV int }

// VD is V's and O's head dim: DV, or D when DV is 0.
func (s Shape) VD() int {
	if s.DV == 0 {
		return s.D
	}
	return s.DV
}

// MaskFunc reports whether query i of (b, h) may attend to key j.
type MaskFunc func(b, h, i, j int) bool

// ScoreFunc rewrites the scaled score s.
type ScoreFunc func(s float64, b, h, i, j int) float64

// Attention computes O and LSE (natural log). A row with no kept key gets
// O = 0 and LSE = -inf. mask and score may be nil; they are called from
// several goroutines at once.
func Attention(q, k, v []float64, sh Shape, scale float64, mask MaskFunc, score ScoreFunc) (o, lse []float64) {
	return AttentionSinks(q, k, v, sh, scale, mask, score, nil)
}

// AttentionSinks is Attention with learnable sinks (gpt-oss): sinks[h], a
// logit (natural log, unscaled), joins the softmax denominator of every row
// of head h without a value: O = Σ_j e^(s_ij) v_j / (e^sink + Σ_j e^(s_ij))
// and LSE = log(e^sink + Σ_j e^(s_ij)). A row that keeps no key gets O = 0
// and LSE = sink. nil sinks is Attention.
func AttentionSinks(q, k, v []float64, sh Shape, scale float64, mask MaskFunc, score ScoreFunc, sinks []float64) (o, lse []float64) {
	o = make([]float64, sh.B*sh.H*sh.Sq*sh.VD())
	lse = make([]float64, sh.B*sh.H*sh.Sq)
	group := sh.H / sh.HKV
	// Heads are independent: compute them in parallel.
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for b := 0; b < sh.B; b++ {
		for h := 0; h < sh.H; h++ {
			wg.Add(1)
			sem <- struct{}{}
			go func(b, h int) {
				defer func() { <-sem; wg.Done() }()
				head(q, k, v, o, lse, sh, scale, mask, score, sinks, b, h, h/group)
			}(b, h)
		}
	}
	wg.Wait()
	return o, lse
}

func head(q, k, v, o, lse []float64, sh Shape, scale float64, mask MaskFunc, score ScoreFunc, sinks []float64, b, h, hk int) {
	sink := math.Inf(-1) // no sink: e^sink = 0 adds nothing
	if sinks != nil {
		sink = sinks[h]
	}
	s := make([]float64, sh.Sk)
	keep := make([]bool, sh.Sk)
	dv := sh.VD()
	vrow := func(j int) []float64 { return v[((b*sh.HKV+hk)*sh.Sk+j)*dv:][:dv] }
	for i := 0; i < sh.Sq; i++ {
		qrow := q[((b*sh.H+h)*sh.Sq+i)*sh.D:][:sh.D]
		for j := 0; j < sh.Sk; j++ {
			keep[j] = mask == nil || mask(b, h, i, j)
			if !keep[j] {
				continue
			}
			s[j] = Dot(qrow, k[((b*sh.HKV+hk)*sh.Sk+j)*sh.D:][:sh.D]) * scale
			if score != nil {
				s[j] = score(s[j], b, h, i, j)
			}
		}
		orow := o[((b*sh.H+h)*sh.Sq+i)*dv:][:dv]
		lse[(b*sh.H+h)*sh.Sq+i] = SoftmaxRow(s, keep, sink, vrow, orow)
	}
}

// Dot is the dot product of a query and a key row, summed in order: what
// the reference scales (and passes to the score mod) as a row's score.
func Dot(qrow, krow []float64) float64 {
	dot := 0.0
	for d := range qrow {
		dot += qrow[d] * krow[d]
	}
	return dot
}

// SoftmaxRow finishes one row of AttentionSinks from its scores: s[j] is
// the (scaled, score-modded) score of key j where keep[j], vrow(j) its
// value row. It adds softmax(s)·V into orow (zeroed by the caller) and
// returns the LSE; a row that keeps nothing (and has no sink) gets O = 0
// and LSE = -inf. Callers that compute some rows only (a sampled check)
// get exactly AttentionSinks' values for them.
func SoftmaxRow(s []float64, keep []bool, sink float64, vrow func(j int) []float64, orow []float64) float64 {
	m := math.Inf(-1)
	for j, k := range keep {
		if k {
			m = math.Max(m, s[j])
		}
	}
	m = math.Max(m, sink)
	if math.IsInf(m, -1) {
		return math.Inf(-1)
	}
	sum := math.Exp(sink - m)
	for j, k := range keep {
		if !k {
			continue
		}
		p := math.Exp(s[j] - m)
		sum += p
		v := vrow(j)
		for d := range orow {
			orow[d] += p * v[d]
		}
	}
	for d := range orow {
		orow[d] /= sum
	}
	return m + math.Log(sum)
}

// Row names one query row: batch B, head H, position I.
type Row struct{ B, H, I int }
