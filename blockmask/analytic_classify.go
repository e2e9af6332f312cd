package blockmask

// Classification with the analytic builder's programs: whole grids, a row
// at a time over a tree of column spans, and single rectangles, refined by
// bisection when their bounds are undecided.

import (
	"errors"
	"fmt"
)

// fill classifies the blocks of one (b, h) mask into out ([NumQ, NumK]).
//
// Each block row is classified top-down over a binary tree of column spans:
// a span whose rectangle the bounds decide is filled at once, an undecided
// one is split, and an undecided single block is refined. The kv-only
// values of a span are the hulls of its columns' (sound for the union), kept
// per tree level. A row of a causal or windowed mask thus costs a few
// evaluations per class boundary instead of one per block.
func (e *evaluator) fill(g *Grid, out []Class) error {
	e.fail = nil
	s := e.slots
	e.setBH()
	e.run(e.constCode, rect{})
	if e.fail != nil { // values of no position are single values: a real division by zero
		return notAnalyzable("it divides by zero (in a value that depends on neither q_idx nor kv_idx)")
	}
	nk, nout := g.NumK, len(e.kOut)
	// Tree levels: level l has ceil(nk / 2^l) nodes; the top has one.
	levels := 1
	for (1 << (levels - 1)) < nk {
		levels++
	}
	e.levelOff = e.levelOff[:0]
	nodes := 0
	for l := range levels {
		e.levelOff = append(e.levelOff, nodes)
		nodes += (nk + (1 << l) - 1) >> l
	}
	if cap(e.kTab) < nodes*nout {
		e.kTab = make([]ival, nodes*nout)
	}
	if cap(e.kBad) < nodes {
		e.kBad = make([]bool, nodes)
	}
	kTab, kBad := e.kTab[:nodes*nout], e.kBad[:nodes]
	for kb := range nk {
		k0 := int64(kb * g.BlockK)
		e.fail = nil
		e.run(e.kCode, rect{k0: k0, k1: min(k0+int64(g.BlockK), int64(g.SeqK)) - 1})
		// A column whose kv-only values may divide by zero is not
		// bounded: its spans are refined from scratch.
		kBad[kb] = e.fail != nil
		for i, sl := range e.kOut {
			kTab[kb*nout+i] = s[sl]
		}
	}
	e.fail = nil
	for l := 1; l < levels; l++ {
		prev, cur := e.levelOff[l-1], e.levelOff[l]
		nPrev := (nk + (1 << (l - 1)) - 1) >> (l - 1)
		for j := 0; 2*j < nPrev; j++ {
			bad := kBad[prev+2*j]
			for i := range nout {
				a := kTab[(prev+2*j)*nout+i]
				if 2*j+1 < nPrev {
					b := kTab[(prev+2*j+1)*nout+i]
					a = ival{min(a.lo, b.lo), max(a.hi, b.hi)}
				}
				kTab[(cur+j)*nout+i] = a
			}
			if 2*j+1 < nPrev {
				bad = bad || kBad[prev+2*j+1]
			}
			kBad[cur+j] = bad
		}
	}
	e.grid = g
	for qb := range g.NumQ {
		q0 := int64(qb * g.BlockQ)
		q1 := min(q0+int64(g.BlockQ), int64(g.SeqQ)) - 1
		e.runRow(q0, q1)
		if err := e.span(out[qb*nk:][:nk], q0, q1, levels-1, 0); err != nil {
			e.grid = nil
			return err
		}
	}
	e.grid = nil
	return nil
}

// span classifies node j of tree level l of a block row.
func (e *evaluator) span(row []Class, q0, q1 int64, l, j int) error {
	g, s := e.grid, e.slots
	c0, c1 := j<<l, min((j+1)<<l, len(row))-1
	r := rect{q0, q1, int64(c0 * g.BlockK), min(int64((c1+1)*g.BlockK), int64(g.SeqK)) - 1}
	node := e.levelOff[l] + j
	v, failed := bMaybe, e.kBad[node] || e.rowFailed
	if !failed {
		for i, sl := range e.kOut {
			s[sl] = e.kTab[node*len(e.kOut)+i]
		}
		e.run(e.qkCode, r)
		if e.fail != nil { // the bounds may divide by zero: not decided here
			e.fail, failed = nil, true
		} else {
			v = s[e.result]
		}
	}
	switch {
	case v.lo == 1:
		fillClass(row[c0:c1+1], Full)
		return nil
	case v.hi == 0:
		fillClass(row[c0:c1+1], Empty)
		return nil
	}
	if l > 0 {
		if err := e.span(row, q0, q1, l-1, 2*j); err != nil {
			return err
		}
		if (2*j+1)<<(l-1) < len(row) {
			return e.span(row, q0, q1, l-1, 2*j+1)
		}
		return nil
	}
	c, err := e.refine(r, failed)
	if err != nil {
		return fmt.Errorf("%w (block q=%d kv=%d of b=%d h=%d)", err, int(q0)/g.BlockQ, c0, e.b, e.h)
	}
	row[c0] = c
	// refine ran the whole program on other rectangles: recompute the
	// row's q values.
	e.runRow(q0, q1)
	return nil
}

// runRow computes the q-only values of a block row.
func (e *evaluator) runRow(q0, q1 int64) {
	e.fail = nil
	e.run(e.qCode, rect{q0: q0, q1: q1})
	e.rowFailed, e.fail = e.fail != nil, nil
}

// fillClass sets xs to c at memory speed: a loop of byte stores is the most
// of a grid's cost at a million positions (67M blocks), where a few
// evaluations per row decide it.
func fillClass(xs []Class, c Class) {
	if c == 0 || len(xs) == 0 {
		clear(xs)
		return
	}
	xs[0] = c
	for n := 1; n < len(xs); n *= 2 {
		copy(xs[n:], xs[:n])
	}
}

func divZeroAt(p rect) error {
	return notAnalyzable("it divides by zero at q_idx=%d, kv_idx=%d", p.q0, p.k0)
}

// classify decides a rectangle. The abstract result is sound: true means
// true everywhere, false false everywhere. An unknown result is refined:
// corners first, then bisection (each half evaluated abstractly) until both
// a true and a false part are found (partial) or every part is decided.
func (e *evaluator) classify(r rect) (Class, error) {
	e.fail = nil
	v := e.eval(r)
	failed := e.fail != nil
	if failed {
		v = bMaybe
	}
	if v.lo == 1 {
		return Full, nil
	}
	if v.hi == 0 {
		return Empty, nil
	}
	return e.refine(r, failed)
}

// refine decides a rectangle whose abstract value is unknown. failed says
// the bounds on r may divide by zero: then every part of r must be bounded
// without that (or a position found where the mask divides by zero), even
// after a true and a false position are found, so that a mask the
// evaluating builders would fail on is never classified.
func (e *evaluator) refine(r rect, failed bool) (Class, error) {
	e.fail = nil
	if r.point() {
		v := e.eval(r)
		if e.fail != nil {
			return 0, divZeroAt(r)
		}
		switch v {
		case bTrue:
			return Full, nil
		case bFalse:
			return Empty, nil
		}
		return 0, notAnalyzable("internal error: undecided at a single position")
	}
	var seenT, seenF bool
	for _, p := range [4]rect{{r.q1, r.q1, r.k0, r.k0}, {r.q0, r.q0, r.k1, r.k1}, {r.q0, r.q0, r.k0, r.k0}, {r.q1, r.q1, r.k1, r.k1}} {
		v := e.eval(p)
		if e.fail != nil {
			return 0, divZeroAt(p)
		}
		seenT = seenT || v.lo == 1
		seenF = seenF || v.hi == 0
		if seenT && seenF && !failed {
			return Partial, nil
		}
	}
	stack := e.stack[:0]
	stack = append(stack, pending{r, failed})
	nFailed := 0 // failed rectangles on the stack
	if failed {
		nFailed++
	}
	budget := e.budget
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if p.failed {
			nFailed--
		} else if seenT && seenF {
			continue // only failed parts still need looking at
		}
		r := p.r
		var halves [2]rect
		if r.q1-r.q0 >= r.k1-r.k0 {
			m := r.q0 + (r.q1-r.q0)/2
			halves = [2]rect{{r.q0, m, r.k0, r.k1}, {m + 1, r.q1, r.k0, r.k1}}
		} else {
			m := r.k0 + (r.k1-r.k0)/2
			halves = [2]rect{{r.q0, r.q1, r.k0, m}, {r.q0, r.q1, m + 1, r.k1}}
		}
		for _, h := range halves {
			if budget--; budget < 0 {
				return 0, notAnalyzable("the bounds stay undecided after %d refinements", e.budget)
			}
			if e.total--; e.total < 0 {
				return 0, notAnalyzable("refining undecided blocks costs more than evaluating the mask")
			}
			v := e.eval(h)
			hFailed := e.fail != nil
			if hFailed {
				if h.point() {
					return 0, divZeroAt(h)
				}
				e.fail, v = nil, bMaybe // undecided: split further
			}
			switch {
			case v.lo == 1:
				seenT = true
			case v.hi == 0:
				seenF = true
			case h.point():
				return 0, notAnalyzable("internal error: undecided at a single position")
			default:
				if len(stack) == cap(stack) {
					return 0, notAnalyzable("refinement too deep")
				}
				stack = append(stack, pending{h, hFailed})
				if hFailed {
					nFailed++
				}
			}
		}
		if seenT && seenF && nFailed == 0 {
			return Partial, nil
		}
	}
	switch {
	case seenT && seenF:
		return Partial, nil
	case seenT:
		return Full, nil
	}
	return Empty, nil
}

type pending struct {
	r      rect
	failed bool
}

// quad classifies the blocks of one (b, h) mask without a grid: it bounds
// rectangles of blocks, from the whole grid down, and splits one in two
// (across its longer side, in positions) only where the bounds leave it
// undecided; an undecided single block is refined as fill refines it. A
// decided rectangle becomes one run, so a mask costs evaluations in
// proportion to the length of its class boundaries, in blocks, not to the
// number of blocks. The first half is visited before the second, which
// keeps the runs of each block row (column) in order (see listsFromRuns).
type quad struct {
	e              *evaluator
	blockQ, blockK int64
	seqQ, seqK     int64
	runs           []blockRun
	leaf           func(qb, kb int32) (Class, error)
}

// blocks appends the runs of the partial and full blocks of e's mask. leaf,
// when not nil, classifies a block that refining cannot decide (by
// evaluating it); else such a block declines.
func (e *evaluator) blocks(seqQ, seqK, blockQ, blockK int, runs []blockRun, leaf func(qb, kb int32) (Class, error)) ([]blockRun, error) {
	e.fail = nil
	e.setBH()
	e.run(e.constCode, rect{})
	if e.fail != nil { // values of no position are single values: a real division by zero
		return nil, notAnalyzable("it divides by zero (in a value that depends on neither q_idx nor kv_idx)")
	}
	qd := &quad{e: e, blockQ: int64(blockQ), blockK: int64(blockK), seqQ: int64(seqQ), seqK: int64(seqK), runs: runs, leaf: leaf}
	nq, nk := cdiv(seqQ, blockQ), cdiv(seqK, blockK)
	if err := qd.split(0, int32(nq-1), 0, int32(nk-1)); err != nil {
		return nil, err
	}
	return qd.runs, nil
}

// split classifies q blocks [r0, r1] × kv blocks [c0, c1].
func (qd *quad) split(r0, r1, c0, c1 int32) error {
	e := qd.e
	r := rect{int64(r0) * qd.blockQ, min(int64(r1+1)*qd.blockQ, qd.seqQ) - 1, int64(c0) * qd.blockK, min(int64(c1+1)*qd.blockK, qd.seqK) - 1}
	e.fail = nil
	// The constant values are in place (blocks ran them; refine's whole
	// runs rewrite them with the same values).
	e.run(e.qCode, r)
	e.run(e.kCode, r)
	e.run(e.qkCode, r)
	failed := e.fail != nil
	v := e.slots[e.result]
	if failed { // the bounds may divide by zero: not decided here
		e.fail, v = nil, bMaybe
	}
	switch {
	case v.lo == 1:
		qd.runs = append(qd.runs, blockRun{r0, r1, c0, c1, Full})
		return nil
	case v.hi == 0:
		return nil
	}
	if r0 == r1 && c0 == c1 {
		c, err := e.refine(r, failed)
		if err != nil && qd.leaf != nil && errors.Is(err, ErrNotAnalyzable) {
			c, err = qd.leaf(r0, c0)
			if err != nil {
				return err
			}
		}
		if err != nil {
			return fmt.Errorf("%w (block q=%d kv=%d of b=%d h=%d)", err, r0, c0, e.b, e.h)
		}
		if c != Empty {
			qd.runs = append(qd.runs, blockRun{r0, r1, c0, c1, c})
		}
		return nil
	}
	if c0 == c1 || (r0 < r1 && r.q1-r.q0 >= r.k1-r.k0) {
		m := r0 + (r1-r0)/2
		if err := qd.split(r0, m, c0, c1); err != nil {
			return err
		}
		return qd.split(m+1, r1, c0, c1)
	}
	m := c0 + (c1-c0)/2
	if err := qd.split(r0, r1, c0, m); err != nil {
		return err
	}
	return qd.split(r0, r1, m+1, c1)
}
