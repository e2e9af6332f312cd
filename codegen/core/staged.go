package core

import "github.com/fac-compiler/fac/tir"

// Staged is a load whose tile goes straight to shared memory for a
// tensor-core dot in the same block, never visiting registers (cp.async on
// sm80). A target's phase marks such loads (Stage); the core gives them
// Layout during assignment, places their tiles at the start of shared
// memory (plan-async, asking Target.PlanStaged) and keeps the scratch area
// of conversions clear of them while they are in flight.
type Staged struct {
	Load    *tir.Op
	Dot     *tir.Op
	Operand int        // 0: A, 1: B
	View    *tir.Value // the dot operand: the load's result or its trans
	// Layout is the load's register layout: which thread copies which
	// elements.
	Layout Layout
	// ByteOff is the tile's offset from the start of shared memory, Bytes
	// its size (set by plan-async).
	ByteOff, Bytes int
	// Plan is the target's data about the tile (sm80: its ldmatrix plan).
	Plan any

	seq     int // issue number, set when the load is lowered
	regions int // regions lowered before it was issued (see StagedAfter)
}

// Stage marks st.Load as staged (before assign-layouts).
func (l *Lowerer) Stage(st *Staged) { l.a.async[st.Load] = st }

// StagedLoad is the staging of load op, or nil.
func (l *Lowerer) StagedLoad(op *tir.Op) *Staged { return l.a.async[op] }

// StagedTile is the staged tile that holds value v (a staged load's result
// or a trans of it) once the load is lowered, or nil.
func (l *Lowerer) StagedTile(v *tir.Value) *Staged { return l.smemTiles[v] }

// StagedAfter is the number of staged loads issued after st with no region
// lowered in between, 0 when one was (control flow makes the count
// dynamic). A dot may leave that many later copies in flight when it
// waits for st.
func (l *Lowerer) StagedAfter(st *Staged) int {
	n := l.stagedIssued - st.seq - 1
	if l.regionsLowered != st.regions || n < 0 {
		return 0
	}
	return n
}

// lowerStaged issues a staged load through the target and records it: its
// tile is in flight until its dot is lowered.
func (l *Lowerer) lowerStaged(op *tir.Op, st *Staged) {
	l.target.LowerStagedLoad(l, op, st)
	st.seq = l.stagedIssued
	st.regions = l.regionsLowered
	l.stagedIssued++
	l.inFlight++
	l.smemTiles[op.Result()] = st
}

// planAsync keeps the staged loads whose dot reads them from shared memory
// and places their tiles at the start of shared memory, in program order;
// the scratch area of conversions, reductions and dot staging follows.
func (l *Lowerer) planAsync() {
	off := 0
	l.f.Body.Walk(func(op *tir.Op) bool {
		st := l.a.async[op]
		if st == nil {
			return true
		}
		n, ok := l.target.PlanStaged(l, st)
		if !ok {
			delete(l.a.async, op)
			return true
		}
		st.ByteOff, st.Bytes = off, n
		off = (off + n + 127) &^ 127
		return true
	})
	l.scratchBase = off
	l.smemBytes = off
}

// IsZeroConst reports whether v is a constant zero (+0.0, 0 or false).
func IsZeroConst(v *tir.Value) bool {
	if v.Def == nil || v.Def.Kind != tir.OpConst {
		return false
	}
	switch c := v.Def.Attr("value").(type) {
	case float64:
		return c == 0 && !signbit(c)
	case int64:
		return c == 0
	case bool:
		return !c
	}
	return false
}

func signbit(f float64) bool { return 1/f < 0 }
