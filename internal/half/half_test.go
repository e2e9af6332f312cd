package half

import (
	"math"
	"math/rand/v2"
	"testing"
)

func isNaN32(f float32) bool { return f != f }

// Every 16-bit pattern decodes and encodes back to itself (NaNs: stay NaN,
// and quiet NaNs come back bit-exact).
func TestRoundTripAll(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		for _, c := range []struct {
			name  string
			dec   func(uint16) float32
			enc   func(float32) uint16
			rnd   func(float64) float64
			quiet uint16
		}{
			{"bf16", BF16ToF32, F32ToBF16, RoundBF16, 0x40},
			{"f16", F16ToF32, F32ToF16, RoundF16, 0x200},
		} {
			f := c.dec(h)
			got := c.enc(f)
			if isNaN32(f) {
				if !isNaN32(c.dec(got)) || got&0x8000 != h&0x8000 {
					t.Fatalf("%s %#04x: NaN came back as %#04x", c.name, h, got)
				}
				if h&c.quiet != 0 && got != h {
					t.Fatalf("%s %#04x: quiet NaN came back as %#04x", c.name, h, got)
				}
				if !math.IsNaN(c.rnd(float64(f))) {
					t.Fatalf("%s %#04x: Round lost NaN", c.name, h)
				}
				continue
			}
			if got != h {
				t.Fatalf("%s %#04x -> %v -> %#04x", c.name, h, f, got)
			}
			if r := c.rnd(float64(f)); r != float64(f) || math.Signbit(r) != math.Signbit(float64(f)) {
				t.Fatalf("%s %#04x: Round(%v) = %v, want itself", c.name, h, f, r)
			}
		}
	}
}

func TestTies(t *testing.T) {
	p := math.Ldexp
	cases := []struct {
		name string
		rnd  func(float64) float64
		in   float64
		want float64
	}{
		{"bf16 tie down to even", RoundBF16, 1 + p(1, -8), 1},
		{"bf16 tie up to even", RoundBF16, 1 + 3*p(1, -8), 1 + p(1, -6)},
		{"bf16 above tie", RoundBF16, 1 + p(1, -8) + p(1, -40), 1 + p(1, -7)}, // float32 would double-round to 1
		{"bf16 below tie", RoundBF16, 1 + p(1, -8) - p(1, -40), 1},
		{"bf16 negative tie", RoundBF16, -(1 + p(1, -8)), -1},
		{"bf16 carry into exponent", RoundBF16, 2 - p(1, -9), 2},
		{"bf16 overflow", RoundBF16, math.MaxFloat32, math.Inf(1)},
		{"bf16 max", RoundBF16, bf16Max, bf16Max},
		{"bf16 just below overflow tie", RoundBF16, bf16Max + p(1, 127-9), bf16Max},
		{"bf16 overflow tie", RoundBF16, bf16Max + p(1, 127-8), math.Inf(1)},
		{"bf16 min subnormal", RoundBF16, p(1, -133), p(1, -133)},
		{"bf16 subnormal tie to zero", RoundBF16, p(1, -134), 0},
		{"bf16 subnormal tie up", RoundBF16, 3 * p(1, -134), p(1, -132)},
		{"bf16 -tiny", RoundBF16, -p(1, -140), math.Copysign(0, -1)},
		{"f16 tie down", RoundF16, 1 + p(1, -11), 1},
		{"f16 tie up", RoundF16, 1 + 3*p(1, -11), 1 + p(1, -9)},
		{"f16 65504", RoundF16, 65504, 65504},
		{"f16 below overflow tie", RoundF16, 65519.99, 65504},
		{"f16 overflow tie", RoundF16, 65520, math.Inf(1)},
		{"f16 -overflow", RoundF16, -1e6, math.Inf(-1)},
		{"f16 min subnormal", RoundF16, p(1, -24), p(1, -24)},
		{"f16 subnormal tie to zero", RoundF16, p(1, -25), 0},
		{"f16 subnormal above tie", RoundF16, p(1, -25) + p(1, -60), p(1, -24)},
		{"f16 subnormal to normal", RoundF16, p(1, -14) - p(1, -26), p(1, -14)},
		{"f32 tie", RoundF32, 1 + p(1, -24), 1},
		{"f32 tie up", RoundF32, 1 + 3*p(1, -24), 1 + p(1, -22)},
		{"f32 overflow", RoundF32, 1e39, math.Inf(1)},
		{"f32 subnormal tie", RoundF32, p(1, -150), 0},
		{"inf", RoundF16, math.Inf(-1), math.Inf(-1)},
	}
	for _, c := range cases {
		got := c.rnd(c.in)
		if got != c.want || math.Signbit(got) != math.Signbit(c.want) {
			t.Errorf("%s: round(%v) = %v, want %v", c.name, c.in, got, c.want)
		}
	}
	// Bit-level conversions agree on ties.
	if h := F32ToBF16(float32(1 + p(1, -8))); h != 0x3f80 {
		t.Errorf("F32ToBF16 tie = %#04x, want 0x3f80", h)
	}
	if h := F32ToBF16(float32(1 + 3*p(1, -8))); h != 0x3f82 {
		t.Errorf("F32ToBF16 tie up = %#04x, want 0x3f82", h)
	}
	if h := F32ToF16(float32(1 + p(1, -11))); h != 0x3c00 {
		t.Errorf("F32ToF16 tie = %#04x, want 0x3c00", h)
	}
	if h := F32ToF16(65520); h != 0x7c00 {
		t.Errorf("F32ToF16(65520) = %#04x, want inf", h)
	}
	if h := F32ToF16(float32(p(1, -25))); h != 0 {
		t.Errorf("F32ToF16(2^-25) = %#04x, want 0", h)
	}
}

// For random inputs, Round* gives a representable value no farther than
// its neighbours, with ties to the even one; and the bit conversions agree
// with Round* on float32 inputs.
func TestNearest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type format struct {
		name string
		rnd  func(float64) float64
		dec  func(uint16) float32
		enc  func(float32) uint16
	}
	for _, f := range []format{{"bf16", RoundBF16, BF16ToF32, F32ToBF16}, {"f16", RoundF16, F16ToF32, F32ToF16}} {
		for i := 0; i < 200000; i++ {
			// Random magnitudes spanning subnormals to overflow.
			x := math.Ldexp(r.Float64()+0.5, r.IntN(300)-150)
			if r.IntN(2) == 0 {
				x = -x
			}
			got := f.rnd(x)
			h := f.enc(float32(got))
			if float64(f.dec(h)) != got {
				t.Fatalf("%s: round(%v) = %v not representable", f.name, x, got)
			}
			if !math.IsInf(got, 0) {
				for _, n := range []uint16{h - 1, h + 1} {
					nv := float64(f.dec(n))
					if math.IsNaN(nv) || math.Signbit(nv) != math.Signbit(got) && nv != 0 {
						continue
					}
					d0, d1 := math.Abs(got-x), math.Abs(nv-x)
					if d1 < d0 || d1 == d0 && h&1 == 1 {
						t.Fatalf("%s: round(%v) = %v, but %v is nearer or even", f.name, x, got, nv)
					}
				}
			}
			x32 := float32(x)
			if a, b := f.rnd(float64(x32)), float64(f.dec(f.enc(x32))); a != b {
				t.Fatalf("%s: Round(%v) = %v but bits conversion gives %v", f.name, x32, a, b)
			}
		}
	}
}
