// Package async is codegen's machinery for asynchronous copies and
// reductions across a kernel's structure, which Hopper (codegen/sm90) uses
// and a later target with TMA-like copies would reuse. One file per
// concern, each with the state it owns:
//
//   - pipeline.go (pipelines; the pipeline-loads phase): staged tiles
//     multi-buffered and prefetched iterations ahead, their buffers
//     handed back without a CTA barrier where the target can
//     (BufferReleaser); pipetail.go: a pipelined loop's tail, issued by
//     its last iteration;
//   - producer.go (warpSpec; PlanProducer, which sm90's warp-specialize
//     phase calls): a producer warpgroup that issues every copy while the
//     consumer warps compute; groups.go (groupState): consumer groups
//     that one producer feeds;
//   - bulk.go (bulkFrames): bulk and tensor reductions staged in shared
//     memory and deferred past the next iteration's first barrier.
//
// This file holds the Scheduler that composes them for one kernel. A
// target embeds it (sm90.Target does), which makes the target codegen/
// core's ProgramTarget, SharedTarget and ScheduleTarget: the core calls
// those hooks at fixed points of its phases and knows nothing of what
// they do. What is the hardware's (issuing a copy, waiting on a barrier,
// handing a buffer back) this package asks of the target in turn
// (BufferReleaser, ProducerTarget, TensorReduceTarget, BulkReduceTarget,
// AsyncDotTarget). This package imports core and no target.
package async

import (
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// Scheduler is one kernel's asynchronous machinery: what its phases
// planned and the state of lower-llvm's walk through it, one part per
// concern.
type Scheduler struct {
	f    *tir.Func   // the kernel (init)
	pl   pipelines   // pipeline-loads' loops (pipeline.go)
	ws   *warpSpec   // the producer warpgroup (warp-specialize's PlanProducer; nil: none)
	grp  *groupState // the consumer groups (nil: one)
	bulk bulkFrames  // the loops being lowered, for deferred reductions (bulk.go)
}

// New returns the Scheduler of one kernel.
func New() *Scheduler { return &Scheduler{} }

// Async returns s: a target that embeds the Scheduler gives it to this
// package's phases through it (Of).
func (s *Scheduler) Async() *Scheduler { return s }

// Of is the Scheduler of the target lowering l's kernel, or nil when the
// target has none.
func Of(l *core.Lowerer) *Scheduler {
	h, ok := l.Target().(interface{ Async() *Scheduler })
	if !ok {
		return nil
	}
	s := h.Async()
	s.init(l)
	return s
}

// init binds s to l's kernel: its consumer groups.
func (s *Scheduler) init(l *core.Lowerer) {
	if s.f == l.Func() {
		return
	}
	s.f = l.Func()
	s.grp = newGroupState(s.f)
}

// PipelineLoads is the optional phase that multi-buffers the staged loads
// of loops whose load addresses depend only on the induction variable and
// prefetches them num_stages - 1 iterations ahead (num_stages: the kernel's
// compile-time argument of that name, Triton's, default 2).
var PipelineLoads = core.Phase{
	Name: "pipeline-loads",
	Doc:  "multi-buffer staged loads in loops (num_stages, default 2) and issue iteration i+num_stages-1's copies in iteration i",
	Run: func(l *core.Lowerer) error {
		if s := Of(l); s != nil {
			s.pl.plan(l)
		}
		return nil
	},
}

// PlanProducer gives the kernel a producer warpgroup that issues its
// copies when they qualify (producer.go), and reports why not otherwise.
func (s *Scheduler) PlanProducer(l *core.Lowerer, pt ProducerTarget) (why string) {
	s.init(l)
	ws, why := planProducer(l, pt, &s.pl, s.grp)
	if ws != nil {
		s.ws = ws
		s.pl.producer = true
	}
	return why
}

// ---- what the target asks ----

// WarpSpecialized reports whether the kernel has a producer warpgroup.
func (s *Scheduler) WarpSpecialized() bool { return s.ws != nil }

// InProducer reports whether the producer program is being lowered.
func (s *Scheduler) InProducer() bool { return s.ws != nil && s.ws.producing }

// Groups is the number of consumer groups (1 without).
func (s *Scheduler) Groups() int { return s.grp.count() }

// ConsumerWarps is the warps of every consumer group together.
func (s *Scheduler) ConsumerWarps(l *core.Lowerer) int { return s.grp.consumerWarps(l) }

// CTAThreadID is the thread's index in the CTA; core.Lowerer.ThreadID is
// its index in its consumer group (the same without groups).
func (s *Scheduler) CTAThreadID(l *core.Lowerer) value.Value { return s.grp.ctaThread(l) }

// IsGroupPrivate reports whether shared memory at off is a consumer
// group's own: a staged tile there is filled once a group (its full
// mbarrier counts Groups() arrivals), an address there moves by the
// group's shift.
func (s *Scheduler) IsGroupPrivate(off int) bool { return s.grp.private(off) }

// ---- core.ProgramTarget ----

var (
	_ core.ProgramTarget  = (*Scheduler)(nil)
	_ core.SharedTarget   = (*Scheduler)(nil)
	_ core.ScheduleTarget = (*Scheduler)(nil)
)

// Threads: the producer's warpgroup beside the consumers' warps (0: the
// core's num_warps warps).
func (s *Scheduler) Threads(l *core.Lowerer) int {
	if s.ws != nil {
		return s.ConsumerWarps(l)*32 + 128
	}
	return 0
}

// OneCTA: setmaxnreg needs the registers per thread at entry to be known:
// the most threads and one CTA per multiprocessor fix them.
func (s *Scheduler) OneCTA(*core.Lowerer) bool { return s.ws != nil }

// EntryThread: with consumer groups the thread index splits at the
// kernel's entry into the group and the index within it.
func (s *Scheduler) EntryThread(l *core.Lowerer, tid value.Value) value.Value {
	s.init(l)
	if s.grp == nil {
		return tid
	}
	if s.ws == nil {
		core.Fail("consumer_groups = %d: the groups need a producer warpgroup (warp_specialize on sm_90a with TMA copies)", s.grp.n)
	}
	return s.grp.entry(l, tid)
}

// Start: the producer warpgroup branches off (warpSpec.splitWarps).
func (s *Scheduler) Start(l *core.Lowerer) {
	if s.ws != nil {
		s.ws.splitWarps(l)
	}
}

// Finish: the consumer groups' shared memory is fixed.
func (s *Scheduler) Finish(l *core.Lowerer) {
	if s.grp != nil {
		s.grp.finish(l)
	}
}

// Barrier: once the producer went its own way, the consumers' own
// barrier.
func (s *Scheduler) Barrier(l *core.Lowerer) bool {
	if s.ws == nil || !s.ws.consumer {
		return false
	}
	s.ws.barrier(l)
	return true
}

// GroupID: the consumer group being lowered.
func (s *Scheduler) GroupID(*core.Lowerer) value.Value { return s.grp.id() }

// ---- core.SharedTarget ----

// PlaceShared: with consumer groups, the tiles before the pipelined
// loop's become each group's own (groups.go).
func (s *Scheduler) PlaceShared(l *core.Lowerer, end int) int {
	s.init(l)
	if s.grp == nil {
		return end
	}
	s.grp.check(l)
	ring := end // where the pipelined loops' tiles start
	for _, p := range s.pl.pipes {
		for _, st := range p.loads {
			ring = min(ring, st.ByteOff)
		}
	}
	return s.grp.place(l, ring, end)
}

// ReserveShared: with consumer groups, the bytes come from the mbarrier
// area before the groups' own parts.
func (s *Scheduler) ReserveShared(l *core.Lowerer, bytes int) (int, bool) {
	if s.grp == nil {
		return 0, false
	}
	return s.grp.reserve(bytes), true
}

// SharedShift: a consumer group's copy of its own part.
func (s *Scheduler) SharedShift(l *core.Lowerer, off int) value.Value { return s.grp.shiftAt(l, off) }

// ScratchPinned: beside a producer that runs ahead into the next
// iteration of a loop around the pipelined one, the tiles are never free;
// with consumer groups the scratch area is each group's own, after them.
func (s *Scheduler) ScratchPinned(*core.Lowerer) bool {
	return (s.ws != nil && s.ws.outer != nil) || s.grp != nil
}

// ---- core.ScheduleTarget ----

// Loop: every loop's schedule: its pipeline's, if any, and the frame of
// the bulk reductions in its body.
func (s *Scheduler) Loop(l *core.Lowerer, op *tir.Op) core.LoopSchedule {
	s.init(l)
	return &loopSchedule{s: s, l: l, op: op, p: s.pl.pipes[op], bulk: bulkIn(l, op.Regions[0])}
}

// BeforeOp issues the prefetch the body's barrier armed.
func (s *Scheduler) BeforeOp(l *core.Lowerer, op *tir.Op) { s.pl.issueArmedPrefetch(l, op) }

// OwnsOp: the consumers skip the ops only the producer's copies read,
// and a pipelined loop's body takes its block-list entries from the
// iterations that read them ahead.
func (s *Scheduler) OwnsOp(l *core.Lowerer, op *tir.Op) bool {
	if s.ws.skips(op) {
		return true // the producer's (copyOnlyOps)
	}
	return s.pl.ownsOp(l, op)
}

// AfterOp: beside a producer, the tail's buffer goes back after the
// branch that reads it (handBackTail).
func (s *Scheduler) AfterOp(l *core.Lowerer, op *tir.Op) {
	if ws := s.ws; ws != nil && ws.consumer && ws.outer != nil && ws.pipe.tail != nil && op == ws.pipe.tail.branch {
		ws.handBackTail(l)
	}
}

// AfterBarrier: a pipelined loop's prefetch waits for the body's first
// barrier, and a bulk reduction's adds go right after it.
func (s *Scheduler) AfterBarrier(l *core.Lowerer) {
	s.pl.afterBarrier(l)
	s.bulk.issuePoint(l)
}

// AfterTileWait: a pipelined loop's buffers go back.
func (s *Scheduler) AfterTileWait(l *core.Lowerer) { s.pl.afterTileWait(l) }

// InPipelinedBody reports whether the body of the loop that pipelines st
// is being lowered (its fills were issued iterations before).
func (s *Scheduler) InPipelinedBody(st *core.Staged) bool {
	p := s.pl.pipeOf(st)
	return p != nil && p.active && s.pl.inSlice == 0
}

// IssuedAhead: a pipelined loop's tiles and its tail.
func (s *Scheduler) IssuedAhead(l *core.Lowerer, st *core.Staged) bool {
	return s.pl.issuedAhead(l, st)
}

// KeepResident: beside a producer, a resident tile of the loop around the
// pipelined one goes back to the producer for the next iteration's fill.
func (s *Scheduler) KeepResident(l *core.Lowerer, st *core.Staged) bool {
	if s.ws == nil || !s.ws.consumer {
		return false
	}
	s.ws.pt.HandBack(l, st)
	return true
}

// AtomicAdd: tensor reductions the target planned, else bulk reductions
// where the target has them (bulk.go).
func (s *Scheduler) AtomicAdd(l *core.Lowerer, op *tir.Op, ws []core.Layout, ptrs, vals, mask []value.Value) bool {
	return s.bulk.atomicAdd(l, op, ws, ptrs, vals, mask)
}

// OpNote: the staged loads a producer issues, and the ops it runs too
// (warp-specialize).
func (s *Scheduler) OpNote(l *core.Lowerer, op *tir.Op, st *core.Staged) string {
	if st == nil {
		return s.ws.note(op)
	}
	if s.ws != nil {
		return "issued by the producer"
	}
	return ""
}

// loopSchedule is one for loop's core.LoopSchedule: its pipeline (p, nil
// when it has none) and its frame for bulk reductions.
type loopSchedule struct {
	s    *Scheduler
	l    *core.Lowerer
	op   *tir.Op
	p    *pipeline
	bulk bool // the body holds an atomic_add that may go in bulk

	lo, hi, step value.Value
	iv           *ir.InstPhi
	stage, phase *ir.InstPhi // the pipeline's buffer in use and fill parities
	fr           *loopFrame
}

func (ls *loopSchedule) BulkReads() bool { return ls.bulk }

func (ls *loopSchedule) Prologue(lo, hi, step value.Value) {
	ls.lo, ls.hi, ls.step = lo, hi, step
	if ls.p != nil {
		ls.s.pl.pipePrologue(ls.l, ls.p, lo, hi, step)
	}
}

func (ls *loopSchedule) Header(hdr, pre *ir.Block, iv *ir.InstPhi) {
	ls.iv = iv
	if ls.p != nil {
		ls.stage, ls.phase = ls.s.pl.header(ls.l, ls.p, hdr, pre)
	}
	ls.fr = ls.s.bulk.push(ls.l, ls.op.Regions[0], iv, ls.lo, ls.hi, ls.step, ls.s.Groups() == 1)
}

func (ls *loopSchedule) BodyTop() {
	if ls.p != nil {
		ls.s.pl.pipeBodyTop(ls.l, ls.p, ls.iv, ls.step, ls.lo, ls.hi, ls.stage, ls.phase)
	}
}

func (ls *loopSchedule) BodyEnd() {
	if ls.p != nil {
		ls.s.pl.bodyEnd(ls.l)
	}
	ls.s.pl.issueArmedPrefetch(ls.l, nil)
}

func (ls *loopSchedule) Latch(latch *ir.Block) {
	if ls.p != nil {
		ls.s.pl.latch(ls.p, latch, ls.stage, ls.phase)
	}
}

func (ls *loopSchedule) Exit() {
	if ls.p != nil {
		ls.s.pl.exit(ls.l, ls.p, ls.stage, ls.phase, ls.lo, ls.hi)
	}
	ls.s.bulk.pop(ls.l, ls.fr)
}
