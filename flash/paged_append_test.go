package flash

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRotateForms checks the reference rotation on a hand-worked row, in
// both forms: a rotary dim of 4 leaves the fifth column, NeoX pairs
// columns (0, 2) and (1, 3), GPT-J (0, 1) and (2, 3); and with RoPE's
// angles, the dot product of a query rotated at position m and a key at n
// depends on m − n only.
func TestRotateForms(t *testing.T) {
	c, s := []float64{0, 0, 0.6, 0.8}, []float64{0, 0, 0.8, -0.6} // position 1
	for _, tc := range []struct {
		form RotaryForm
		want []float64
	}{
		{RotaryNeoX, []float64{1*0.6 - 3*0.8, 2*0.8 - 4*-0.6, 3*0.6 + 1*0.8, 4*0.8 + 2*-0.6, 5}},
		{RotaryGPTJ, []float64{1*0.6 - 2*0.8, 2*0.6 + 1*0.8, 3*0.8 - 4*-0.6, 4*0.8 + 3*-0.6, 5}},
	} {
		x := []float64{1, 2, 3, 4, 5}
		(&appendCall{rotary: tc.form, rotaryDim: 4}).rotate(x, 1, c, s)
		for i := range x {
			if math.Abs(x[i]-tc.want[i]) > 1e-12 {
				t.Errorf("%v: rotated %v, want %v", tc.form, x, tc.want)
				break
			}
		}
	}
	const rd, positions = 8, 40
	cos, sin := make([]float64, positions*rd/2), make([]float64, positions*rd/2)
	for p := range positions {
		for i := range rd / 2 {
			theta := float64(p) * math.Pow(10000, -2*float64(i)/rd)
			cos[p*rd/2+i], sin[p*rd/2+i] = math.Cos(theta), math.Sin(theta)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	q, k := make([]float64, rd), make([]float64, rd)
	for i := range q {
		q[i], k[i] = rng.NormFloat64(), rng.NormFloat64()
	}
	for _, form := range []RotaryForm{RotaryNeoX, RotaryGPTJ} {
		a := &appendCall{rotary: form, rotaryDim: rd}
		dot := func(m, n int) float64 {
			qm, kn := slices.Clone(q), slices.Clone(k)
			a.rotate(qm, m, cos, sin)
			a.rotate(kn, n, cos, sin)
			v := 0.0
			for i := range qm {
				v += qm[i] * kn[i]
			}
			return v
		}
		if d1, d2 := dot(7, 3), dot(30, 26); math.Abs(d1-d2) > 1e-9 {
			t.Errorf("%v: q·k at positions (7, 3) is %g, at (30, 26) %g: not relative", form, d1, d2)
		}
	}
}
