package sm90

import (
	"fmt"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/async"
	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// WarpSpecialize is the phase that gives a kernel asking for it (the
// compile-time argument warp_specialize) a producer warpgroup that issues
// every TMA copy (async.Scheduler.PlanProducer): the release counters of its
// pipelined loop become empty mbarriers, one arrival per consumer
// warpgroup, on which the producer waits before it refills a buffer.
var WarpSpecialize = core.Phase{
	Name: "warp-specialize",
	Doc:  "with warp_specialize: a producer warpgroup whose first thread issues the TMA copies after empty-barrier waits; setmaxnreg moves its registers to the consumers",
	Run: func(l *core.Lowerer) error {
		t, ok := l.Target().(*Target)
		if n := l.CTAsPerSM(); n > 1 && ok {
			defer t.noteCTAs(l, n)
		}
		if on, _ := l.Func().Attr("warp_specialize").(bool); !on || !ok {
			return nil
		}
		why := ""
		switch {
		case !t.TMA:
			why = "no TMA on this target"
		case !t.Release:
			why = "release=barrier"
		default:
			why = t.PlanProducer(l, t)
		}
		if why != "" && t.Groups() > 1 {
			return fmt.Errorf("consumer_groups = %d needs a producer warpgroup, and warp_specialize is off: %s", t.Groups(), why)
		}
		if why != "" {
			l.Note("warp_specialize: off: " + why)
			return nil
		}
		l.Note(fmt.Sprintf("warp_specialize: a producer warpgroup issues the TMA copies (%d threads per CTA)", l.Threads()))
		return nil
	},
}

// noteCTAs says what became of n CTAs a multiprocessor (the kernel's
// ctas_per_sm, or the config's ctas-per-sm; core's lower.go writes the
// annotation): a producer warpgroup keeps one.
func (t *Target) noteCTAs(l *core.Lowerer, n int) {
	if t.WarpSpecialized() {
		l.Note(fmt.Sprintf("ctas_per_sm = %d: ignored: the producer warpgroup's setmaxnreg counts on one CTA a multiprocessor", n))
		return
	}
	l.Note(fmt.Sprintf("ctas_per_sm = %d: ptxas is asked to fit %d CTAs a multiprocessor (minctasm)", n, n))
}

var _ async.ProducerTarget = (*Target)(nil)

// CopyOperands: a TMA tile's coordinates.
func (t *Target) CopyOperands(st *core.Staged) ([]*tir.Value, bool) {
	p, ok := st.Plan.(*tilePlan)
	if !ok || p.tma == nil {
		return nil, false
	}
	var vals []*tir.Value
	for _, c := range p.tma.coords {
		if c != nil {
			vals = append(vals, c)
		}
	}
	// The vectors riding with the tile (riders.go): their offsets.
	for _, r := range p.tma.riders {
		for _, tm := range r.terms {
			vals = append(vals, tm.idx)
			if tm.stride != nil {
				vals = append(vals, tm.stride)
			}
		}
	}
	return vals, true
}

// IssueCopy issues a TMA tile's copy from the producer.
func (t *Target) IssueCopy(l *core.Lowerer, st *core.Staged) {
	t.lowerTMA(l, st, st.Plan.(*tilePlan))
}

// WaitEmpty waits on the empty mbarrier of buffer buf of a pipelined
// loop's tiles (where the release counters are without a producer).
func (t *Target) WaitEmpty(l *core.Lowerer, tiles []*core.Staged, buf, parity value.Value) {
	l.Asm(types.Void, asmMbarWait, "r,r,~{memory}", true, barOf(l, tiles[0].Plan.(*tilePlan).tma.counters, buf), parity)
}

// WaitRefill: a resident tile of the loop around the pipelined one waits
// on its empty mbarrier (the first fill on the phase before the first,
// which counts as complete).
func (t *Target) WaitRefill(l *core.Lowerer, st *core.Staged) {
	tl := st.Plan.(*tilePlan).tma
	if tl.empty < 0 {
		return
	}
	b := l.Block()
	parity := b.NewXor(tl.flip(l, &tl.refills), core.ConstI32(1))
	l.Asm(types.Void, asmMbarWait, "r,r,~{memory}", true, barOf(l, tl.empty, nil), parity)
}

// HandBack: one arrival per consumer warpgroup on the tile's empty
// mbarrier.
func (t *Target) HandBack(l *core.Lowerer, st *core.Staged) {
	tl := st.Plan.(*tilePlan).tma
	if tl.empty < 0 {
		return
	}
	arriveLead(l, tl.empty, nil, constant.True)
}

// SetMaxRegs is setmaxnreg for the calling warpgroup.
func (t *Target) SetMaxRegs(l *core.Lowerer, regs int, up bool) {
	dir := "dec"
	if up {
		dir = "inc"
	}
	l.Asm(types.Void, fmt.Sprintf(asmSetMaxNReg, dir, regs), "~{memory}", true)
}

// asmSetMaxNReg: direction (inc/dec) and registers per thread.
const asmSetMaxNReg = "setmaxnreg.%s.sync.aligned.u32 %d;"

// asmArrive is one arrival on an mbarrier ($0).
const asmArrive = "mbarrier.arrive.shared::cta.b64 _, [$0];"

// arriveEmpty: the first thread of each consumer warpgroup hands buffer
// buf back (cond: there is a fill to hand back) once the warpgroup's
// reads of it are complete (the caller waited for its wgmmas).
func (t *Target) arriveEmpty(l *core.Lowerer, tiles []*core.Staged, buf, cond value.Value) {
	arriveLead(l, tiles[0].Plan.(*tilePlan).tma.counters, buf, cond)
}

// arriveLead: the first thread of each consumer warpgroup arrives on
// mbarrier buf (nil: 0) of the array at off when cond holds.
func arriveLead(l *core.Lowerer, off int, buf, cond value.Value) {
	b := l.Block()
	lead := b.NewICmp(enum.IPredEQ, b.NewAnd(l.ThreadID(), core.ConstI32(127)), core.ConstI32(0))
	l.IfThen(b.NewAnd(cond, lead), "empty", func() {
		l.Asm(types.Void, asmArrive, "r,~{memory}", true, barOf(l, off, buf))
	})
}
