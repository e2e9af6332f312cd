package core

import (
	"maps"
	"slices"

	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// Asynchronous results (wgmma on sm_90a): the hardware writes a dot's
// accumulator registers after the instruction issues, until a wait. A
// target's LowerDot hands such a result to DeferWait instead of waiting at
// once, and the core emits the wait where the result is first read: before
// the first op that uses it (directly or inside one of its regions), or at
// the end of the block that issued it. Work in between (the softmax of the
// next kv block, after the overlap-softmax pass) then runs while the tensor
// cores do. A wait completes every group up to the one needed and leaves
// the later ones in flight (wgmma.wait_group N); the registers it completes
// are tied through it, so LLVM reads none of them before it. A barrier
// waits for every group (their shared-memory operands may be rewritten
// after it).

// AsyncWait emits a wait that leaves at most inFlight groups in flight and
// returns regs tied through it (nil regs: an ordering wait only).
type AsyncWait func(inFlight int, regs []value.Value) []value.Value

// asyncGroup is one committed group whose result is not yet waited for.
type asyncGroup struct {
	v     *tir.Value
	depth int // region depth of the issuing block
	wait  AsyncWait
}

// DeferWait records that v's registers (as LowerDot returns them) are
// written asynchronously by the group just committed; the core waits
// before they are read.
func (em *Emitter) DeferWait(v *tir.Value, wait AsyncWait) {
	em.async = append(em.async, &asyncGroup{v: v, depth: em.depth, wait: wait})
}

// awaitUses waits for the pending results op reads, directly or inside
// its regions.
func (em *Emitter) awaitUses(op *tir.Op) {
	if len(em.async) == 0 {
		return
	}
	for _, a := range op.Args {
		em.await(a)
	}
	for _, r := range op.Regions {
		r.Walk(func(o *tir.Op) bool {
			for _, a := range o.Args {
				em.await(a)
			}
			return true
		})
	}
}

// await waits for v when it is a pending result: every group up to v's
// completes, later ones stay in flight.
func (em *Emitter) await(v *tir.Value) {
	for i, g := range em.async {
		if g.v == v {
			em.completeAsync(i+1, len(em.async)-1-i)
			return
		}
	}
}

// completeAsync waits for the oldest n pending groups, leaving inFlight in
// flight, and replaces the registers of those issued at the current depth
// with the waited ones. Groups of enclosing blocks complete too but stay
// listed: their registers must not be redefined inside this block (the
// uses after it would not be dominated), so a later read waits again.
func (em *Emitter) completeAsync(n, inFlight int) {
	type slot struct {
		v   *tir.Value
		key string
		n   int
	}
	var slots []slot
	var regs []value.Value
	var keep []*asyncGroup
	for i, g := range em.async {
		if i >= n || g.depth < em.depth {
			keep = append(keep, g)
			continue
		}
		// In key order: the emitted IR must not depend on map order.
		for _, k := range slices.Sorted(maps.Keys(em.env[g.v])) {
			r := em.env[g.v][k]
			slots = append(slots, slot{g.v, k, len(r)})
			regs = append(regs, r...)
		}
	}
	out := em.async[n-1].wait(inFlight, regs)
	for _, s := range slots {
		em.env[s.v][s.key] = out[:s.n]
		out = out[s.n:]
	}
	em.async = keep
}

// awaitBlockEnd waits for the groups issued in the block at the current
// depth (its results may be read after the block, through phis).
func (em *Emitter) awaitBlockEnd() {
	n := 0
	for i, g := range em.async {
		if g.depth >= em.depth {
			n = i + 1
		}
	}
	if n > 0 {
		em.completeAsync(n, len(em.async)-n)
	}
}

// awaitForBarrier orders every pending group before a barrier: nothing
// written to shared memory after it can reach their operands. The results
// stay pending (a later read still ties them through its own wait).
func (em *Emitter) awaitForBarrier() {
	if len(em.async) > 0 {
		em.async[len(em.async)-1].wait(0, nil)
	}
}

// AwaitAllAsync waits for every pending asynchronous group, as a barrier
// does (awaitForBarrier), where a buffer their operands read is handed
// back without one.
func (em *Emitter) AwaitAllAsync() { em.awaitForBarrier() }
