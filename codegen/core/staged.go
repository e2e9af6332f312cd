package core

import (
	"slices"

	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

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
	// Stride, when the tile is double-buffered by pipeline-loads, is the
	// distance in bytes from its first buffer (at ByteOff) to its second;
	// 0 otherwise. Bytes then covers both.
	Stride int
	// Resident tiles are loaded once, before the loop whose dots read
	// them, and stay: the target waits for their copies at the load, and
	// no dot consumes them (sm90's stage-resident).
	Resident bool
	// Guard, when set while the copies are issued, is an i1 that must also
	// hold for any element to be copied (a prefetch past the last
	// iteration copies nothing).
	Guard value.Value
	// Elected, while the copies are issued, says that the thread lowering
	// them is the one that issues them all (TileWaiter.ReleaseBuffer's
	// fill), not every thread or a target-chosen one.
	Elected bool
	// Also are further dots of the load's block that read the same tile,
	// in program order (sm90: the backward's Q is B of S = K·Qᵀ and of
	// dK = dS·Q). The last of them consumes it.
	Also []StagedUse

	seq     int         // issue number, set when the load is lowered
	live    bool        // issued (or prefetched) and not yet consumed by its dot
	ready   bool        // live, and waited for by every thread behind a CTA barrier (AwaitStaged)
	regions int         // regions lowered before it was issued (see StagedAfter)
	dyn     value.Value // i32 bytes added to ByteOff: the buffer in use (pipelined tiles)
	buf     value.Value // i32 index of that buffer (nil: 0)
	parity  value.Value // i32 0/1: how many times the buffer in use was filled before, mod 2 (nil: 0)
	pipe    *pipeline   // the loop that prefetches it, or nil
	tailOf  *pipeline   // the loop whose last iteration issues it (pipetail.go), or nil
}

// Buffer is the index (i32) of the buffer in use of a multi-buffered
// tile: the one being filled while its copies are issued, the one read
// while its dots are lowered (nil: buffer 0).
func (st *Staged) Buffer() value.Value { return st.buf }

// Parity is, while st's dots are lowered, the parity (i32 0/1) of the
// fill of the buffer in use among that buffer's fills in its loop: what
// a wait on a per-buffer mbarrier phase needs (nil: 0, the first fill).
func (st *Staged) Parity() value.Value { return st.parity }

// PipeLoop is the loop that prefetches st (pipeline-loads), or nil.
func (st *Staged) PipeLoop() *tir.Op {
	if st.pipe == nil {
		return nil
	}
	return st.pipe.loop
}

// Tail reports whether st is a pipelined loop's tail (pipetail.go).
func (st *Staged) Tail() bool { return st.tailOf != nil }

// Stages is the number of buffers of st (1 unless pipelined).
func (st *Staged) Stages() int {
	if st.pipe == nil {
		return 1
	}
	return st.pipe.stages
}

// TileWaiter is implemented by targets some of whose staged copies
// complete on something other than cp.async groups (sm90's TMA, on
// mbarriers): WaitTile waits for the buffer in use of st and reports
// true, or reports false to leave st to cp.async.wait_group. Such copies
// still commit a (empty) cp.async group each, so that the group counts
// of the others stay right.
type TileWaiter interface {
	WaitTile(l *Lowerer, st *Staged) bool
	// ReleasesBuffers reports whether the buffers of pipelined tile st are
	// handed back for their next fill by ReleaseBuffer instead of by a CTA
	// barrier.
	ReleasesBuffers(st *Staged) bool
	// ReleaseBuffer marks buffer buf (i32) of tiles free for its next
	// fill when cond (i1) holds (the calling thread's reads of it, its
	// asynchronous dots included, are complete), and calls fill, which
	// issues the next fill's copies from the calling thread
	// (Staged.Elected), in the one thread that frees it last.
	ReleaseBuffer(l *Lowerer, tiles []*Staged, buf, cond value.Value, fill func())
	// OwnCompletion reports whether st's copies complete on their own
	// barrier (WaitTile waits for them wherever they were issued, by
	// whichever thread), so that they may be issued early from inside a
	// loop (a pipelined loop's tail, pipetail.go).
	OwnCompletion(st *Staged) bool
}

// StagedUse is one dot reading a staged tile: operand Operand of Dot,
// through View (the load's result or its trans).
type StagedUse struct {
	Dot     *tir.Op
	Operand int
	View    *tir.Value
}

// Uses are the dots that read st's tile, the first (Dot) first.
func (st *Staged) Uses() []StagedUse {
	return append([]StagedUse{{st.Dot, st.Operand, st.View}}, st.Also...)
}

// UseBy is st's use as operand i of dot op, if it is one.
func (st *Staged) UseBy(op *tir.Op, i int) (StagedUse, bool) {
	for _, u := range st.Uses() {
		if u.Dot == op && u.Operand == i {
			return u, true
		}
	}
	return StagedUse{}, false
}

// lastDot is the dot that consumes st: its last use.
func (st *Staged) lastDot() *tir.Op {
	if n := len(st.Also); n > 0 {
		return st.Also[n-1].Dot
	}
	return st.Dot
}

// StagedAddr is the address of element idx (i32, counted in t) of staged
// tile st: its buffer in use when the tile is double-buffered.
func (l *Lowerer) StagedAddr(t types.Type, st *Staged, idx value.Value) value.Value {
	if st.dyn != nil {
		sh := map[int]int64{1: 0, 2: 1, 4: 2, 8: 3}[typeBytes(t)]
		idx = l.b.NewAdd(idx, l.b.NewLShr(st.dyn, ConstI32(sh)))
	}
	return l.SharedAbs(t, st.ByteOff, idx)
}

// ReserveShared reserves bytes (8-byte aligned) of shared memory after
// the staged tiles, before the scratch area, for the target's own use
// (sm90's mbarriers), and returns their offset. Only after plan-async and
// pipeline-loads placed the tiles.
func (l *Lowerer) ReserveShared(bytes int) int {
	if l.grp != nil {
		return l.reserveGroupBars(bytes)
	}
	off := roundUpTo(l.scratchBase, 8)
	l.scratchBase = roundUpTo(off+bytes, 128)
	l.smemBytes = max(l.smemBytes, l.scratchBase)
	return off
}

// StagedDyn is the run-time byte offset of st's buffer in use from
// ByteOff (nil: none, the tile has one buffer).
func (st *Staged) StagedDyn() value.Value { return st.dyn }

// StagedMasks is the per-copy predicate of a staged load: its mask
// registers (nil: unmasked) ANDed with st.Guard; nil when neither.
func (l *Lowerer) StagedMasks(st *Staged, mask []value.Value, n int) []value.Value {
	if st.Guard == nil {
		return mask
	}
	out := make([]value.Value, n)
	for i := range out {
		if mask == nil {
			out[i] = st.Guard
		} else {
			out[i] = l.b.NewAnd(mask[i], st.Guard)
		}
	}
	return out
}

// CopyStaged issues the copies of a staged 16-bit tile whose layout gives
// each thread 8-element chunks: after a barrier when shared memory may still
// be read (the previous iteration's dot, or the scratch area overlapping
// the tiles), one 16-byte cp.async per chunk g from ptrs[g] to dst(g) (the
// shared address of register g's element), masked chunks copying nothing
// (cp.async zero-fills); when some chunk's global address is misaligned,
// scalar loads and stores of every register r to dst(r) instead. Then one
// commit group, and shared memory counts as clean: only writes follow the
// barrier, so a following staged load need not sync.
func (l *Lowerer) CopyStaged(ptrs, mask []value.Value, e tir.Elem, dst func(r int) value.Value) {
	if l.smemDirty {
		l.Barrier()
	}
	const v = 8
	i16s := SharedPtr(types.I16)
	l.AlignedOr(ptrs, nil, v, e, func() []value.Value {
		i8s, i8g := SharedPtr(types.I8), PtrTo(types.I8, 1)
		for g := 0; g < len(ptrs); g += v {
			d := l.b.NewBitCast(dst(g), i8s)
			src := l.b.NewBitCast(ptrs[g], i8g)
			var n value.Value = ConstI32(16)
			if mask != nil {
				n = l.b.NewSelect(mask[g], ConstI32(16), ConstI32(0))
			}
			l.b.NewCall(l.Decl("llvm.nvvm.cp.async.cg.shared.global.16.s", types.Void, i8s, i8g, types.I32), d, src, n)
		}
		return nil
	}, func() []value.Value {
		zero := ConstI16(0)
		for r, ptr := range ptrs {
			var val value.Value
			if mask == nil {
				val = l.b.NewLoad(types.I16, ptr)
			} else {
				val = l.MaskedLoad(ptr, mask[r], zero, e)
			}
			d := dst(r)
			if !types.Equal(d.Type(), i16s) {
				d = l.b.NewBitCast(d, i16s)
			}
			l.b.NewStore(val, d)
		}
		return nil
	})
	l.b.NewCall(l.Decl("llvm.nvvm.cp.async.commit.group", types.Void))
	l.smemDirty = false
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
	// A pipelined loop has no staged loads in nested regions (see
	// pipeline.go), so its counts stay static across them.
	if (st.pipe == nil && l.regionsLowered != st.regions) || n < 0 {
		return 0
	}
	return n
}

// AwaitStaged waits for the copies of tiles, the staged operand tiles dot
// op reads from shared memory, and reports whether the caller must now
// make them visible to the CTA (its fences, then a CTA barrier). Tiles
// made ready at an earlier dot need nothing. When a pipelined loop
// prefetched this iteration's tiles, the wait also covers those that later
// dots of op's block read (all landed an iteration ago, so waiting costs
// little), and those dots need neither wait nor barrier: attention's P·V
// then starts without a CTA barrier after the softmax, so the warpgroups
// are no longer forced into lockstep between their two GEMMs.
func (l *Lowerer) AwaitStaged(op *tir.Op, tiles []*Staged) bool {
	var group []*Staged
	for _, st := range tiles {
		if !st.Resident && !st.ready {
			group = append(group, st)
		}
	}
	if len(group) == 0 {
		return false
	}
	blk := l.a.blockOf[op.Results[0]]
	for _, st := range l.smemTiles {
		if st.live && !st.ready && !st.Resident && st.pipe != nil && st.pipe.active &&
			l.a.blockOf[st.Dot.Results[0]] == blk && !slices.Contains(group, st) {
			group = append(group, st)
		}
	}
	var last *Staged
	tw, _ := l.target.(TileWaiter)
	for _, st := range group {
		st.ready = true
		if tw != nil && tw.WaitTile(l, st) {
			continue
		}
		if last == nil || st.seq > last.seq {
			last = st
		}
	}
	if last != nil {
		l.b.NewCall(l.Decl("llvm.nvvm.cp.async.wait.group", types.Void, types.I32), ConstI32(int64(l.StagedAfter(last))))
	}
	if r := l.release; r != nil && r.p.active && l.depth == l.prefetchDepth && l.branchDepth == 0 {
		l.releaseBuffers()
	}
	// Tiles that every thread waited for itself need no CTA barrier.
	return last != nil
}

// lowerStaged issues a staged load through the target and records it: its
// tile is in flight until its dot is lowered.
func (l *Lowerer) lowerStaged(op *tir.Op, st *Staged) {
	if l.tailIssued(st) {
		l.smemTiles[op.Result()] = st
		return
	}
	if st.pipe != nil && st.pipe.active {
		// Prefetched by the loop (issued in the previous iteration or the
		// prologue, counted at the top of the body).
		l.smemTiles[op.Result()] = st
		return
	}
	l.target.LowerStagedLoad(l, op, st)
	st.live, st.ready = true, false
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
		st.Bytes = n
		return true
	})
	l.placeStaged()
}

// placeStaged places the staged tiles (Bytes set; double-buffered ones
// take two buffers, 1024-aligned so that swizzled tiles keep their
// pattern) at the start of shared memory in program order. Tiles after a
// pipelined loop of a frame (the kernel's top level, or the body of a
// top-level loop around the pipelined one: the backward's GQA loop, a
// persistent kernel's tile loop) reuse its buffers (the overlapped
// forward's last P·V reads its V there): the loop's exit waits for its
// copies and then a CTA barrier frees them (pipeExit). That keeps the
// forward's 128×128 tiles at three stages inside the 227 KB a block may
// have.
func (l *Lowerer) placeStaged() {
	off, end := 0, 0
	var after *pipeline // the pipelined loop whose buffers off reuses
	place := func(op *tir.Op) bool {
		st := l.a.async[op]
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
			after.reused = true
		}
		return true
	}
	var frame func(ops []*tir.Op, top bool)
	frame = func(ops []*tir.Op, top bool) {
		for _, op := range ops {
			p := l.pipes[op]
			start := roundUpTo(off, 1024)
			if p != nil {
				p.reused = false // set if a later tile takes its buffers; a loop's own tiles may take an earlier loop's
			}
			switch {
			case top && p == nil && op.Kind == tir.OpFor:
				frame(op.Regions[0].Ops, false)
			case place(op):
				for _, r := range op.Regions {
					r.Walk(place)
				}
			}
			if p != nil {
				off, after = start, p
			}
		}
	}
	frame(l.f.Body.Ops, true)
	if l.grp != nil {
		l.planGroups()
		end = l.placeGroups(end)
	}
	l.scratchBase = end
	l.smemBytes = end
}

func roundUpTo(n, a int) int { return (n + a - 1) / a * a }

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
