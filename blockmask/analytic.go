package blockmask

// The analytic builder: a mask's tile IR compiled (analytic_compile.go) to a
// small program over an abstract domain of intervals and affine forms
// (analytic_domain.go), run by an interpreter (analytic_eval.go) over block
// rectangles, which classify and refine into block classes
// (analytic_classify.go). This file is its API.

import (
	"errors"
	"fmt"
	"math"

	"github.com/fac-compiler/fac/lang"
)

// ErrNotAnalyzable is returned (wrapped, with the reason) by Analytic and
// NewAnalyzer when they cannot classify every block of a mask exactly:
// the mask reads aux tensors, computes in floats, loops, may divide by zero,
// or is too intricate for interval and affine bounds. Callers then fall back
// to an evaluating builder (EvaluateCPU); Build does so itself.
var ErrNotAnalyzable = errors.New("blockmask: cannot bound the mask analytically")

func notAnalyzable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotAnalyzable, fmt.Sprintf(format, args...))
}

// Analytic classifies every block by abstract interpretation of the mask's
// tile IR over the block's rectangle of positions, without evaluating the
// mask element by element. It is exact or it declines: it returns an error
// wrapping ErrNotAnalyzable when some block cannot be decided.
func Analytic(prog *lang.Program, inst *lang.ModInst, sh Shape, opts Options) (*BlockMask, error) {
	return AnalyticWith(prog, inst, sh, opts, nil)
}

// AnalyticWith is Analytic for a mask reading run-time parameters, whose
// values vals holds by name (see NewAnalyzerWith).
func AnalyticWith(prog *lang.Program, inst *lang.ModInst, sh Shape, opts Options, vals map[string]any) (*BlockMask, error) {
	a, err := NewAnalyzerWith(prog, inst, sh, vals)
	if err != nil {
		return nil, err
	}
	return a.BlockMask(opts)
}

// Analyzer is a mask compiled for analytic classification: one small
// program of interval/affine instructions per distinct (b, h) (just one when
// the mask reads neither). It is not safe for concurrent use.
type Analyzer struct {
	B, H       int // of the block masks it makes: 1 where the mask ignores b (h)
	SeqQ, SeqK int
	progs      []*evaluator // [B*H]
	mask       string
	// Budget bounds the abstract evaluations spent refining one undecided
	// block (bisecting it until each part is decided or both a true and a
	// false position are found); past it the analyzer declines.
	Budget int
}

// NewAnalyzer compiles inst for sh. It fails with ErrNotAnalyzable (wrapped)
// when the mask uses operations the analysis does not bound, and when it
// reads run-time parameters (whose values NewAnalyzerWith takes).
func NewAnalyzer(prog *lang.Program, inst *lang.ModInst, sh Shape) (*Analyzer, error) {
	return NewAnalyzerWith(prog, inst, sh, nil)
}

// NewAnalyzerWith is NewAnalyzer for a mask reading run-time parameters:
// vals holds their values by name ("offset" or "mask.offset"; other
// entries, such as aux tensors, are ignored). The analysis takes them as
// the constants they are for the calls the block mask serves, as it does
// the sequence lengths, batch and num_heads; it is exact or declines.
func NewAnalyzerWith(prog *lang.Program, inst *lang.ModInst, sh Shape, vals map[string]any) (*Analyzer, error) {
	return newAnalyzer(prog, inst, sh, vals, false)
}

// newAnalyzer is NewAnalyzerWith; with data, the aux tensors the mask reads
// are taken from vals and bounded by their data (auxTable), so the
// analyzer holds for that data only (EvaluateCPU uses it so).
func newAnalyzer(prog *lang.Program, inst *lang.ModInst, sh Shape, vals map[string]any, data bool) (*Analyzer, error) {
	sh = sh.withDefaults()
	// The number of blocks depends on the block size, which Grid and Fill
	// get: they check it.
	if err := checkShape(sh.B, sh.H, sh.SeqQ, sh.SeqK); err != nil {
		return nil, err
	}
	if inst == nil {
		return nil, fmt.Errorf("blockmask: no mask mod given")
	}
	consts := map[int]any{paramSeqQ: int64(sh.SeqQ), paramSeqK: int64(sh.SeqK), paramBatch: int64(sh.B), paramHeads: int64(sh.H)}
	for _, p := range inst.ScalarParams() {
		if _, ok := lookup(vals, p.Name); !ok {
			return nil, notAnalyzable("mask %s reads run-time parameter %s, whose value is not given", inst, p.Name)
		}
	}
	if err := scalarConsts(inst, vals, consts); err != nil {
		return nil, err
	}
	var tables []*auxTable
	if data {
		var err error
		if tables, err = auxData(inst, sh, vals); err != nil {
			return nil, err
		}
		for i, t := range tables {
			consts[auxParam(i)+1] = int64(len(t.vals))
		}
	}
	_, f, err := modFunc(prog, inst, 0, 0, consts)
	if err != nil {
		return nil, err
	}
	for i, a := range inst.AuxParams() {
		if !data && (hasUses(f, f.Params[auxParam(i)]) || hasUses(f, f.Params[auxParam(i)+1])) {
			return nil, notAnalyzable("mask %s reads aux tensor %s: its blocks depend on the data", inst, a.Name)
		}
	}
	usesB, usesH := hasUses(f, f.Params[paramB]), hasUses(f, f.Params[paramH])
	a := &Analyzer{B: 1, H: 1, SeqQ: sh.SeqQ, SeqK: sh.SeqK, Budget: 1024, mask: inst.String()}
	if usesB {
		a.B = sh.B
	}
	if usesH {
		a.H = sh.H
	}
	// Every (b, h) mask has a block at least: refuse before compiling a
	// program for each of too many.
	if _, ok := numBlocks(a.B, a.H); !ok {
		return nil, fmt.Errorf("blockmask: mask %s reads b or h: its block mask has B×H = %d×%d masks, more than %d blocks", inst, a.B, a.H, MaxBlocks)
	}
	if !usesB && !usesH {
		e, err := compile(f, sh.SeqQ, sh.SeqK, tables)
		if err != nil {
			return nil, fmt.Errorf("%w (mask %s)", err, inst)
		}
		a.progs = []*evaluator{e}
		return a, nil
	}
	// Specialize per (b, h): with b and h constants, products like h * q_idx
	// become affine and conditions on h fold.
	for b := range a.B {
		for h := range a.H {
			c := map[int]any{}
			for k, v := range consts {
				c[k] = v
			}
			if usesB {
				c[paramB] = int64(b)
			}
			if usesH {
				c[paramH] = int64(h)
			}
			_, f, err := modFunc(prog, inst, 0, 0, c)
			if err != nil {
				return nil, err
			}
			e, err := compile(f, sh.SeqQ, sh.SeqK, tables)
			if err != nil {
				return nil, fmt.Errorf("%w (mask %s)", err, inst)
			}
			e.b, e.h = int64(b), int64(h)
			a.progs = append(a.progs, e)
		}
	}
	return a, nil
}

// Grid classifies every block for the given block sizes.
func (a *Analyzer) Grid(opts Options) (*Grid, error) {
	opts = opts.withDefaults()
	g, err := NewGrid(a.B, a.H, a.SeqQ, a.SeqK, opts.BlockQ, opts.BlockK)
	if err != nil {
		return nil, err
	}
	if err := a.Fill(g); err != nil {
		return nil, err
	}
	return g, nil
}

// Fill classifies every block of g, whose geometry must match the
// analyzer's. It allocates nothing.
func (a *Analyzer) Fill(g *Grid) error {
	if g.B != a.B || g.H != a.H || g.SeqQ != a.SeqQ || g.SeqK != a.SeqK {
		return fmt.Errorf("blockmask: grid is B=%d H=%d %d×%d, analyzer B=%d H=%d %d×%d", g.B, g.H, g.SeqQ, g.SeqK, a.B, a.H, a.SeqQ, a.SeqK)
	}
	if err := checkGeometry(g.B, g.H, g.SeqQ, g.SeqK, g.BlockQ, g.BlockK); err != nil {
		return err
	}
	if g.NumQ != cdiv(g.SeqQ, g.BlockQ) || g.NumK != cdiv(g.SeqK, g.BlockK) || len(g.Classes) != g.B*g.H*g.NumQ*g.NumK {
		return fmt.Errorf("blockmask: grid of %d×%d blocks with %d classes does not fit SeqQ=%d SeqK=%d in %d×%d blocks (use NewGrid)",
			g.NumQ, g.NumK, len(g.Classes), g.SeqQ, g.SeqK, g.BlockQ, g.BlockK)
	}
	for m, e := range a.progs {
		e.budget = a.Budget
		// All refinements together may cost about an eighth of evaluating
		// every element: past that, an evaluating builder is as fast.
		e.total = max(1<<12, int64(a.SeqQ)*int64(a.SeqK)/8)
		if err := e.fill(g, g.Classes[m*g.NumQ*g.NumK:][:g.NumQ*g.NumK]); err != nil {
			return fmt.Errorf("%w (mask %s)", err, a.mask)
		}
	}
	return nil
}

// BlockMask classifies every block for the given block sizes and lists
// them, without a dense grid of classes: each (b, h) mask is bisected over
// rectangles of blocks, and only rectangles whose bounds are undecided are
// split, so the cost follows the class boundaries (a few evaluations per
// boundary block) and the lists (the kept blocks and the index rows), not
// the B·H·NumQ·NumK blocks. It gives exactly what Grid and FromClasses give.
func (a *Analyzer) BlockMask(opts Options) (*BlockMask, error) {
	opts = opts.withDefaults()
	if err := checkGeometry(a.B, a.H, a.SeqQ, a.SeqK, opts.BlockQ, opts.BlockK); err != nil {
		return nil, err
	}
	runs := make([][]blockRun, len(a.progs))
	for m, e := range a.progs {
		e.budget = a.Budget
		e.total = max(1<<12, int64(a.SeqQ)*int64(a.SeqK)/8) // as in Fill
		r, err := e.blocks(a.SeqQ, a.SeqK, opts.BlockQ, opts.BlockK, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%w (mask %s)", err, a.mask)
		}
		runs[m] = r
	}
	return listsFromRuns(a.B, a.H, a.SeqQ, a.SeqK, opts.BlockQ, opts.BlockK, runs, 0, 0)
}

// ClassifyRect classifies the rectangle q∈[q0,q1], kv∈[k0,k1] (inclusive)
// of mask (b, h), b and h taken modulo the analyzer's B and H.
func (a *Analyzer) ClassifyRect(b, h, q0, q1, k0, k1 int) (Class, error) {
	if q0 < 0 || k0 < 0 || q1 < q0 || k1 < k0 || q1 >= a.SeqQ || k1 >= a.SeqK {
		return 0, fmt.Errorf("blockmask: rectangle q∈[%d,%d] kv∈[%d,%d] is not inside [0,%d)×[0,%d)", q0, q1, k0, k1, a.SeqQ, a.SeqK)
	}
	e := a.progs[(b%a.B)*a.H+h%a.H]
	e.budget = a.Budget
	e.total = math.MaxInt64
	return e.classify(rect{int64(q0), int64(q1), int64(k0), int64(k1)})
}
