package blockmask

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// randGeometry picks sequence lengths that are rarely multiples of the
// blocks, with seqQ < seqK, seqQ > seqK and equal all occurring.
func randGeometry(r *rand.Rand, maxSeq int) (Shape, Options) {
	blocks := []int{4, 5, 8, 13, 16, 16, 32}
	sh := Shape{SeqQ: 1 + r.IntN(maxSeq), SeqK: 1 + r.IntN(maxSeq)}
	if r.IntN(5) == 0 {
		sh.SeqK = sh.SeqQ
	}
	return sh, Options{BlockQ: blocks[r.IntN(len(blocks))], BlockK: blocks[r.IntN(len(blocks))]}
}

type stdCase struct {
	expr string
	f    func(q, kv int) bool
	aux  map[string]any
}

// randStd picks a stdlib mask with random parameters and its Go reference.
func randStd(r *rand.Rand, sh Shape) stdCase {
	sq, sk := sh.SeqQ, sh.SeqK
	switch r.IntN(7) {
	case 0:
		return stdCase{"none", func(q, kv int) bool { return true }, nil}
	case 1:
		return stdCase{"causal", func(q, kv int) bool { return q >= kv }, nil}
	case 2:
		return stdCase{"causal_bottom_right", func(q, kv int) bool { return kv <= q+sk-sq }, nil}
	case 3:
		l, rt := r.IntN(60), r.IntN(60)
		if r.IntN(4) == 0 {
			l, rt = r.IntN(8)-3, r.IntN(8)-3
		}
		return stdCase{fmt.Sprintf("sliding_window(%d, %d)", l, rt), func(q, kv int) bool { return q-l <= kv && kv <= q+rt }, nil}
	case 4:
		n := r.IntN(sk + 10)
		return stdCase{fmt.Sprintf("prefix_lm(%d)", n), func(q, kv int) bool { return kv < n || q >= kv }, nil}
	case 5:
		n := 1 + r.IntN(40)
		return stdCase{fmt.Sprintf("chunked(%d)", n), func(q, kv int) bool { return kv/n <= q/n }, nil}
	}
	// document: ids over max(sq, sk) tokens, sorted runs or scattered.
	n := max(sq, sk)
	doc := make([]int32, n)
	if r.IntN(2) == 0 {
		id := int32(0)
		for i := range doc {
			if r.IntN(12) == 0 {
				id++
			}
			doc[i] = id
		}
	} else {
		for i := range doc {
			doc[i] = int32(r.IntN(3))
		}
	}
	return stdCase{"document", func(q, kv int) bool { return doc[q] == doc[kv] }, map[string]any{"doc": doc}}
}

// TestStdlibMasksAgree checks analytic, evaluated-CPU and brute force on
// every stdlib mask over random geometries. Analytic must decide every
// stdlib mask except document (data-dependent), which it must decline.
func TestStdlibMasksAgree(t *testing.T) {
	p := loadProg(t, nil)
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	for it := range 300 {
		sh, opts := randGeometry(r, 150)
		c := randStd(r, sh)
		seen[strings.SplitN(c.expr, "(", 2)[0]] = true
		mi := resolve(t, p, c.expr)
		name := fmt.Sprintf("#%d %s seq %d×%d blocks %d×%d", it, c.expr, sh.SeqQ, sh.SeqK, opts.BlockQ, opts.BlockK)
		ref, err := BruteForceFunc(sh, opts, func(_, _, q, kv int) bool { return c.f(q, kv) })
		if err != nil {
			t.Fatal(err)
		}
		ev, err := EvaluateCPU(p, mi, sh, opts, c.aux)
		if err != nil {
			t.Fatalf("%s: EvaluateCPU: %v", name, err)
		}
		if d := Diff(ev, ref); d != "" || !ev.Equal(ref) {
			t.Errorf("%s: evaluated-cpu vs brute force: %s", name, d)
		}
		an, err := Analytic(p, mi, sh, opts)
		switch {
		case c.expr == "document":
			if !errors.Is(err, ErrNotAnalyzable) {
				t.Errorf("%s: analytic should decline a data-dependent mask, got %v", name, err)
			}
		case err != nil:
			t.Errorf("%s: analytic: %v", name, err)
		default:
			if d := Diff(an, ref); d != "" || !an.Equal(ref) {
				t.Errorf("%s: analytic vs brute force: %s", name, d)
			}
		}
		if it%10 == 0 { // the IR brute force agrees with the Go one
			bf, err := BruteForce(p, mi, sh, opts, c.aux)
			if err != nil {
				t.Fatal(err)
			}
			if !bf.Equal(ref) {
				t.Errorf("%s: IR brute force vs Go: %s", name, Diff(bf, ref))
			}
		}
		bm, m, err := Build(p, mi, sh, opts, c.aux)
		if err != nil || !bm.Equal(ref) {
			t.Errorf("%s: Build (%s): %v %s", name, m, err, Diff(bm, ref))
		}
		if want := MethodAnalytic; c.expr == "document" && m != MethodEvaluatedCPU || c.expr != "document" && m != want {
			t.Errorf("%s: Build used %s", name, m)
		}
	}
	for _, n := range []string{"none", "causal", "causal_bottom_right", "sliding_window", "prefix_lm", "chunked", "document"} {
		if !seen[n] {
			t.Errorf("mask %s never drawn", n)
		}
	}
}

// TestStdlibLarge checks the analytic builder at real sizes with the
// default 128 blocks against the evaluated one.
func TestStdlibLarge(t *testing.T) {
	p := loadProg(t, nil)
	for _, m := range []string{"causal", "causal_bottom_right", "sliding_window(300, 20)", "prefix_lm(700)", "chunked(200)"} {
		sh := Shape{SeqQ: 2000, SeqK: 1500}
		mi := resolve(t, p, m)
		an, err := Analytic(p, mi, sh, Options{})
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		ev, err := EvaluateCPU(p, mi, sh, Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !an.Equal(ev) {
			t.Errorf("%s: %s", m, Diff(an, ev))
		}
	}
}

// genMask writes a random mask from a grammar of affine comparisons of
// positions, constants and sequence lengths, combined with && || ! and
// min, max, abs, division, remainder and select.
type genMask struct {
	r      *rand.Rand
	useBH  bool
	usedBH bool
}

func (g *genMask) konst(lo, hi int) string {
	v := lo + g.r.IntN(hi-lo+1)
	if v < 0 {
		return fmt.Sprintf("(%d)", v)
	}
	return fmt.Sprint(v)
}

func (g *genMask) intExpr(d int) string {
	r := g.r
	if d <= 0 || r.IntN(4) == 0 {
		switch n := r.IntN(14); {
		case n < 4:
			return "q_idx"
		case n < 8:
			return "kv_idx"
		case n == 8:
			return "seqlen_q"
		case n == 9:
			return "seqlen_k"
		case n == 10 && g.useBH:
			g.usedBH = true
			return []string{"b", "h"}[r.IntN(2)]
		case n == 11:
			return g.konst(-20, 40)
		}
		// An affine form of both positions.
		return fmt.Sprintf("(%s * q_idx + %s * kv_idx + %s)", g.konst(-3, 3), g.konst(-3, 3), g.konst(-30, 30))
	}
	a := g.intExpr(d - 1)
	switch r.IntN(11) {
	case 0, 1:
		return fmt.Sprintf("(%s + %s)", a, g.intExpr(d-1))
	case 2, 3:
		return fmt.Sprintf("(%s - %s)", a, g.intExpr(d-1))
	case 4:
		if r.IntN(6) == 0 { // large enough to wrap around i32
			return fmt.Sprintf("(%s * %s)", g.konst(-60000000, 60000000), a)
		}
		return fmt.Sprintf("(%s * %s)", g.konst(-3, 4), a)
	case 5:
		return fmt.Sprintf("min(%s, %s)", a, g.intExpr(d-1))
	case 6:
		return fmt.Sprintf("max(%s, %s)", a, g.intExpr(d-1))
	case 7:
		return fmt.Sprintf("abs(%s)", a)
	case 8:
		c := g.konst(1, 9)
		if r.IntN(3) == 0 {
			c = g.konst(-9, -1)
		}
		return fmt.Sprintf("(%s / %s)", a, c)
	case 9:
		switch r.IntN(4) {
		case 0:
			return fmt.Sprintf("(%s %% %s)", a, g.konst(1, 9))
		case 1: // may divide by zero: then every builder must fail
			return fmt.Sprintf("(%s / %s)", a, g.intExpr(d-1))
		}
		return fmt.Sprintf("(%s / (abs(%s) + 1))", a, g.intExpr(d-1))
	}
	return fmt.Sprintf("select(%s, %s, %s)", g.boolExpr(d-1), a, g.intExpr(d-1))
}

func (g *genMask) boolExpr(d int) string {
	r := g.r
	if d <= 0 || r.IntN(3) == 0 {
		ops := []string{"<", "<=", ">", ">=", "==", "!="}
		return fmt.Sprintf("%s %s %s", g.intExpr(r.IntN(3)), ops[r.IntN(len(ops))], g.intExpr(r.IntN(3)))
	}
	switch r.IntN(5) {
	case 0, 1:
		return fmt.Sprintf("(%s) && (%s)", g.boolExpr(d-1), g.boolExpr(d-1))
	case 2, 3:
		return fmt.Sprintf("(%s) || (%s)", g.boolExpr(d-1), g.boolExpr(d-1))
	}
	return fmt.Sprintf("!(%s)", g.boolExpr(d-1))
}

// TestRandomMasksAgree generates random masks and checks that analytic
// (when it does not decline), evaluated-CPU and brute force agree.
func TestRandomMasksAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	const n = 300
	var srcs []string
	var bh []bool
	for i := range n {
		g := &genMask{r: r, useBH: i%5 == 0}
		e := g.boolExpr(1 + r.IntN(4))
		srcs = append(srcs, fmt.Sprintf("mask rnd%d(b, h, q_idx, kv_idx) {\n    return %s\n}\n", i, e))
		bh = append(bh, g.usedBH)
	}
	p := loadProg(t, map[string]string{"random.fa": strings.Join(srcs, "\n")})
	declined, decided, divZero := 0, 0, 0
	for i := range n {
		mi := resolve(t, p, fmt.Sprintf("rnd%d", i))
		sh, opts := randGeometry(r, 90)
		if bh[i] {
			sh.B, sh.H = 2, 3
		}
		name := fmt.Sprintf("rnd%d seq %d×%d blocks %d×%d: %s", i, sh.SeqQ, sh.SeqK, opts.BlockQ, opts.BlockK, strings.TrimSpace(srcs[i]))
		ref, refErr := BruteForce(p, mi, sh, opts, nil)
		ev, err := EvaluateCPU(p, mi, sh, opts, nil)
		// A mask that divides by zero is an error where the interpreter
		// meets the division. Analytic and brute force see the same
		// (scalar) code, so they must agree on it; the tile code is
		// optimized apart, and a dead division (select(c, x/0, x) is x)
		// may survive there, so evaluated-cpu may fail alone.
		if refErr != nil {
			if !strings.Contains(refErr.Error(), "division by zero") {
				t.Fatalf("%s: brute force: %v", name, refErr)
			}
			if _, err := Analytic(p, mi, sh, opts); !errors.Is(err, ErrNotAnalyzable) {
				t.Errorf("%s: brute force failed (%v), analytic gave %v", name, refErr, err)
			}
			divZero++
			continue
		}
		if err != nil && !strings.Contains(err.Error(), "division by zero") {
			t.Fatalf("%s: evaluated-cpu: %v", name, err)
		}
		if err == nil && !ev.Equal(ref) {
			t.Errorf("%s: evaluated-cpu vs brute force: %s", name, Diff(ev, ref))
		}
		an, err := Analytic(p, mi, sh, opts)
		switch {
		case errors.Is(err, ErrNotAnalyzable):
			declined++
			if testing.Verbose() {
				t.Logf("declined %s: %v", name, err)
			}
		case err != nil:
			t.Errorf("%s: analytic: %v", name, err)
		default:
			decided++
			if !an.Equal(ref) {
				t.Errorf("%s: analytic vs brute force: %s", name, Diff(an, ref))
			}
		}
	}
	t.Logf("analytic decided %d of %d random masks, declined %d; %d divide by zero", decided, n, declined, divZero)
	if decided < (n-divZero)*3/4 {
		t.Errorf("analytic decided only %d of %d random masks", decided, n)
	}
}

// TestAnalyticDeclines covers masks the analysis must refuse, and Build's
// fallback.
func TestAnalyticDeclines(t *testing.T) {
	p := loadProg(t, map[string]string{"d.fa": `
mask floaty(b, h, q_idx, kv_idx) {
    return f32(q_idx) * 0.5 >= f32(kv_idx)
}
mask divzero(b, h, q_idx, kv_idx) {
    return q_idx / (kv_idx - 3) > 0
}
`})
	sh, opts := Shape{SeqQ: 40, SeqK: 33}, Options{BlockQ: 8, BlockK: 8}
	for _, m := range []string{"floaty", "document"} {
		mi := resolve(t, p, m)
		if _, err := Analytic(p, mi, sh, opts); !errors.Is(err, ErrNotAnalyzable) {
			t.Errorf("%s: analytic: %v, want ErrNotAnalyzable", m, err)
		}
	}
	mi := resolve(t, p, "floaty")
	bm, m, err := Build(p, mi, sh, opts, nil)
	if err != nil || m != MethodEvaluatedCPU {
		t.Fatalf("Build(floaty): %v %v", m, err)
	}
	ref, _ := BruteForceFunc(sh, opts, func(_, _, q, kv int) bool { return float32(q)*0.5 >= float32(kv) })
	if !bm.Equal(ref) {
		t.Errorf("floaty: %s", Diff(bm, ref))
	}
	// Division by zero: analytic declines, evaluation reports the error.
	mi = resolve(t, p, "divzero")
	if _, err := Analytic(p, mi, sh, opts); !errors.Is(err, ErrNotAnalyzable) || !strings.Contains(err.Error(), "kv_idx=3 (block q=0 kv=0") {
		t.Errorf("divzero: analytic: %v", err)
	}
	if _, _, err := Build(p, mi, sh, opts, nil); err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Errorf("divzero: Build: %v", err)
	}
	// A document mask needs its ids.
	if _, _, err := Build(p, resolve(t, p, "document"), sh, opts, nil); err == nil || !strings.Contains(err.Error(), `aux["doc"]`) {
		t.Errorf("document without doc: %v", err)
	}
}

// TestBH checks that masks ignoring b and h give one shared mask and that
// masks reading them get one per (b, h).
func TestBH(t *testing.T) {
	p := loadProg(t, map[string]string{"bh.fa": `
mask per_head(b, h, q_idx, kv_idx) {
    return q_idx - kv_idx <= 8 * (h + 1) && kv_idx <= q_idx
}
mask per_batch(b, h, q_idx, kv_idx) {
    let dead = h * 7
    return select(b == 0, q_idx >= kv_idx, kv_idx >= q_idx)
}
mask folded(b, h, q_idx, kv_idx) {
    return q_idx >= kv_idx || h - h != 0
}
`})
	sh, opts := Shape{B: 2, H: 4, SeqQ: 70, SeqK: 50}, Options{BlockQ: 16, BlockK: 8}
	for _, c := range []struct {
		mask string
		b, h int
		f    func(b, h, q, kv int) bool
	}{
		{"per_head", 1, 4, func(b, h, q, kv int) bool { return q-kv <= 8*(h+1) && kv <= q }},
		{"per_batch", 2, 1, func(b, h, q, kv int) bool { return b == 0 && q >= kv || b != 0 && kv >= q }},
		{"folded", 1, 1, func(b, h, q, kv int) bool { return q >= kv }},
		{"causal", 1, 1, func(b, h, q, kv int) bool { return q >= kv }},
	} {
		mi := resolve(t, p, c.mask)
		ref, err := BruteForceFunc(Shape{B: c.b, H: c.h, SeqQ: sh.SeqQ, SeqK: sh.SeqK}, opts, c.f)
		if err != nil {
			t.Fatal(err)
		}
		for _, build := range []struct {
			name string
			fn   func() (*BlockMask, error)
		}{
			{"analytic", func() (*BlockMask, error) { return Analytic(p, mi, sh, opts) }},
			{"evaluated-cpu", func() (*BlockMask, error) { return EvaluateCPU(p, mi, sh, opts, nil) }},
			{"brute force", func() (*BlockMask, error) { return BruteForce(p, mi, sh, opts, nil) }},
		} {
			bm, err := build.fn()
			if err != nil {
				t.Fatalf("%s %s: %v", c.mask, build.name, err)
			}
			if bm.B != c.b || bm.H != c.h {
				t.Errorf("%s %s: B=%d H=%d, want %d, %d", c.mask, build.name, bm.B, bm.H, c.b, c.h)
			} else if !bm.Equal(ref) {
				t.Errorf("%s %s: %s", c.mask, build.name, Diff(bm, ref))
			}
		}
	}
	// Broadcasting in Class.
	bm, _ := Analytic(p, resolve(t, p, "causal"), sh, opts)
	if bm.Class(1, 3, 0, 0) != Partial || bm.Class(1, 3, 3, 0) != Full || bm.Class(0, 2, 0, 5) != Empty {
		t.Errorf("Class through broadcast dims is wrong")
	}
}

// TestIntervalOps checks each abstract integer op for soundness (every
// concrete result lies in the interval) and exactness at points, with i32
// wraparound, against enumeration.
func TestIntervalOps(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	randIval := func() ival {
		base := int64(r.IntN(41) - 20)
		switch r.IntN(6) {
		case 0:
			base = minI32 + int64(r.IntN(4))
		case 1:
			base = maxI32 - 6 - int64(r.IntN(4))
		}
		w := int64(0)
		if r.IntN(3) > 0 {
			w = int64(r.IntN(7))
		}
		return ival{base, base + w}
	}
	type opT struct {
		op opcode
		f  func(a, b int32) (int32, bool)
	}
	ops := []opT{
		{opAdd, func(a, b int32) (int32, bool) { return a + b, true }},
		{opSub, func(a, b int32) (int32, bool) { return a - b, true }},
		{opMul, func(a, b int32) (int32, bool) { return a * b, true }},
		{opDiv, func(a, b int32) (int32, bool) { return a / b, b != 0 }},
		{opRem, func(a, b int32) (int32, bool) { return a % b, b != 0 }},
		{opMin, func(a, b int32) (int32, bool) { return min(a, b), true }},
		{opMax, func(a, b int32) (int32, bool) { return max(a, b), true }},
		{opNeg, func(a, b int32) (int32, bool) { return -a, true }},
		{opAbs, func(a, b int32) (int32, bool) {
			if a < 0 {
				return -a, true
			}
			return a, true
		}},
		{opIAnd, func(a, b int32) (int32, bool) { return a & b, true }},
		{opIXor, func(a, b int32) (int32, bool) { return a ^ b, true }},
	}
	e := &evaluator{slots: make([]ival, 3)}
	for range 4000 {
		o := ops[r.IntN(len(ops))]
		x, y := randIval(), randIval()
		e.fail = nil
		e.slots[0], e.slots[1] = x, y
		code := []instr{{op: o.op, x: 0, y: 1, dst: 2}}
		e.run(code, rect{})
		got := e.slots[2]
		if e.fail != nil {
			// Only allowed when the divisor interval holds 0.
			if y.lo > 0 || y.hi < 0 {
				t.Fatalf("%v: spurious failure on %v %v", o.op, x, y)
			}
			continue
		}
		for a := x.lo; a <= x.hi; a++ {
			for b := y.lo; b <= y.hi; b++ {
				v, ok := o.f(int32(a), int32(b))
				if !ok {
					continue
				}
				if int64(v) < got.lo || int64(v) > got.hi {
					t.Fatalf("op %d on %v, %v: %d op %d = %d not in %v", o.op, x, y, a, b, v, got)
				}
			}
		}
		if x.lo == x.hi && y.lo == y.hi {
			v, _ := o.f(int32(x.lo), int32(y.lo))
			if got != (ival{int64(v), int64(v)}) {
				t.Fatalf("op %d on points %d, %d: got %v, want %d", o.op, x.lo, y.lo, got, v)
			}
		}
	}
}

// TestHardMasks covers masks whose blocks the interval bounds alone leave
// undecided, so the refinement decides them (or the analyzer declines and
// Build falls back), against the evaluated builder at the default blocks.
func TestHardMasks(t *testing.T) {
	p := loadProg(t, map[string]string{"hard.fa": `
mask mods(b, h, q_idx, kv_idx) {
    return (q_idx * 3) % 7 == kv_idx % 5
}
mask line(b, h, q_idx, kv_idx) {
    return 2 * q_idx - kv_idx == 1
}
mask sparse(b, h, q_idx, kv_idx) {
    return (q_idx * 7 + kv_idx * 13) % 1000 == 999
}
mask pell(b, h, q_idx, kv_idx) {
    return q_idx * q_idx == 2 * kv_idx * kv_idx + 1
}
mask signdiv(b, h, q_idx, kv_idx) {
    return q_idx / select(kv_idx < 16, 0 - 1, 1) >= 0
}
mask ring(b, h, q_idx, kv_idx) {
    let d = abs(q_idx - kv_idx)
    return d >= 100 && d < 140 || min(q_idx, kv_idx) / 64 == 3
}
`})
	sh := Shape{SeqQ: 1000, SeqK: 900}
	for _, m := range []string{"mods", "line", "sparse", "pell", "signdiv", "ring", "sliding_window(-5, 2)", "sliding_window(0, 0)"} {
		mi := resolve(t, p, m)
		ref, err := EvaluateCPU(p, mi, sh, Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		bm, meth, err := Build(p, mi, sh, Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", m, meth)
		if !bm.Equal(ref) {
			t.Errorf("%s (%s): %s", m, meth, Diff(bm, ref))
		}
	}
	// With a small budget the refinement gives up, and says so.
	a, err := NewAnalyzer(p, resolve(t, p, "pell"), sh)
	if err != nil {
		t.Fatal(err)
	}
	a.Budget = 8
	if _, err := a.Grid(Options{}); !errors.Is(err, ErrNotAnalyzable) || !strings.Contains(err.Error(), "undecided after 8 refinements") {
		t.Errorf("pell with budget 8: %v", err)
	}
}

// TestDivZeroConst: a division by zero that depends on no position.
func TestDivZeroConst(t *testing.T) {
	p := loadProg(t, map[string]string{"z.fa": `
mask zconst(b, h, q_idx, kv_idx) {
    return q_idx >= kv_idx || seqlen_q / (seqlen_k - 40) > 0
}
`})
	mi := resolve(t, p, "zconst")
	sh, opts := Shape{SeqQ: 40, SeqK: 40}, Options{BlockQ: 8, BlockK: 8}
	if _, err := Analytic(p, mi, sh, opts); !errors.Is(err, ErrNotAnalyzable) || !strings.Contains(err.Error(), "divides by zero") {
		t.Errorf("analytic: %v", err)
	}
	if _, err := BruteForce(p, mi, sh, opts, nil); err == nil {
		t.Errorf("brute force did not fail")
	}
}
