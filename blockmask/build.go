package blockmask

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// Method names the builder that made a block mask.
type Method uint8

const (
	MethodAnalytic     Method = iota + 1 // interval/affine bounds of the mask's IR
	MethodEvaluatedCPU                   // the mask run tile by tile on the CPU interpreter
	MethodEvaluatedGPU                   // the mask run tile by tile on a GPU (a builder outside this package)
	MethodBruteForce                     // every element evaluated
	MethodLoaded                         // read from files (Load)
)

func (m Method) String() string {
	switch m {
	case MethodAnalytic:
		return "analytic"
	case MethodEvaluatedCPU:
		return "evaluated-cpu"
	case MethodEvaluatedGPU:
		return "evaluated-gpu"
	case MethodBruteForce:
		return "brute-force"
	case MethodLoaded:
		return "loaded"
	}
	return fmt.Sprintf("method(%d)", uint8(m))
}

// Build makes the block mask of inst for sh: analytically when the mask can
// be bounded (arithmetic on positions), else by evaluating it tile by tile
// on the CPU (masks reading aux tensors, floats, loops). aux holds the
// mask's aux tensors and run-time parameters by name (see EvaluateCPU).
// The returned Method says which builder ran.
func Build(prog *lang.Program, inst *lang.ModInst, sh Shape, opts Options, aux map[string]any) (*BlockMask, Method, error) {
	bm, err := AnalyticWith(prog, inst, sh, opts, aux)
	if err == nil {
		return bm, MethodAnalytic, nil
	}
	if !errors.Is(err, ErrNotAnalyzable) {
		return nil, 0, err
	}
	bm, err = EvaluateCPU(prog, inst, sh, opts, aux)
	if err != nil {
		return nil, 0, err
	}
	return bm, MethodEvaluatedCPU, nil
}

// newGridFor gives the geometry of a mask's block mask, as a Grid without
// classes (builders list their blocks as runs): B (H) is 1 unless the mask
// reads b (h). The block count is checked on that geometry, not on sh.
func newGridFor(prog *lang.Program, inst *lang.ModInst, sh Shape, opts Options) (*Grid, error) {
	sh, opts = sh.withDefaults(), opts.withDefaults()
	if err := checkShape(sh.B, sh.H, sh.SeqQ, sh.SeqK); err != nil {
		return nil, err
	}
	if err := checkBlockSize(opts.BlockQ, opts.BlockK); err != nil {
		return nil, err
	}
	b, h, err := maskShape(prog, inst, sh)
	if err != nil {
		return nil, err
	}
	return newGeometry(b, h, sh.SeqQ, sh.SeqK, opts.BlockQ, opts.BlockK)
}

// newGridArgs is newGridFor with the shape's defaults filled in and the
// mod's aux arguments, what an evaluating builder starts from.
func newGridArgs(prog *lang.Program, inst *lang.ModInst, sh Shape, opts Options, aux map[string]any) (*Grid, Shape, []any, error) {
	g, err := newGridFor(prog, inst, sh, opts)
	if err != nil {
		return nil, sh, nil, err
	}
	sh = sh.withDefaults()
	auxs, err := inputArgs(inst, sh, aux)
	if err != nil {
		return nil, sh, nil, err
	}
	return g, sh, auxs, nil
}

// newGeometry is NewGrid without the classes.
func newGeometry(b, h, seqQ, seqK, blockQ, blockK int) (*Grid, error) {
	if err := checkGeometry(b, h, seqQ, seqK, blockQ, blockK); err != nil {
		return nil, err
	}
	return &Grid{B: b, H: h, SeqQ: seqQ, SeqK: seqK, BlockQ: blockQ, BlockK: blockK, NumQ: cdiv(seqQ, blockQ), NumK: cdiv(seqK, blockK)}, nil
}

// rowsToRuns gathers the runs of every block row (indexed (b·H+h)·NumQ+qb)
// by mask, row after row, and lists them.
func rowsToRuns(g *Grid, rows [][]blockRun) (*BlockMask, error) {
	runs := make([][]blockRun, g.B*g.H)
	for m := range runs {
		n := 0
		for _, r := range rows[m*g.NumQ:][:g.NumQ] {
			n += len(r)
		}
		runs[m] = make([]blockRun, 0, n)
		for _, r := range rows[m*g.NumQ:][:g.NumQ] {
			runs[m] = append(runs[m], r...)
		}
	}
	return listsFromRuns(g.B, g.H, g.SeqQ, g.SeqK, g.BlockQ, g.BlockK, runs, 0, 0)
}

// EvaluateCPU evaluates the mask tile by tile, one block at a time, on the
// reference interpreter (the mod lowered with LowerModTile: q_idx a column
// of BlockQ positions, kv_idx a row of BlockK), and classifies each block
// by any/all of its tile. Positions past the sequence ends repeat the last
// position, which leaves any/all unchanged, so the mask only ever sees
// positions inside the sequences. aux holds the aux tensors the mask reads
// and its run-time parameters, by name ("doc", "offset"; or "mask.doc"):
// tensors as flat slices ([]int32, []int64, []int8, []float32, []bool,
// ...: what launch.HostData takes), launch.Array values (an N-D array,
// checked dimension by dimension against the declared shape) or
// *cpu.Buffer; parameters as int, int32, int64, float32, float64 or bool.
func EvaluateCPU(prog *lang.Program, inst *lang.ModInst, sh Shape, opts Options, aux map[string]any) (*BlockMask, error) {
	te, err := newTileEval(prog, inst, sh, opts, aux)
	if err != nil {
		return nil, err
	}
	if len(inst.AuxParams()) > 0 {
		bm, err := evaluateBounded(prog, inst, sh, aux, te)
		if err == nil || !errors.Is(err, ErrNotAnalyzable) {
			return bm, err
		}
	}
	return evaluateTiles(te)
}

// evaluateBounded is EvaluateCPU for a mask reading aux tensors whose data
// the analytic bounds can take (auxTable: i32 or bool data, no floats or
// loops): rectangles of blocks are classified by bounding the mask with
// the data's ranges, a block the bounds and refining leave undecided is
// evaluated (a tile on the interpreter), so a document mask over a
// million positions costs about as many evaluations as it has blocks
// along document boundaries, not 67M tiles. The result is what evaluating
// every block gives. ErrNotAnalyzable when the mask cannot be bounded.
func evaluateBounded(prog *lang.Program, inst *lang.ModInst, sh Shape, vals map[string]any, te *tileEval) (*BlockMask, error) {
	a, err := newAnalyzer(prog, inst, sh, vals, true)
	if err != nil {
		return nil, err
	}
	g := te.g
	if a.B != g.B || a.H != g.H {
		return nil, notAnalyzable("the bounds see B=%d H=%d masks, evaluation %d×%d", a.B, a.H, g.B, g.H)
	}
	runs := make([][]blockRun, len(a.progs))
	errs := make([]error, len(a.progs))
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(a.progs)) {
		wg.Go(func() {
			var scratch []float64
			for {
				mu.Lock()
				m := next
				next++
				mu.Unlock()
				if m >= len(a.progs) {
					return
				}
				e := a.progs[m]
				// A block refining does not decide soon is evaluated instead
				// (a tile costs about as much as 64 bounds of large spans).
				e.budget, e.total = 64, math.MaxInt64
				b, h := m/g.H, m%g.H
				runs[m], errs[m] = e.blocks(g.SeqQ, g.SeqK, g.BlockQ, g.BlockK, nil, func(qb, kb int32) (Class, error) {
					v, err := te.eval(b, h, int(qb), int(kb), &scratch)
					if err != nil {
						return 0, err
					}
					return classOf(v), nil
				})
			}
		})
	}
	wg.Wait()
	if err := firstErr(errs); err != nil {
		return nil, err
	}
	return listsFromRuns(g.B, g.H, g.SeqQ, g.SeqK, g.BlockQ, g.BlockK, runs, 0, 0)
}

// evaluateTiles evaluates every block of te's mask.
func evaluateTiles(te *tileEval) (*BlockMask, error) {
	g := te.g
	rows := make([][]blockRun, g.B*g.H*g.NumQ)
	err := forRows(g, func(b, h, qb int, scratch *[]float64) error {
		i := (b*g.H+h)*g.NumQ + qb
		for kb := range g.NumK {
			vals, err := te.eval(b, h, qb, kb, scratch)
			if err != nil {
				return err
			}
			rows[i] = appendBlock(rows[i], qb, kb, classOf(vals))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rowsToRuns(g, rows)
}

// tileEval evaluates a mask on whole blocks with the interpreter: the mod
// lowered with LowerModTile (q_idx a column of BlockQ positions, kv_idx a
// row of BlockK), positions past the sequence ends repeating the last one.
type tileEval struct {
	g    *Grid // the geometry (no classes)
	sh   Shape
	inst *lang.ModInst
	p    *cpu.Prepared
	auxs []any
	qt   tir.Type
	kt   tir.Type
}

func newTileEval(prog *lang.Program, inst *lang.ModInst, sh Shape, opts Options, aux map[string]any) (*tileEval, error) {
	g, sh, auxs, err := newGridArgs(prog, inst, sh, opts, aux)
	if err != nil {
		return nil, err
	}
	consts := map[int]any{paramSeqQ: int64(g.SeqQ), paramSeqK: int64(g.SeqK), paramBatch: int64(sh.B), paramHeads: int64(sh.H)}
	if err := scalarConsts(inst, aux, consts); err != nil {
		return nil, err
	}
	bq, bk := g.BlockQ, g.BlockK
	m, _, err := modFunc(prog, inst, bq, bk, consts)
	if err != nil {
		return nil, err
	}
	p, err := cpu.Prepare(m, "mask")
	if err != nil {
		return nil, err
	}
	return &tileEval{g: g, sh: sh, inst: inst, p: p, auxs: auxs, qt: tir.Tensor(tir.I32, bq, 1), kt: tir.Tensor(tir.I32, 1, bk)}, nil
}

// eval gives the mask on block (qb, kb) of mask (b, h), BlockQ×BlockK
// values row-major (positions past the sequence ends repeat the last
// one). It is safe for concurrent use, with a scratch slice per goroutine.
func (te *tileEval) eval(b, h, qb, kb int, scratch *[]float64) ([]float64, error) {
	g := te.g
	bq, bk := g.BlockQ, g.BlockK
	qv := grow(scratch, bq+bk)
	kv := qv[bq:]
	qv = qv[:bq]
	for i := range qv {
		qv[i] = float64(min(qb*bq+i, g.SeqQ-1))
	}
	for j := range kv {
		kv[j] = float64(min(kb*bk+j, g.SeqK-1))
	}
	args := append([]any{b, h, cpu.Tensor{Type: te.qt, Vals: qv}, cpu.Tensor{Type: te.kt, Vals: kv}, g.SeqQ, g.SeqK, te.sh.B, te.sh.H}, te.auxs...)
	res, err := te.p.Call(args...)
	if err != nil {
		return nil, fmt.Errorf("blockmask: evaluating mask %s on block q=%d kv=%d (b=%d, h=%d): %w", te.inst, qb, kb, b, h, err)
	}
	return res[0].Vals, nil
}

func grow(s *[]float64, n int) []float64 {
	if cap(*s) < n {
		*s = make([]float64, n)
	}
	return (*s)[:n]
}

func classOf(vals []float64) Class {
	var t, f bool
	for _, v := range vals {
		if v != 0 {
			t = true
		} else {
			f = true
		}
		if t && f {
			return Partial
		}
	}
	if t {
		return Full
	}
	return Empty
}

// forRows runs fn for every (b, h, q block) of g on GOMAXPROCS goroutines
// and returns the error of the first failing row, in order.
func forRows(g *Grid, fn func(b, h, qb int, scratch *[]float64) error) error {
	total := g.B * g.H * g.NumQ
	errs := make([]error, total)
	var mu sync.Mutex
	next := 0
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), total) {
		wg.Go(func() {
			var scratch []float64
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= total {
					return
				}
				qb := i % g.NumQ
				h := i / g.NumQ % g.H
				b := i / (g.NumQ * g.H)
				errs[i] = fn(b, h, qb, &scratch)
			}
		})
	}
	wg.Wait()
	return firstErr(errs)
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// BruteForce evaluates the mask on every (q, kv) of every (b, h) mask with
// the interpreter (the mod lowered with LowerMod, one call per element) and
// classifies the blocks: the reference the other builders are tested
// against. It is slow; use it on small problems.
func BruteForce(prog *lang.Program, inst *lang.ModInst, sh Shape, opts Options, aux map[string]any) (*BlockMask, error) {
	g, sh, auxs, err := newGridArgs(prog, inst, sh, opts, aux)
	if err != nil {
		return nil, err
	}
	m, _, err := modFunc(prog, inst, 0, 0, map[int]any{paramSeqQ: int64(g.SeqQ), paramSeqK: int64(g.SeqK)})
	if err != nil {
		return nil, err
	}
	p, err := cpu.Prepare(m, "mask")
	if err != nil {
		return nil, err
	}
	return bruteRows(g, func(b, h, q, kv int) (bool, error) {
		res, err := p.Call(append([]any{b, h, q, kv, g.SeqQ, g.SeqK, sh.B, sh.H}, auxs...)...)
		if err != nil {
			return false, fmt.Errorf("blockmask: evaluating mask %s at q=%d kv=%d (b=%d, h=%d): %w", inst, q, kv, b, h, err)
		}
		return res[0].Vals[0] != 0, nil
	})
}

// BruteForceFunc is BruteForce for a mask written in Go: f(b, h, q, kv)
// for b < sh.B, h < sh.H (taken as given: pass B = 1 for a mask that
// ignores b).
func BruteForceFunc(sh Shape, opts Options, f func(b, h, q, kv int) bool) (*BlockMask, error) {
	sh, opts = sh.withDefaults(), opts.withDefaults()
	g, err := newGeometry(sh.B, sh.H, sh.SeqQ, sh.SeqK, opts.BlockQ, opts.BlockK)
	if err != nil {
		return nil, err
	}
	return bruteRows(g, func(b, h, q, kv int) (bool, error) { return f(b, h, q, kv), nil })
}

// bruteRows classifies every block of g by evaluating f on each of its
// pairs, and lists them.
func bruteRows(g *Grid, f func(b, h, q, kv int) (bool, error)) (*BlockMask, error) {
	rows := make([][]blockRun, g.B*g.H*g.NumQ)
	err := forRows(g, func(b, h, qb int, _ *[]float64) error {
		for kb := range g.NumK {
			var t, fl bool
			for q := qb * g.BlockQ; q < qb*g.BlockQ+g.Rows(qb); q++ {
				for kv := kb * g.BlockK; kv < kb*g.BlockK+g.Cols(kb); kv++ {
					v, err := f(b, h, q, kv)
					if err != nil {
						return err
					}
					t, fl = t || v, fl || !v
				}
			}
			c := Empty
			switch {
			case t && fl:
				c = Partial
			case t:
				c = Full
			}
			i := (b*g.H+h)*g.NumQ + qb
			rows[i] = appendBlock(rows[i], qb, kb, c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rowsToRuns(g, rows)
}
