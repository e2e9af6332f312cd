package blockmask

import "testing"

var benchMasks = []string{"none", "causal", "causal_bottom_right", "sliding_window(256, 0)", "prefix_lm(1024)", "chunked(512)"}

// BenchmarkAnalyticFill classifies the 64×64 blocks of 128×128 of an
// 8192×8192 mask with an analyzer compiled beforehand: the part that must
// stay under 0.1 ms and allocate nothing. BenchmarkAnalyticFill64 is the
// same with 64×64 blocks (a 128×128 grid).
func BenchmarkAnalyticFill(b *testing.B)   { benchFill(b, 8192, 128, benchMasks) }
func BenchmarkAnalyticFill64(b *testing.B) { benchFill(b, 8192, 64, benchMasks) }

// BenchmarkAnalyticFillMillion classifies the 8192×8192 blocks of 128×128
// (67M) of masks over 2^20 positions: the analysis is O(blocks) with a
// small constant (a few evaluations per class boundary of a block row,
// memset for the rest), well under 50 ms.
func BenchmarkAnalyticFillMillion(b *testing.B) {
	benchFill(b, 1<<20, 128, []string{"causal", "sliding_window(1024, 0)"})
}

func benchFill(b *testing.B, seq, block int, masks []string) {
	p := loadProg(b, nil)
	for _, m := range masks {
		b.Run(m, func(b *testing.B) {
			a, err := NewAnalyzer(p, resolve(b, p, m), Shape{SeqQ: seq, SeqK: seq})
			if err != nil {
				b.Fatal(err)
			}
			g, err := NewGrid(1, 1, seq, seq, block, block)
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

// BenchmarkFromClasses lists the 1024×1024 blocks of a 2^17 sliding
// window: bound by writing the index tensors (16 bytes a block; 1 GiB at
// 2^20 positions, where it takes about a second).
func BenchmarkFromClasses(b *testing.B) {
	p := loadProg(b, nil)
	a, err := NewAnalyzer(p, resolve(b, p, "sliding_window(1024, 0)"), Shape{SeqQ: 1 << 17, SeqK: 1 << 17})
	if err != nil {
		b.Fatal(err)
	}
	g, err := a.Grid(Options{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := FromClasses(g); err != nil {
			b.Fatal(err)
		}
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
