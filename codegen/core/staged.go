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

	// Set by a target's pipelining (codegen/async's pipeline-loads):
	// pipeLoop is the loop that prefetches the tile into stages buffers
	// (nil: none), ahead says that loop's body is being lowered (this
	// iteration's copies were issued iterations before), tail that the
	// tile is a pipelined loop's tail (issued by its last iteration).
	pipeLoop *tir.Op
	stages   int
	ahead    bool
	tail     bool
}

// SetPipeline records that loop prefetches st into stages buffers
// (pipeline-loads).
func (st *Staged) SetPipeline(loop *tir.Op, stages int) { st.pipeLoop, st.stages = loop, stages }

// SetAhead says whether st's loop body is being lowered: its copies for
// the iteration were issued iterations before (a pipelined loop's), so
// its load issues nothing and AwaitStaged waits for it with the other
// tiles of its block.
func (st *Staged) SetAhead(on bool) { st.ahead = on }

// MarkTail records that st is a pipelined loop's tail, which the loop's
// last iteration may issue.
func (st *Staged) MarkTail() { st.tail = true }

// SetBuffer sets st's buffer in use: its index buf (i32, nil: 0), the
// bytes dyn it adds to ByteOff (nil: none) and the parity of its fill
// (nil: 0). A pipelined loop sets it for each iteration, and a copy
// issued into another buffer for the copy.
func (st *Staged) SetBuffer(buf, dyn, parity value.Value) {
	st.buf, st.dyn, st.parity = buf, dyn, parity
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
func (st *Staged) PipeLoop() *tir.Op { return st.pipeLoop }

// Tail reports whether st is a pipelined loop's tail (codegen/async).
func (st *Staged) Tail() bool { return st.tail }

// Stages is the number of buffers of st (1 unless pipelined).
func (st *Staged) Stages() int {
	if st.pipeLoop == nil {
		return 1
	}
	return st.stages
}

// TileWaiter is implemented by targets some of whose staged copies
// complete on something other than cp.async groups (sm90's TMA, on
// mbarriers): WaitTile waits for the buffer in use of st and reports
// true, or reports false to leave st to cp.async.wait_group. Such copies
// still commit a (empty) cp.async group each, so that the group counts
// of the others stay right.
type TileWaiter interface {
	WaitTile(l *Lowerer, st *Staged) bool
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
func (em *Emitter) StagedAddr(t types.Type, st *Staged, idx value.Value) value.Value {
	if st.dyn != nil {
		sh := map[int]int64{1: 0, 2: 1, 4: 2, 8: 3}[typeBytes(t)]
		idx = em.b.NewAdd(idx, em.b.NewLShr(st.dyn, ConstI32(sh)))
	}
	return em.SharedAbs(t, st.ByteOff, idx)
}

// StagedDyn is the run-time byte offset of st's buffer in use from
// ByteOff (nil: none, the tile has one buffer).
func (st *Staged) StagedDyn() value.Value { return st.dyn }

// StagedMasks is the per-copy predicate of a staged load: its mask
// registers (nil: unmasked) ANDed with st.Guard; nil when neither.
func (em *Emitter) StagedMasks(st *Staged, mask []value.Value, n int) []value.Value {
	if st.Guard == nil {
		return mask
	}
	out := make([]value.Value, n)
	for i := range out {
		if mask == nil {
			out[i] = st.Guard
		} else {
			out[i] = em.b.NewAnd(mask[i], st.Guard)
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
func (em *Emitter) CopyStaged(ptrs, mask []value.Value, e tir.Elem, dst func(r int) value.Value) {
	if em.smemDirty {
		em.Barrier()
	}
	const v = 8
	i16s := SharedPtr(types.I16)
	em.AlignedOr(ptrs, nil, v, e, func() []value.Value {
		i8s, i8g := SharedPtr(types.I8), PtrTo(types.I8, 1)
		for g := 0; g < len(ptrs); g += v {
			d := em.b.NewBitCast(dst(g), i8s)
			src := em.b.NewBitCast(ptrs[g], i8g)
			var n value.Value = ConstI32(16)
			if mask != nil {
				n = em.b.NewSelect(mask[g], ConstI32(16), ConstI32(0))
			}
			em.b.NewCall(em.Decl("llvm.nvvm.cp.async.cg.shared.global.16.s", types.Void, i8s, i8g, types.I32), d, src, n)
		}
		return nil
	}, func() []value.Value {
		zero := ConstI16(0)
		for r, ptr := range ptrs {
			var val value.Value
			if mask == nil {
				val = em.b.NewLoad(types.I16, ptr)
			} else {
				val = em.MaskedLoad(ptr, mask[r], zero, e)
			}
			d := dst(r)
			if !types.Equal(d.Type(), i16s) {
				d = em.b.NewBitCast(d, i16s)
			}
			em.b.NewStore(val, d)
		}
		return nil
	})
	em.b.NewCall(em.Decl("llvm.nvvm.cp.async.commit.group", types.Void))
	em.smemDirty = false
}

// StagedTile is the staged tile that holds value v (a staged load's result
// or a trans of it) once the load is lowered, or nil.
func (em *Emitter) StagedTile(v *tir.Value) *Staged { return em.smemTiles[v] }

// StagedAfter is the number of staged loads issued after st with no region
// lowered in between, 0 when one was (control flow makes the count
// dynamic). A dot may leave that many later copies in flight when it
// waits for st.
func (em *Emitter) StagedAfter(st *Staged) int {
	n := em.stagedIssued - st.seq - 1
	// A pipelined loop has no staged loads in nested regions (see
	// codegen/async), so its counts stay static across them.
	if (st.pipeLoop == nil && em.regionsLowered != st.regions) || n < 0 {
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
func (em *Emitter) AwaitStaged(op *tir.Op, tiles []*Staged) bool {
	var group []*Staged
	for _, st := range tiles {
		if !st.Resident && !st.ready {
			group = append(group, st)
		}
	}
	if len(group) == 0 {
		return false
	}
	blk := em.lay.blockOf[op.Results[0]]
	for _, st := range em.smemTiles {
		if st.live && !st.ready && !st.Resident && st.ahead &&
			em.lay.blockOf[st.Dot.Results[0]] == blk && !slices.Contains(group, st) {
			group = append(group, st)
		}
	}
	var last *Staged
	tw, _ := em.target.(TileWaiter)
	for _, st := range group {
		st.ready = true
		if tw != nil && tw.WaitTile(em.l, st) {
			continue
		}
		if last == nil || st.seq > last.seq {
			last = st
		}
	}
	if last != nil {
		em.b.NewCall(em.Decl("llvm.nvvm.cp.async.wait.group", types.Void, types.I32), ConstI32(int64(em.StagedAfter(last))))
	}
	if t, ok := em.target.(ScheduleTarget); ok {
		t.AfterTileWait(em.l)
	}
	// Tiles that every thread waited for itself need no CTA barrier.
	return last != nil
}

// lowerStaged issues a staged load through the target and records it: its
// tile is in flight until its dot is lowered. A tile its loop issued ahead
// (a pipelined loop's, or its tail: ScheduleTarget.IssuedAhead) is only
// recorded.
func (em *Emitter) lowerStaged(op *tir.Op, st *Staged) {
	if t, ok := em.target.(ScheduleTarget); ok && t.IssuedAhead(em.l, st) {
		em.smemTiles[op.Result()] = st
		return
	}
	em.target.LowerStagedLoad(em.l, op, st)
	em.AwaitTile(st, em.stagedIssued)
	em.stagedIssued++
	em.inFlight++
	em.smemTiles[op.Result()] = st
}

// ---- the count of staged copies in flight, for a target's pipelining ----

// StagedIssued is the number of staged copies (cp.async groups) issued so
// far in program order: a copy issued now gets this number (AwaitTile).
func (em *Emitter) StagedIssued() int { return em.stagedIssued }

// CountStaged adds issued to the copies issued so far and inFlight to the
// tiles in flight (Scratch keeps the scratch area clear of them).
func (em *Emitter) CountStaged(issued, inFlight int) {
	em.stagedIssued += issued
	em.inFlight += inFlight
}

// AwaitTile makes st the tile its dots wait for: issued as copy number
// seq (StagedIssued), in flight, not yet waited for.
func (em *Emitter) AwaitTile(st *Staged, seq int) {
	st.live, st.ready = true, false
	st.seq = seq
	st.regions = em.regionsLowered
}

// TileDone ends st's life as a tile its dots wait for (a pipelined loop's
// tiles after the loop).
func (em *Emitter) TileDone(st *Staged) { st.live, st.ready = false, false }

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

// BulkStoreIssued records that this thread's code issued bulk tensor
// stores (TensorStoreTarget) reading the scratch area, in a committed bulk
// group: the next CTA barrier waits for their reads first
// (cp.async.bulk.wait_group.read, a no-op in threads that issued none), as
// the kernel does before it exits, and shared memory counts as accessed.
func (em *Emitter) BulkStoreIssued() {
	em.bulkPending, em.bulkStored = true, true
	em.smemDirty = true
}

// BulkReduceIssued records that bulk reductions were issued reading a
// staging area in shared memory: the next CTA barrier waits for their
// reads, the kernel waits for them to complete before it exits, and
// shared memory counts as accessed.
func (em *Emitter) BulkReduceIssued() {
	em.bulkPending, em.bulkUsed = true, true
	em.smemDirty = true
}
