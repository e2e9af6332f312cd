package blockmask

import "testing"

var benchMasks = []string{"none", "causal", "causal_bottom_right", "sliding_window(256, 0)", "prefix_lm(1024)", "chunked(512)"}

// BenchmarkAnalyticFill classifies the 64×64 blocks of 128×128 of an
// 8192×8192 mask with an analyzer compiled beforehand: the part that must
// stay under 0.1 ms and allocate nothing. BenchmarkAnalyticFill64 is the
// same with 64×64 blocks (a 128×128 grid).
func BenchmarkAnalyticFill(b *testing.B)   { benchFill(b, 128) }
func BenchmarkAnalyticFill64(b *testing.B) { benchFill(b, 64) }

func benchFill(b *testing.B, block int) {
	p := loadProg(b, nil)
	for _, m := range benchMasks {
		b.Run(m, func(b *testing.B) {
			a, err := NewAnalyzer(p, resolve(b, p, m), Shape{SeqQ: 8192, SeqK: 8192})
			if err != nil {
				b.Fatal(err)
			}
			g, err := NewGrid(1, 1, 8192, 8192, block, block)
			if err != nil {
				b.Fatal(err)
			}
			if err := a.Fill(g); err != nil { // warm up: sizes the column table
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := a.Fill(g); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAnalytic is the whole analytic build at 8192: lowering, passes,
// compiling, classifying and listing.
func BenchmarkAnalytic(b *testing.B) {
	p := loadProg(b, nil)
	for _, m := range benchMasks {
		b.Run(m, func(b *testing.B) {
			mi := resolve(b, p, m)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Analytic(p, mi, Shape{SeqQ: 8192, SeqK: 8192}, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
