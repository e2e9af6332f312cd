package core

import (
	"github.com/fac-compiler/fac/tir"
)

// Plan is what the phases between a kernel's layouts and its emission
// decide about its asynchronous copies and its shared memory:
//
//   - which loads are staged straight to shared memory for a tensor-core
//     dot (Stage: the target's select-async and stage-resident, before
//     assign-layouts, which gives them their copy layout);
//   - which of them stay, their sizes and their places (plan-async,
//     Target.PlanStaged; placed again by pipeline-loads, PlaceStaged);
//   - what else shared memory holds before the scratch area
//     (ReserveShared: sm90's mbarriers) and the parameters the code
//     generator adds (AddTensorMapParam: TMA's tensor maps).
//
// lower-llvm's Emitter reads it; Print shows it beside the staged loads.
type Plan struct {
	*kernel
	l      *Lowerer // handed to the target's hooks
	staged map[*tir.Op]*Staged
	// planned: plan-async sized and placed the tiles.
	planned bool
	// The staged tiles sit at the start of shared memory, the scratch area
	// of conversions and reductions starts at scratchBase; smemBytes is
	// what the plan takes (the Emitter adds the scratch area's).
	scratchBase, smemBytes int
	extra                  []*extraParam // parameters added by phases (params.go)
}

func newPlan(l *Lowerer) *Plan {
	return &Plan{kernel: l.kernel, l: l, staged: map[*tir.Op]*Staged{}}
}

// ReserveShared reserves bytes (8-byte aligned) of shared memory after
// the staged tiles, before the scratch area, for the target's own use
// (sm90's mbarriers), and returns their offset. Only after plan-async and
// pipeline-loads placed the tiles. A SharedTarget may place them itself
// (consumer groups: before the groups' own parts).
func (pl *Plan) ReserveShared(bytes int) int {
	if t, ok := pl.target.(SharedTarget); ok {
		if off, ok := t.ReserveShared(pl.l, bytes); ok {
			return off
		}
	}
	off := roundUpTo(pl.scratchBase, 8)
	pl.scratchBase = roundUpTo(off+bytes, 128)
	pl.smemBytes = max(pl.smemBytes, pl.scratchBase)
	return off
}

// Stage marks st.Load as staged (before assign-layouts).
func (pl *Plan) Stage(st *Staged) { pl.staged[st.Load] = st }

// Tiles are the staged tiles, in program order.
func (pl *Plan) Tiles() []*Staged {
	var out []*Staged
	pl.f.Body.Walk(func(op *tir.Op) bool {
		if st := pl.staged[op]; st != nil {
			out = append(out, st)
		}
		return true
	})
	return out
}

// StagedLoad is the staging of load op, or nil.
func (pl *Plan) StagedLoad(op *tir.Op) *Staged { return pl.staged[op] }

// planAsync keeps the staged loads whose dot reads them from shared memory
// and places their tiles at the start of shared memory, in program order;
// the scratch area of conversions, reductions and dot staging follows.
func (pl *Plan) planAsync() {
	pl.planned = true
	pl.f.Body.Walk(func(op *tir.Op) bool {
		st := pl.staged[op]
		if st == nil {
			return true
		}
		n, ok := pl.target.PlanStaged(pl.l, st)
		if !ok {
			delete(pl.staged, op)
			return true
		}
		st.Bytes = n
		return true
	})
	pl.placeStaged()
}

// placeStaged places the staged tiles (Bytes set) at the start of shared
// memory in program order (PlaceStaged without rings).
func (pl *Plan) placeStaged() { pl.PlaceStaged(nil) }

// PlaceStaged places the staged tiles (Bytes set; multi-buffered ones,
// Stride > 0, 1024-aligned so that swizzled tiles keep their pattern) at
// the start of shared memory in program order, and returns the loops of
// rings whose buffers a later tile took. rings are the loops whose tiles
// are multi-buffered (codegen/async's pipelined loops): tiles after such a
// loop of a frame (the kernel's top level, or the body of a top-level
// loop around the pipelined one: the backward's GQA loop, a persistent
// kernel's tile loop) reuse its buffers (the overlapped forward's last P·V
// reads its V there), once the loop's exit waited for its copies and a CTA
// barrier freed them. That keeps the forward's 128×128 tiles at three
// stages inside the 227 KB a block may have. A SharedTarget then places
// its own parts (SharedTarget.PlaceShared: consumer groups).
func (pl *Plan) PlaceStaged(rings map[*tir.Op]bool) (reused map[*tir.Op]bool) {
	reused = map[*tir.Op]bool{}
	off, end := 0, 0
	var after *tir.Op // the ring whose buffers off reuses
	place := func(op *tir.Op) bool {
		st := pl.staged[op]
		if st == nil {
			return true
		}
		if st.Stride > 0 {
			off = roundUpTo(off, 1024)
		}
		st.ByteOff = off
		off = (off + st.Bytes + 127) &^ 127
		end = max(end, off)
		if after != nil {
			reused[after] = true
		}
		return true
	}
	var frame func(ops []*tir.Op, top bool)
	frame = func(ops []*tir.Op, top bool) {
		for _, op := range ops {
			ring := rings[op]
			start := roundUpTo(off, 1024)
			if ring {
				reused[op] = false // set if a later tile takes its buffers; a loop's own tiles may take an earlier loop's
			}
			switch {
			case top && !ring && op.Kind == tir.OpFor:
				frame(op.Regions[0].Ops, false)
			case place(op):
				for _, r := range op.Regions {
					r.Walk(place)
				}
			}
			if ring {
				off, after = start, op
			}
		}
	}
	frame(pl.f.Body.Ops, true)
	if t, ok := pl.target.(SharedTarget); ok {
		end = t.PlaceShared(pl.l, end)
	}
	pl.scratchBase = end
	pl.smemBytes = end
	return reused
}
