package simt

import (
	"fmt"
	"math/bits"
)

const allLanes = ^uint32(0)

// group is lanes of a warp at one point of the program: block blk, op
// idx. parked: they reached a warp-synchronous op without the rest of
// the warp, and wait for it there.
type group struct {
	mask   uint32
	blk    int
	idx    int
	parked bool
}

// warp is 32 lanes running in lock-step.
type warp struct {
	cta    *cta
	id     int // warp index in the CTA
	regs   []uint64
	groups []group
	live   uint32 // lanes that have not exited

	local [32][]byte // allocas

	// cp.async: each lane's copies of the open group and its committed
	// groups not yet waited for; every other copy completes at issue.
	cpOpen    [32][]cpCopy
	cpPending [32][][]cpCopy
	cpCount   [32]int
	// bulk: each lane's bulk reductions and tensor stores in flight.
	bulk [32][]bulkOp
	// written: each lane's generic-proxy shared writes not yet fenced.
	written [32][][2]uint64

	wg wgState

	// wait: the blocking op in progress (its arrival registered).
	wait waitState
	// blocked: the warp waits; retried when the CTA's epoch moves past
	// blockedAt.
	blocked   bool
	blockedAt uint64
	done      bool
}

// waitState is a warp's arrival at a barrier or rendezvous.
type waitState struct {
	active bool
	gen    uint64
	what   string // for a deadlock message
	mbar   *mbarWait
	bar    *barrier
}

type mbarWait struct {
	addr   uint64
	parity int
	lane   int
}

type status int

const (
	stYield   status = iota // ran its slice
	stBlocked               // waits at a barrier, an mbarrier or a rendezvous
	stExited                // every lane returned
	stStuck                 // lanes diverged at a warp-synchronous op
)

// merge joins groups at the same point; a parked group joined by others
// tries its op again.
func (w *warp) merge() {
	gs := w.groups
	for i := 0; i < len(gs); i++ {
		for j := i + 1; j < len(gs); j++ {
			if gs[i].blk == gs[j].blk && gs[i].idx == gs[j].idx {
				gs[i].mask |= gs[j].mask
				gs[i].parked = false
				gs[j] = gs[len(gs)-1]
				gs = gs[:len(gs)-1]
				j--
			}
		}
	}
	w.groups = gs
}

// pick is the group to run: not parked, lowest in reverse postorder, and
// the earliest op within a block; -1 when every group is parked.
func (w *warp) pick() int {
	best := -1
	bs := w.cta.p.blocks
	for i, g := range w.groups {
		if g.parked {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := w.groups[best]
		if rg, rb := bs[g.blk].rank, bs[b.blk].rank; rg < rb || rg == rb && g.idx < b.idx {
			best = i
		}
	}
	return best
}

// run executes up to budget blocks.
func (w *warp) run(budget int) (status, int) {
	blocks := w.cta.p.blocks
	ran := 0
	for ran < budget {
		if len(w.groups) == 0 {
			return stExited, ran
		}
		w.merge()
		gi := w.pick()
		if gi < 0 {
			if len(w.groups) == 1 && w.groups[0].mask == allLanes {
				w.groups[0].parked = false // the whole warp: run the op
				gi = 0
			} else {
				return stStuck, ran
			}
		}
		g := &w.groups[gi]
		b := blocks[g.blk]
		parked := false
		for g.idx < len(b.ops) {
			o := &b.ops[g.idx]
			if o.sync && g.mask != allLanes {
				g.parked = true
				parked = true
				break
			}
			if o.block != nil {
				if !o.block(w, g.mask) {
					return stBlocked, ran
				}
			} else {
				o.run(w, g.mask)
			}
			g.idx++
		}
		if parked {
			continue
		}
		w.branch(gi, b)
		ran++
	}
	return stYield, ran
}

// branch executes block b's terminator for group gi.
func (w *warp) branch(gi int, b *block) {
	g := w.groups[gi]
	switch {
	case b.trap != "":
		fail("%s", b.trap)
	case b.ret:
		for mm := g.mask; mm != 0; mm &= mm - 1 {
			l := lane(mm)
			if n := len(w.bulk[l]); n > 0 {
				fail("thread %d exits with %d bulk reductions or tensor stores in flight (no cp.async.bulk.wait_group)", 32*w.id+l, n)
			}
		}
		w.live &^= g.mask
		w.groups[gi] = w.groups[len(w.groups)-1]
		w.groups = w.groups[:len(w.groups)-1]
		return
	}
	if len(b.succ) == 1 {
		w.phis(b.edges[0], g.mask)
		w.groups[gi] = group{mask: g.mask, blk: b.succ[0]}
		return
	}
	r := w.regs
	var t uint32
	for mm := g.mask; mm != 0; mm &= mm - 1 {
		l := lane(mm)
		if r[b.cond+l] != 0 {
			t |= 1 << l
		}
	}
	f := g.mask &^ t
	switch {
	case f == 0:
		w.phis(b.edges[0], t)
		w.groups[gi] = group{mask: t, blk: b.succ[0]}
	case t == 0:
		w.phis(b.edges[1], f)
		w.groups[gi] = group{mask: f, blk: b.succ[1]}
	default:
		w.phis(b.edges[0], t)
		w.phis(b.edges[1], f)
		w.groups[gi] = group{mask: t, blk: b.succ[0]}
		w.groups = append(w.groups, group{mask: f, blk: b.succ[1]})
	}
}

// phis performs edge e's parallel copy for the lanes in m.
func (w *warp) phis(e *edge, m uint32) {
	r := w.regs
	if !e.temp {
		for i, d := range e.dst {
			s := e.src[i]
			for mm := m; mm != 0; mm &= mm - 1 {
				l := lane(mm)
				r[d+l] = r[s+l]
			}
		}
		return
	}
	tmp := w.cta.tmp[:0]
	for _, s := range e.src {
		for l := 0; l < 32; l++ {
			tmp = append(tmp, r[s+l])
		}
	}
	for i, d := range e.dst {
		for mm := m; mm != 0; mm &= mm - 1 {
			l := lane(mm)
			r[d+l] = tmp[32*i+l]
		}
	}
	w.cta.tmp = tmp
}

// where describes the warp's position for a message.
func (w *warp) where() string {
	s := fmt.Sprintf("warp %d:", w.id)
	for _, g := range w.groups {
		b := w.cta.p.blocks[g.blk]
		at := "its terminator"
		if g.idx < len(b.ops) {
			at = quote(b.ops[g.idx].inst.LLString())
		}
		s += fmt.Sprintf(" %d lanes at %s in %s;", bits.OnesCount32(g.mask), at, b.name)
	}
	return s
}
