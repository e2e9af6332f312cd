package blockmask

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/runtime/cpu"
)

// TestBlockMaskMatchesGrid: the analytic builder that bisects rectangles of
// blocks (Analyzer.BlockMask, what Analytic and Build use) gives exactly
// the block mask of the dense path (Analyzer.Grid, then FromClasses), for
// stdlib and random masks, odd sequence lengths and block sizes, and masks
// reading b and h; where one declines, so does the other.
func TestBlockMaskMatchesGrid(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const n = 200
	var srcs []string
	for i := range n {
		g := &genMask{r: r, useBH: i%4 == 0}
		srcs = append(srcs, fmt.Sprintf("mask rq%d(b, h, q_idx, kv_idx) {\n    return %s\n}\n", i, g.boolExpr(1+r.IntN(4))))
	}
	p := loadProg(t, map[string]string{"rq.fa": strings.Join(srcs, "\n")})
	exprs := []string{"none", "causal", "causal_bottom_right", "sliding_window(1024, 0)", "sliding_window(3, 70)", "prefix_lm(300)", "chunked(77)",
		"and_masks(causal, sliding_window(200, 0))", "or_masks(prefix_lm(64), sliding_window(10, 10))", "not_mask(causal)"}
	for i := range n {
		exprs = append(exprs, fmt.Sprintf("rq%d", i))
	}
	decided := 0
	for i, expr := range exprs {
		sh, opts := randGeometry(r, 400)
		if i%3 == 0 { // larger grids, blocks of 1 to 64
			sh = Shape{SeqQ: 1 + r.IntN(3000), SeqK: 1 + r.IntN(3000)}
			opts = Options{BlockQ: 1 + r.IntN(64), BlockK: 1 + r.IntN(64)}
		}
		sh.B, sh.H = 2, 3
		name := fmt.Sprintf("%s seq %d×%d blocks %d×%d", expr, sh.SeqQ, sh.SeqK, opts.BlockQ, opts.BlockK)
		a, err := NewAnalyzer(p, resolve(t, p, expr), sh)
		if err != nil {
			if !errors.Is(err, ErrNotAnalyzable) {
				t.Fatalf("%s: %v", name, err)
			}
			continue
		}
		got, gotErr := a.BlockMask(opts)
		g, wantErr := a.Grid(opts)
		var want *BlockMask
		if wantErr == nil {
			want, wantErr = FromClasses(g)
		}
		switch {
		case (gotErr == nil) != (wantErr == nil):
			t.Errorf("%s: bisected: %v; dense: %v", name, gotErr, wantErr)
		case gotErr != nil:
			if !errors.Is(gotErr, ErrNotAnalyzable) {
				t.Errorf("%s: %v", name, gotErr)
			}
		case !got.Equal(want):
			t.Errorf("%s: bisected vs dense: %s (widths %d, %d vs %d, %d)", name, Diff(got, want), got.KVWidth, got.QWidth, want.KVWidth, want.QWidth)
		default:
			decided++
			if err := got.Validate(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	if decided < len(exprs)*2/3 {
		t.Errorf("only %d of %d masks decided", decided, len(exprs))
	}
}

// TestCompactLists: index rows are as long as the longest list, so the
// tensors of a sliding window over a million positions take
// O(rows × window) memory (a few hundred KiB), not NumQ × NumK (a GiB),
// and the density comes from the lists. Sizes, not times, are checked.
func TestCompactLists(t *testing.T) {
	p := loadProg(t, nil)
	const s = 1 << 20
	sh := Shape{B: 1, H: 16, SeqQ: s, SeqK: s}
	bm, method, err := Build(p, resolve(t, p, "sliding_window(1024, 0)"), sh, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if method != MethodAnalytic || bm.B != 1 || bm.H != 1 || bm.NumQ != 8192 || bm.NumK != 8192 {
		t.Fatalf("%s, B=%d H=%d, %d×%d blocks", method, bm.B, bm.H, bm.NumQ, bm.NumK)
	}
	// Each q block qb sees up to 7 full blocks (qb-7 to qb-1) and 2
	// partial ones (qb-8 and qb).
	if bm.KVWidth != 7 || bm.QWidth != 7 {
		t.Errorf("widths %d, %d, want 7, 7", bm.KVWidth, bm.QWidth)
	}
	rows := bm.B * bm.H * bm.NumQ
	for _, x := range [][]int32{bm.KVIndices, bm.FullKVIndices} {
		if len(x) != rows*bm.KVWidth {
			t.Errorf("kv index tensor of %d, want rows × width = %d", len(x), rows*bm.KVWidth)
		}
	}
	for _, x := range [][]int32{bm.QIndices, bm.FullQIndices} {
		if len(x) != bm.NumK*bm.QWidth {
			t.Errorf("q index tensor of %d, want rows × width = %d", len(x), bm.NumK*bm.QWidth)
		}
	}
	if err := bm.Validate(); err != nil {
		t.Fatal(err)
	}
	_, partial, full := bm.Counts()
	if partial != 2*8192-8 || full != 7*8192-28 {
		t.Errorf("%d partial, %d full blocks", partial, full)
	}
	area := int64(partial+full) * 128 * 128
	if got := bm.KeptArea(); got != area {
		t.Errorf("kept area %d, want %d", got, area)
	}
	if d, want := bm.Density(), float64(area)/float64(s)/float64(s); d != want {
		t.Errorf("density %v, want %v", d, want)
	}
	// The same mask built by evaluation: the same compact lists.
	small := Shape{SeqQ: 2000, SeqK: 1700}
	mi := resolve(t, p, "sliding_window(100, 0)")
	an, err := Analytic(p, mi, small, Options{BlockQ: 16, BlockK: 16})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := EvaluateCPU(p, mi, small, Options{BlockQ: 16, BlockK: 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Blocks of 16, a window of 100: 5 full blocks and 3 partial ones a row.
	if !an.Equal(ev) || an.KVWidth != 5 || an.QWidth != 5 {
		t.Errorf("analytic vs evaluated (widths %d×%d, %d×%d): %s", an.KVWidth, an.QWidth, ev.KVWidth, ev.QWidth, Diff(an, ev))
	}
	// Saved and loaded with its widths; FlexAttention's full rows load as
	// they are, and compact again to the same block mask.
	dir := filepath.Join(t.TempDir(), "bm")
	if err := an.Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir, 0, 0, 0, 0)
	if err != nil || !back.Equal(an) {
		t.Fatalf("round trip: %v %s", err, Diff(back, an))
	}
	full0, err := an.WithWidths(an.NumK, an.NumQ)
	if err != nil {
		t.Fatal(err)
	}
	if err := full0.Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err = Load(dir, 0, 0, 0, 0)
	if err != nil || back.KVWidth != an.NumK || back.QWidth != an.NumQ || !back.Equal(full0) {
		t.Fatalf("full rows: %v, widths %d, %d", err, back.KVWidth, back.QWidth)
	}
	if c, err := back.WithWidths(0, 0); err != nil || !c.Equal(an) {
		t.Errorf("compacted again: %v %s", err, Diff(c, an))
	}
}

// TestKeptPairs counts kept pairs through the block mask (full blocks by
// area, partial ones row by row or by tiles) and checks the counts against
// counting every pair, for stdlib, document and random masks.
func TestKeptPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	const n = 120
	var srcs []string
	for i := range n {
		g := &genMask{r: r, useBH: i%4 == 0}
		srcs = append(srcs, fmt.Sprintf("mask rp%d(b, h, q_idx, kv_idx) {\n    return %s\n}\n", i, g.boolExpr(1+r.IntN(4))))
	}
	srcs = append(srcs, "mask floaty(b, h, q_idx, kv_idx) {\n    return f32(q_idx) * 0.7 >= f32(kv_idx)\n}\n")
	p := loadProg(t, map[string]string{"rp.fa": strings.Join(srcs, "\n")})
	methods := map[Method]int{}
	for i := range n + 40 {
		sh, opts := randGeometry(r, 200)
		var expr string
		var aux map[string]any
		switch {
		case i < n:
			expr = fmt.Sprintf("rp%d", i)
		case i < n+30:
			c := randStd(r, sh)
			expr, aux = c.expr, c.aux
		default:
			expr = "floaty"
		}
		sh.B, sh.H = 2, 2
		mi := resolve(t, p, expr)
		name := fmt.Sprintf("%s seq %d×%d blocks %d×%d", expr, sh.SeqQ, sh.SeqK, opts.BlockQ, opts.BlockK)
		ref, refErr := BruteForce(p, mi, sh, opts, aux)
		got, bm, method, err := KeptPairs(p, mi, sh, opts, aux)
		if refErr != nil {
			if err == nil {
				t.Errorf("%s: brute force failed (%v), KeptPairs did not", name, refErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		methods[method]++
		if !bm.Equal(ref) {
			t.Errorf("%s: block mask: %s", name, Diff(bm, ref))
		}
		want := countEvery(t, p, expr, sh, aux, bm.B, bm.H)
		for m := range want {
			if got[m] != want[m] {
				t.Errorf("%s (%s): mask %d keeps %d pairs, counted %d", name, method, m, want[m], got[m])
			}
		}
	}
	if methods[MethodAnalytic] < n/2 || methods[MethodEvaluatedCPU] < 10 {
		t.Errorf("methods used: %v", methods)
	}
	// A million positions: sliding_window(1024, 0) keeps min(q+1, 1025)
	// keys of each row q.
	const s = 1 << 20
	got, bm, method, err := KeptPairs(p, resolve(t, p, "sliding_window(1024, 0)"), Shape{H: 16, SeqQ: s, SeqK: s}, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	for q := range int64(s) {
		want += min(q+1, 1025)
	}
	if method != MethodAnalytic || len(got) != 1 || got[0] != want || bm.NumQ != 8192 {
		t.Errorf("1M sliding window: %s %v, want [%d]", method, got, want)
	}
}

// countEvery counts the kept pairs of each of the b×h masks pair by pair.
func countEvery(t *testing.T, p *lang.Program, expr string, sh Shape, aux map[string]any, nb, nh int) []int64 {
	t.Helper()
	mi := resolve(t, p, expr)
	out := make([]int64, nb*nh)
	args, err := inputArgs(mi, sh, aux)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[int]any{paramSeqQ: int64(sh.SeqQ), paramSeqK: int64(sh.SeqK), paramBatch: int64(sh.B), paramHeads: int64(sh.H)}
	m, _, err := modFunc(p, mi, 0, 0, consts)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := cpu.Prepare(m, "mask")
	if err != nil {
		t.Fatal(err)
	}
	for b := range nb {
		for h := range nh {
			for q := range sh.SeqQ {
				for kv := range sh.SeqK {
					res, err := fn.Call(append([]any{b, h, q, kv, sh.SeqQ, sh.SeqK, sh.B, sh.H}, args...)...)
					if err != nil {
						t.Fatal(err)
					}
					if res[0].Vals[0] != 0 {
						out[b*nh+h]++
					}
				}
			}
		}
	}
	return out
}

// TestEvaluateBounded: for masks reading aux tensors, EvaluateCPU bounds
// rectangles with the data's ranges and evaluates only undecided blocks;
// the result must be what evaluating every block gives, for sorted and
// scattered document ids, aux tensors shorter than the sequences (reads
// past them give 0), bool and 2-D aux tensors, and masks mixing data and
// positions or reading h.
func TestEvaluateBounded(t *testing.T) {
	p := loadProg(t, map[string]string{"aux.fa": `
mask doc_causal_h(b, h, q_idx, kv_idx, doc: tensor[i32]) {
    return doc[q_idx] == doc[kv_idx] && kv_idx <= q_idx + 4 * h
}
mask keep_keys(b, h, q_idx, kv_idx, keep: tensor[bool]) {
    return keep[kv_idx] || q_idx == kv_idx
}
mask pairs2d(b, h, q_idx, kv_idx, ids: tensor[i32][2, seqlen_k]) {
    return ids[0, q_idx % seqlen_k] <= ids[1, kv_idx]
}
mask floaty_doc(b, h, q_idx, kv_idx, w: tensor[f32]) {
    return w[q_idx] > 0.5
}
`})
	r := rand.New(rand.NewPCG(41, 42))
	docs := func(n int, sorted bool) []int32 {
		d := make([]int32, n)
		id := int32(0)
		for i := range d {
			if sorted {
				if r.IntN(20) == 0 {
					id++
				}
				d[i] = id
			} else {
				d[i] = int32(r.IntN(3))
			}
		}
		return d
	}
	bounded := 0
	for it := range 60 {
		sh, opts := randGeometry(r, 300)
		sh.B, sh.H = 1, 3
		var expr string
		var vals map[string]any
		switch it % 6 {
		case 0, 1:
			expr, vals = "document", map[string]any{"doc": docs(max(sh.SeqQ, sh.SeqK), it%2 == 0)}
		case 2:
			expr, vals = "and_masks(causal, document)", map[string]any{"doc": docs(max(sh.SeqQ, sh.SeqK)-r.IntN(20), true)} // may be short
		case 3:
			expr, vals = "doc_causal_h", map[string]any{"doc": docs(max(sh.SeqQ, sh.SeqK), true)}
		case 4:
			keep := make([]bool, sh.SeqK)
			for i := range keep {
				keep[i] = i%50 < 30
			}
			expr, vals = "keep_keys", map[string]any{"keep": keep}
		default:
			ids := make([]int32, 2*sh.SeqK)
			for i := range ids {
				ids[i] = int32(i % sh.SeqK / 16)
			}
			expr, vals = "pairs2d", map[string]any{"ids": ids}
		}
		mi := resolve(t, p, expr)
		name := fmt.Sprintf("#%d %s seq %d×%d blocks %d×%d", it, expr, sh.SeqQ, sh.SeqK, opts.BlockQ, opts.BlockK)
		te, err := newTileEval(p, mi, sh, opts, vals)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, err := evaluateTiles(te)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := evaluateBounded(p, mi, sh, vals, te)
		if err != nil {
			t.Errorf("%s: bounded: %v", name, err)
			continue
		}
		bounded++
		if !got.Equal(want) {
			t.Errorf("%s: bounded vs every block: %s", name, Diff(got, want))
		}
		if ev, err := EvaluateCPU(p, mi, sh, opts, vals); err != nil || !ev.Equal(want) {
			t.Errorf("%s: EvaluateCPU: %v", name, err)
		}
	}
	if bounded < 60 {
		t.Errorf("bounded %d of 60", bounded)
	}
	// Float data is not bounded: EvaluateCPU evaluates every block.
	sh := Shape{SeqQ: 50, SeqK: 40}
	w := make([]float32, 50)
	for i := range w {
		w[i] = float32(i%7) / 7
	}
	mi := resolve(t, p, "floaty_doc")
	te, err := newTileEval(p, mi, sh, Options{BlockQ: 8, BlockK: 8}, map[string]any{"w": w})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := evaluateBounded(p, mi, sh, map[string]any{"w": w}, te); !errors.Is(err, ErrNotAnalyzable) {
		t.Errorf("float aux: %v, want ErrNotAnalyzable", err)
	}
	ref, _ := BruteForceFunc(sh, Options{BlockQ: 8, BlockK: 8}, func(_, _, q, kv int) bool { return w[q] > 0.5 })
	if bm, err := EvaluateCPU(p, mi, sh, Options{BlockQ: 8, BlockK: 8}, map[string]any{"w": w}); err != nil || !bm.Equal(ref) {
		t.Errorf("float aux: %v %s", err, Diff(bm, ref))
	}
}

// TestDocumentMillion: a document mask over 2^20 positions (documents of
// about a thousand tokens) is built from the data's bounds, with compact
// lists, and its pairs counted, without evaluating 67M blocks.
func TestDocumentMillion(t *testing.T) {
	p := loadProg(t, nil)
	const s = 1 << 20
	doc := make([]int32, s)
	for i := range doc {
		doc[i] = int32(i / 1000)
	}
	pairs, bm, method, err := KeptPairs(p, resolve(t, p, "document"), Shape{H: 16, SeqQ: s, SeqK: s}, Options{}, map[string]any{"doc": doc})
	if err != nil {
		t.Fatal(err)
	}
	want := int64(1048)*1000*1000 + 576*576 // 1048 whole documents and one of 576
	if method != MethodEvaluatedCPU || pairs[0] != want || bm.H != 1 {
		t.Errorf("%s: %v pairs, want %d", method, pairs, want)
	}
	// A q block straddling two documents sees the blocks of both: 17 at most.
	if bm.KVWidth > 17 || bm.QWidth > 17 {
		t.Errorf("index rows of %d and %d", bm.KVWidth, bm.QWidth)
	}
	// Every kept block lies on the diagonal band of its documents.
	g := bm.KVIndices
	for r := range bm.NumQ {
		for _, kb := range g[r*bm.KVWidth:][:bm.KVNumBlocks[r]] {
			if d := int(kb) - r; d < -17 || d > 17 {
				t.Fatalf("q block %d lists kv block %d", r, kb)
			}
		}
	}
}
