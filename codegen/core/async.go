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
func (l *Lowerer) DeferWait(v *tir.Value, wait AsyncWait) {
	l.async = append(l.async, &asyncGroup{v: v, depth: l.depth, wait: wait})
}

// awaitUses waits for the pending results op reads, directly or inside
// its regions.
func (l *Lowerer) awaitUses(op *tir.Op) {
	if len(l.async) == 0 {
		return
	}
	for _, a := range op.Args {
		l.await(a)
	}
	for _, r := range op.Regions {
		r.Walk(func(o *tir.Op) bool {
			for _, a := range o.Args {
				l.await(a)
			}
			return true
		})
	}
}

// await waits for v when it is a pending result: every group up to v's
// completes, later ones stay in flight.
func (l *Lowerer) await(v *tir.Value) {
	for i, g := range l.async {
		if g.v == v {
			l.completeAsync(i+1, len(l.async)-1-i)
			return
		}
	}
}

// completeAsync waits for the oldest n pending groups, leaving inFlight in
// flight, and replaces the registers of those issued at the current depth
// with the waited ones. Groups of enclosing blocks complete too but stay
// listed: their registers must not be redefined inside this block (the
// uses after it would not be dominated), so a later read waits again.
func (l *Lowerer) completeAsync(n, inFlight int) {
	type slot struct {
		v   *tir.Value
		key string
		n   int
	}
	var slots []slot
	var regs []value.Value
	var keep []*asyncGroup
	for i, g := range l.async {
		if i >= n || g.depth < l.depth {
			keep = append(keep, g)
			continue
		}
		// In key order: the emitted IR must not depend on map order.
		for _, k := range slices.Sorted(maps.Keys(l.env[g.v])) {
			r := l.env[g.v][k]
			slots = append(slots, slot{g.v, k, len(r)})
			regs = append(regs, r...)
		}
	}
	out := l.async[n-1].wait(inFlight, regs)
	for _, s := range slots {
		l.env[s.v][s.key] = out[:s.n]
		out = out[s.n:]
	}
	l.async = keep
}

// awaitBlockEnd waits for the groups issued in the block at the current
// depth (its results may be read after the block, through phis).
func (l *Lowerer) awaitBlockEnd() {
	n := 0
	for i, g := range l.async {
		if g.depth >= l.depth {
			n = i + 1
		}
	}
	if n > 0 {
		l.completeAsync(n, len(l.async)-n)
	}
}

// awaitForBarrier orders every pending group before a barrier: nothing
// written to shared memory after it can reach their operands. The results
// stay pending (a later read still ties them through its own wait).
func (l *Lowerer) awaitForBarrier() {
	if len(l.async) > 0 {
		l.async[len(l.async)-1].wait(0, nil)
	}
}

// AsyncDotTarget is implemented by targets whose tensor-core dots may
// complete asynchronously (they hand their results to DeferWait).
type AsyncDotTarget interface {
	AsyncDot(l *Lowerer, op *tir.Op) bool
}

// asyncDot reports whether op is a dot the target issues asynchronously.
func (l *Lowerer) asyncDot(op *tir.Op) bool {
	t, ok := l.target.(AsyncDotTarget)
	return ok && op.Kind == tir.OpDot && t.AsyncDot(l, op)
}

// issueArmedPrefetch issues a pipelined loop's prefetch that the body's
// barrier armed, before op (nil: at the end of the body). Asynchronous
// dots go first: their issue does not wait for the prefetch's index loads
// and address math, which then run while the tensor cores work.
func (l *Lowerer) issueArmedPrefetch(op *tir.Op) {
	f := l.armedPrefetch
	if f == nil || l.depth != l.prefetchDepth || l.branchDepth != 0 || (op != nil && l.asyncDot(op)) {
		return
	}
	l.armedPrefetch = nil
	// Only asynchronous dots ran since the barrier, reading this iteration's
	// buffers: the ones the prefetch writes are still free.
	l.smemDirty = false
	f()
}
