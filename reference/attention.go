// Package reference is naive attention in float64: the full score matrix,
// the mask and score mods applied element by element, softmax, then V. Tests
// compare every kernel against it.
package reference

import (
	"math"
	"runtime"
	"sync"
)

// Shape is the problem size. Tensors are contiguous: q and o are
// [B, H, Sq, D], k and v are [B, HKV, Sk, D], lse is [B, H, Sq].
type Shape struct{ B, H, HKV, Sq, Sk, D int }

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
	o = make([]float64, sh.B*sh.H*sh.Sq*sh.D)
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
	{
		{
			for i := 0; i < sh.Sq; i++ {
				qrow := q[((b*sh.H+h)*sh.Sq+i)*sh.D:][:sh.D]
				m := math.Inf(-1)
				for j := 0; j < sh.Sk; j++ {
					keep[j] = mask == nil || mask(b, h, i, j)
					if !keep[j] {
						continue
					}
					krow := k[((b*sh.HKV+hk)*sh.Sk+j)*sh.D:][:sh.D]
					dot := 0.0
					for d := range qrow {
						dot += qrow[d] * krow[d]
					}
					s[j] = dot * scale
					if score != nil {
						s[j] = score(s[j], b, h, i, j)
					}
					m = math.Max(m, s[j])
				}
				m = math.Max(m, sink)
				orow := o[((b*sh.H+h)*sh.Sq+i)*sh.D:][:sh.D]
				li := (b*sh.H+h)*sh.Sq + i
				if math.IsInf(m, -1) {
					lse[li] = math.Inf(-1)
					continue
				}
				sum := math.Exp(sink - m)
				for j := 0; j < sh.Sk; j++ {
					if !keep[j] {
						continue
					}
					p := math.Exp(s[j] - m)
					sum += p
					vrow := v[((b*sh.HKV+hk)*sh.Sk+j)*sh.D:][:sh.D]
					for d := range orow {
						orow[d] += p * vrow[d]
					}
				}
				for d := range orow {
					orow[d] /= sum
				}
				lse[li] = m + math.Log(sum)
			}
		}
	}
}
