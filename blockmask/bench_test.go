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

// BenchmarkAnalyticSlidingWindow1M is the whole analytic build (lowering,
// compiling, classifying, listing) of sliding_window(1024, 0) over 2^20
// positions in blocks of 128 for B=1, H=16 (the mask ignores h: one list
// set): the long-context target is under 50 ms. BenchmarkAnalyticCausal1M
// is the same for causal, whose lists hold half of the 8192×8192 blocks
// (index rows of 8192: the time is writing them).
func BenchmarkAnalyticSlidingWindow1M(b *testing.B) {
	benchAnalytic1M(b, "sliding_window(1024, 0)")
}

func BenchmarkAnalyticCausal1M(b *testing.B) { benchAnalytic1M(b, "causal") }

func benchAnalytic1M(b *testing.B, mask string) {
	p := loadProg(b, nil)
	mi := resolve(b, p, mask)
	sh := Shape{B: 1, H: 16, SeqQ: 1 << 20, SeqK: 1 << 20}
	b.ReportAllocs()
	for b.Loop() {
		bm, err := Analytic(p, mi, sh, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if bm.H != 1 || bm.NumQ != 8192 {
			b.Fatalf("H=%d NumQ=%d", bm.H, bm.NumQ)
		}
	}
}

// BenchmarkKeptPairs1M counts the pairs sliding_window(1024, 0) and
// chunked(1000) keep over 2^20 positions: the block mask, then the rows of
// the ~16k partial blocks (split at the sign changes of the window's
// affine comparisons; bisected for chunked's divisions).
func BenchmarkKeptPairs1M(b *testing.B) {
	p := loadProg(b, nil)
	for _, m := range []string{"sliding_window(1024, 0)", "chunked(1000)"} {
		b.Run(m, func(b *testing.B) {
			mi := resolve(b, p, m)
			for b.Loop() {
				if _, _, _, err := KeptPairs(p, mi, Shape{SeqQ: 1 << 20, SeqK: 1 << 20}, Options{}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDocument1M builds the block mask of document over 2^20
// positions in documents of 1000 tokens (EvaluateCPU: bounded with the
// ids' ranges, blocks evaluated only where the bounds leave them open).
func BenchmarkDocument1M(b *testing.B) {
	p := loadProg(b, nil)
	mi := resolve(b, p, "document")
	doc := make([]int32, 1<<20)
	for i := range doc {
		doc[i] = int32(i / 1000)
	}
	for b.Loop() {
		if _, err := EvaluateCPU(p, mi, Shape{SeqQ: 1 << 20, SeqK: 1 << 20}, Options{}, map[string]any{"doc": doc}); err != nil {
			b.Fatal(err)
		}
	}
}
