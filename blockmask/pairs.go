package blockmask

// Counting the (q, kv) pairs a mask keeps, in O(blocks): full blocks count
// their area, empty ones nothing, and only partial blocks are looked into.

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/fac-compiler/fac/lang"
)

// KeptPairs counts the (q, kv) pairs of [0,SeqQ)×[0,SeqK) that the mask
// keeps, for each (b, h) mask of its block mask (index b·H + h, B and H
// those of the block mask: 1 where the mask ignores b or h), and returns
// the block mask with the builder that made it.
//
// It builds the block mask (Build), counts full blocks by their area
// clipped to the sequences, and counts inside partial blocks only: row by
// row with the analytic bounds when the mask was built analytically (a row
// is split where one of its affine comparisons changes sign, so a row of a
// window or causal block costs a few evaluations; see
// Analyzer.KeptPairs), else by evaluating the partial blocks' tiles on the
// CPU interpreter. Either way the count is exact, and the cost follows the
// partial blocks, not SeqQ·SeqK.
func KeptPairs(prog *lang.Program, inst *lang.ModInst, sh Shape, opts Options, vals map[string]any) ([]int64, *BlockMask, Method, error) {
	n, bm, err := keptPairsAnalytic(prog, inst, sh, opts, vals)
	if err == nil {
		return n, bm, MethodAnalytic, nil
	}
	if !errors.Is(err, ErrNotAnalyzable) {
		return nil, nil, 0, err
	}
	te, err := newTileEval(prog, inst, sh, opts, vals)
	if err != nil {
		return nil, nil, 0, err
	}
	if bm, err = EvaluateCPU(prog, inst, sh, opts, vals); err != nil {
		return nil, nil, 0, err
	}
	// A mask reading aux tensors: rows bounded with the data, as EvaluateCPU
	// classifies it.
	if len(inst.AuxParams()) > 0 {
		if a, err := newAnalyzer(prog, inst, sh, vals, true); err == nil && a.B == bm.B && a.H == bm.H {
			n, err := a.KeptPairs(bm)
			if err == nil || !errors.Is(err, ErrNotAnalyzable) {
				return n, bm, MethodEvaluatedCPU, err
			}
		}
	}
	n, err = countPartial(bm, func() func(m, qb, kb int) (int64, error) {
		var scratch []float64
		return func(m, qb, kb int) (int64, error) {
			v, err := te.eval(m/bm.H, m%bm.H, qb, kb, &scratch)
			if err != nil {
				return 0, err
			}
			rows, cols := min(bm.BlockQ, bm.SeqQ-qb*bm.BlockQ), min(bm.BlockK, bm.SeqK-kb*bm.BlockK)
			var n int64
			for i := range rows {
				for _, x := range v[i*bm.BlockK:][:cols] {
					if x != 0 {
						n++
					}
				}
			}
			return n, nil
		}
	})
	if err != nil {
		return nil, nil, 0, err
	}
	return n, bm, MethodEvaluatedCPU, nil
}

func keptPairsAnalytic(prog *lang.Program, inst *lang.ModInst, sh Shape, opts Options, vals map[string]any) ([]int64, *BlockMask, error) {
	a, err := NewAnalyzerWith(prog, inst, sh, vals)
	if err != nil {
		return nil, nil, err
	}
	bm, err := a.BlockMask(opts)
	if err != nil {
		return nil, nil, err
	}
	n, err := a.KeptPairs(bm)
	if err != nil {
		return nil, nil, err
	}
	return n, bm, nil
}

// KeptPairs counts the pairs each (b, h) mask of bm keeps (bm made by this
// analyzer, with BlockMask or Grid and FromClasses): full blocks by area,
// partial ones a row at a time. A row is bounded as a whole; where it is
// undecided it is split at the position where one of its undecided affine
// comparisons changes sign (found from the form's coefficients), or in the
// middle when none is, and each piece is bounded again. A row of a
// causal or window block thus takes a few evaluations, whatever the block
// size. Rows of partial blocks are counted on GOMAXPROCS goroutines.
func (a *Analyzer) KeptPairs(bm *BlockMask) ([]int64, error) {
	if bm.B != a.B || bm.H != a.H || bm.SeqQ != a.SeqQ || bm.SeqK != a.SeqK {
		return nil, fmt.Errorf("blockmask: block mask is B=%d H=%d %d×%d, analyzer B=%d H=%d %d×%d", bm.B, bm.H, bm.SeqQ, bm.SeqK, a.B, a.H, a.SeqQ, a.SeqK)
	}
	if err := bm.checkLists(); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	return countPartial(bm, func() func(m, qb, kb int) (int64, error) {
		mu.Lock()
		es := make([]*evaluator, len(a.progs))
		for i, e := range a.progs {
			es[i] = e.clone()
		}
		mu.Unlock()
		return func(m, qb, kb int) (int64, error) {
			e := es[m]
			e.setBH()
			q0, k0 := int64(qb*bm.BlockQ), int64(kb*bm.BlockK)
			r := rect{q0, min(q0+int64(bm.BlockQ), int64(bm.SeqQ)) - 1, k0, min(k0+int64(bm.BlockK), int64(bm.SeqK)) - 1}
			var n int64
			var hints []int64
			for q := r.q0; q <= r.q1; q++ {
				c, changes, err := e.countRow(q, r.k0, r.k1, hints)
				if err != nil {
					return 0, fmt.Errorf("%w (mask %s, block q=%d kv=%d of b=%d h=%d)", err, a.mask, qb, kb, e.b, e.h)
				}
				n, hints = n+c, changes
			}
			return n, nil
		}
	})
}

// countPartial sums, per (b, h) mask of bm, the area of the full blocks and
// what count gives for each partial block. newCounter makes one counter per
// goroutine.
func countPartial(bm *BlockMask, newCounter func() func(m, qb, kb int) (int64, error)) ([]int64, error) {
	nm := bm.B * bm.H
	out := make([]int64, nm)
	lastK := bm.SeqK - (bm.NumK-1)*bm.BlockK
	type job struct{ m, qb, kb int32 }
	var jobs []job
	for m := range nm {
		for qb := range bm.NumQ {
			r := m*bm.NumQ + qb
			rows := int64(min(bm.BlockQ, bm.SeqQ-qb*bm.BlockQ))
			full := bm.FullKVIndices[r*bm.KVWidth:][:bm.FullKVNumBlocks[r]]
			cols := int64(len(full)) * int64(bm.BlockK)
			if slices.Contains(full, int32(bm.NumK-1)) {
				cols -= int64(bm.BlockK - lastK)
			}
			out[m] += rows * cols
			for _, kb := range bm.KVIndices[r*bm.KVWidth:][:bm.KVNumBlocks[r]] {
				jobs = append(jobs, job{int32(m), int32(qb), kb})
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(jobs))
	sums := make([][]int64, workers)
	errs := make([]error, workers)
	var next int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	const chunk = 64
	for w := range workers {
		sums[w] = make([]int64, nm)
		wg.Go(func() {
			count := newCounter()
			for {
				mu.Lock()
				i := next
				next += chunk
				mu.Unlock()
				if i >= int64(len(jobs)) {
					return
				}
				for _, j := range jobs[i:min(i+chunk, int64(len(jobs)))] {
					n, err := count(int(j.m), int(j.qb), int(j.kb))
					if err != nil {
						errs[w] = err
						return
					}
					sums[w][j.m] += n
				}
			}
		})
	}
	wg.Wait()
	if err := firstErr(errs); err != nil {
		return nil, err
	}
	for _, s := range sums {
		for m, n := range s {
			out[m] += n
		}
	}
	return out, nil
}

// clone is a copy of e with its own slots and scratch, for another
// goroutine; the code is shared (it is never written).
func (e *evaluator) clone() *evaluator {
	c := *e
	c.slots = slices.Clone(e.slots)
	c.kTab, c.kBad, c.levelOff, c.grid, c.fail = nil, nil, nil, nil, nil
	c.segs, c.changes = nil, [2][]int64{}
	return &c
}

// countRow counts the kv in [k0, k1] that row q keeps (see
// Analyzer.KeptPairs). hints are positions where the previous row of the
// block changed value: a row whose bounds are undecided and that no affine
// comparison splits is first cut there (a vertical boundary, such as a
// chunk's, then costs two evaluations a row instead of a bisection). It
// returns this row's value changes, in the evaluator's scratch (valid until
// the next call but one).
func (e *evaluator) countRow(q, k0, k1 int64, hints []int64) (int64, []int64, error) {
	var n int64
	segs := append(e.segs[:0], [2]int64{k0, k1})
	changes := e.changes[e.flip][:0]
	defer func() { e.segs, e.changes[e.flip] = segs[:0], changes[:0]; e.flip ^= 1 }()
	last := int64(-1) // value of the decided piece before: -1 none, 0 false, 1 true
	first := true
	for len(segs) > 0 {
		s := segs[len(segs)-1]
		segs = segs[:len(segs)-1]
		r := rect{q, q, s[0], s[1]}
		e.fail = nil
		v := e.eval(r)
		failed := e.fail != nil
		e.fail = nil
		if failed {
			if r.point() {
				return 0, nil, divZeroAt(r)
			}
			v = bMaybe
		}
		if v.lo == v.hi { // decided: pieces come left to right
			if last >= 0 && v.lo != last {
				changes = append(changes, s[0])
			}
			last = v.lo
			if v.lo == 1 {
				n += s[1] - s[0] + 1
			}
			first = false
			continue
		}
		if r.point() {
			return 0, nil, notAnalyzable("internal error: undecided at a single position")
		}
		var pieces [3][2]int64
		np := 0
		if !failed {
			pieces, np = e.cutAtSign(q, s[0], s[1])
		}
		if np >= 2 {
			segs = pushPieces(segs, pieces[:np])
		} else if first && cutAt(hints, s[0], s[1]) {
			// The previous row's changes, last piece pushed first.
			end := s[1]
			for i := len(hints) - 1; i >= 0; i-- {
				if h := hints[i]; h > s[0] && h <= s[1] {
					segs = append(segs, [2]int64{h, end})
					end = h - 1
				}
			}
			segs = append(segs, [2]int64{s[0], end})
		} else {
			m := s[0] + (s[1]-s[0])/2
			segs = append(segs, [2]int64{m + 1, s[1]}, [2]int64{s[0], m})
		}
		first = false
	}
	return n, changes, nil
}

// cutAt reports whether one of hints falls inside (x, y].
func cutAt(hints []int64, x, y int64) bool {
	for _, h := range hints {
		if h > x && h <= y {
			return true
		}
	}
	return false
}

// pushPieces pushes ascending pieces so that the first is popped first.
func pushPieces(segs [][2]int64, pieces [][2]int64) [][2]int64 {
	for i := len(pieces) - 1; i >= 0; i-- {
		segs = append(segs, pieces[i])
	}
	return segs
}

// cutAtSign splits kv ∈ [x, y] of row q where the first undecided affine
// comparison of the last evaluation changes sign: its difference form d is
// negative, zero, then positive (or the reverse) along the row, and each
// non-empty piece is returned. It returns fewer than 2 pieces when no
// comparison can split the row.
func (e *evaluator) cutAtSign(q, x, y int64) (pieces [3][2]int64, n int) {
	for i := range e.code {
		in := &e.code[i]
		if in.op != opCmpAff || !in.safe || in.d.k == 0 {
			continue
		}
		if v := e.slots[in.dst]; v.lo == v.hi {
			continue
		}
		// d = dk·kv + c along the row; with dk > 0 (negate both
		// otherwise: the same pieces), d < 0 up to e1, d = 0 up to e2.
		dk, c := in.d.k, in.d.q*q+in.d.c
		if dk < 0 {
			dk, c = -dk, -c
		}
		e1, e2 := floorDiv(-c-1, dk), floorDiv(-c, dk)
		for _, p := range [3][2]int64{{x, min(e1, y)}, {max(e1+1, x), min(e2, y)}, {max(e2+1, x), y}} {
			if p[0] <= p[1] {
				pieces[n] = p
				n++
			}
		}
		if n >= 2 {
			return pieces, n
		}
		n = 0
	}
	return pieces, 0
}

// floorDiv is a/b rounded down, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
