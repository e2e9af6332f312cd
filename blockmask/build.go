package blockmask

import (
	"errors"
	"fmt"
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

// newGridFor makes the grid of a mask's block mask: B (H) is 1 unless the
// mask reads b (h). The block count is checked on that grid, not on sh.
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
	return NewGrid(b, h, sh.SeqQ, sh.SeqK, opts.BlockQ, opts.BlockK)
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
	g, err := newGridFor(prog, inst, sh, opts)
	if err != nil {
		return nil, err
	}
	sh = sh.withDefaults()
	auxs, err := inputArgs(inst, sh, aux)
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
	qt, kt := tir.Tensor(tir.I32, bq, 1), tir.Tensor(tir.I32, 1, bk)
	err = forRows(g, func(b, h, qb int, scratch *[]float64) error {
		qv := grow(scratch, bq+bk)
		kv := qv[bq:]
		qv = qv[:bq]
		for i := range qv {
			qv[i] = float64(min(qb*bq+i, g.SeqQ-1))
		}
		for kb := range g.NumK {
			for j := range kv {
				kv[j] = float64(min(kb*bk+j, g.SeqK-1))
			}
			args := append([]any{b, h, cpu.Tensor{Type: qt, Vals: qv}, cpu.Tensor{Type: kt, Vals: kv}, g.SeqQ, g.SeqK, sh.B, sh.H}, auxs...)
			res, err := p.Call(args...)
			if err != nil {
				return fmt.Errorf("blockmask: evaluating mask %s on block q=%d kv=%d (b=%d, h=%d): %w", inst, qb, kb, b, h, err)
			}
			g.Set(b, h, qb, kb, classOf(res[0].Vals))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return FromClasses(g)
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
	g, err := newGridFor(prog, inst, sh, opts)
	if err != nil {
		return nil, err
	}
	sh = sh.withDefaults()
	auxs, err := inputArgs(inst, sh, aux)
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
	err = bruteRows(g, func(b, h, q, kv int) (bool, error) {
		res, err := p.Call(append([]any{b, h, q, kv, g.SeqQ, g.SeqK, sh.B, sh.H}, auxs...)...)
		if err != nil {
			return false, fmt.Errorf("blockmask: evaluating mask %s at q=%d kv=%d (b=%d, h=%d): %w", inst, q, kv, b, h, err)
		}
		return res[0].Vals[0] != 0, nil
	})
	if err != nil {
		return nil, err
	}
	return FromClasses(g)
}

// BruteForceFunc is BruteForce for a mask written in Go: f(b, h, q, kv)
// for b < sh.B, h < sh.H (taken as given: pass B = 1 for a mask that
// ignores b).
func BruteForceFunc(sh Shape, opts Options, f func(b, h, q, kv int) bool) (*BlockMask, error) {
	sh, opts = sh.withDefaults(), opts.withDefaults()
	g, err := NewGrid(sh.B, sh.H, sh.SeqQ, sh.SeqK, opts.BlockQ, opts.BlockK)
	if err != nil {
		return nil, err
	}
	if err := bruteRows(g, func(b, h, q, kv int) (bool, error) { return f(b, h, q, kv), nil }); err != nil {
		return nil, err
	}
	return FromClasses(g)
}

func bruteRows(g *Grid, f func(b, h, q, kv int) (bool, error)) error {
	return forRows(g, func(b, h, qb int, _ *[]float64) error {
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
			g.Set(b, h, qb, kb, c)
		}
		return nil
	})
}
