package simt

import (
	"fmt"
	"sort"
	"strings"
)

// cta is one CTA: its shared memory, warps, barriers and mbarriers. Its
// warps run on one goroutine (run).
type cta struct {
	p      *Program
	m      *machine
	id     [3]int
	shared []byte
	warps  []*warp
	named  map[int]*barrier // bar.sync ids (barrier0 is id 0 over every thread)
	groups []*rendezvous    // warpgroups (wgmma, setmaxnreg)
	mbars  map[uint64]*mbar
	// inflight: per shared byte, 1 + the address of the mbarrier of a
	// copy to it that has not landed (nil unless the kernel uses TMA).
	inflight []int32
	// marks: per shared byte, 1 + the thread that wrote it through the
	// generic proxy and has not fenced since (nil unless the kernel uses
	// wgmma or TMA).
	marks []int32
	// epoch moves whenever something a blocked warp may wait for
	// happens: a barrier completes, an mbarrier changes.
	epoch uint64
	rng   uint64
	tmp   []uint64
	cur   *warp // the warp running (for a failure's message)
}

func newCTA(p *Program, m *machine, id [3]int, params []uint64, seed uint64, files *[][]uint64) *cta {
	k := p.kernel
	c := &cta{p: p, m: m, id: id, shared: make([]byte, k.SharedBytes), named: map[int]*barrier{},
		mbars: map[uint64]*mbar{}, rng: seed}
	if p.usesTMA {
		c.inflight = make([]int32, k.SharedBytes)
	}
	if p.usesProxy {
		c.marks = make([]int32, k.SharedBytes)
	}
	nw := k.Threads / 32
	for g := 0; g < (nw+3)/4; g++ {
		c.groups = append(c.groups, &rendezvous{})
	}
	// A warp's registers start with the constants and parameters; the
	// rest are written before they are read (SSA), so the register files
	// of the last CTA are reused.
	for i := 0; i < nw; i++ {
		var regs []uint64
		if i < len(*files) {
			regs = (*files)[i]
		} else {
			regs = make([]uint64, p.nslots*32)
			*files = append(*files, regs)
		}
		for _, ci := range p.consts {
			for l := 0; l < 32; l++ {
				regs[ci.off+l] = ci.bits
			}
		}
		for j, off := range p.params {
			for l := 0; l < 32; l++ {
				regs[off+l] = params[j]
			}
		}
		w := &warp{cta: c, id: i, live: allLanes, regs: regs}
		w.groups = []group{{mask: allLanes, blk: 0}}
		c.warps = append(c.warps, w)
	}
	return c
}

// next is the scheduler's random number generator (xorshift).
func (c *cta) next() uint64 {
	c.rng ^= c.rng << 13
	c.rng ^= c.rng >> 7
	c.rng ^= c.rng << 17
	return c.rng
}

// run runs the CTA's warps to the end: each in turn for a random slice of
// blocks, skipping warps that wait for what has not happened.
func (c *cta) run(maxBlocks int64) (err error) {
	var total int64
	for {
		alive, progress := false, false
		start := int(c.next() % uint64(len(c.warps)))
		for k := range c.warps {
			w := c.warps[(start+k)%len(c.warps)]
			if w.done {
				continue
			}
			alive = true
			if w.blocked && w.blockedAt == c.epoch {
				continue
			}
			w.blocked = false
			c.cur = w
			st, ran := w.run(1 + int(c.next()%32))
			c.cur = nil
			total += int64(ran)
			switch st {
			case stExited:
				w.done = true
				progress = true
			case stBlocked, stStuck:
				w.blocked, w.blockedAt = true, c.epoch
				if ran > 0 {
					progress = true
				}
			default:
				progress = true
			}
		}
		if !alive {
			break
		}
		if total > maxBlocks {
			return fmt.Errorf("more than %d blocks executed: a hang?", maxBlocks)
		}
		if !progress && c.allWaiting() {
			return fmt.Errorf("%s", c.deadlock())
		}
	}
	return c.finish()
}

// allWaiting reports whether every live warp waits on an unchanged epoch.
func (c *cta) allWaiting() bool {
	for _, w := range c.warps {
		if !w.done && !(w.blocked && w.blockedAt == c.epoch) {
			return false
		}
	}
	return true
}

// deadlock describes a CTA whose live warps all wait.
func (c *cta) deadlock() string {
	live := 0
	var mw []*warp
	var where []string
	for _, w := range c.warps {
		if w.done {
			continue
		}
		live += 32
		if w.wait.mbar != nil {
			mw = append(mw, w)
		}
		what := w.wait.what
		if what == "" {
			what = "diverged lanes at a warp-synchronous instruction"
		}
		where = append(where, fmt.Sprintf("%s (%s)", w.where(), what))
	}
	if len(mw) == 0 {
		return fmt.Sprintf("deadlock: all %d live threads wait at barriers that never complete: %s", live, strings.Join(where, "; "))
	}
	sort.Slice(mw, func(i, j int) bool { return mw[i].id < mw[j].id })
	wt := mw[0].wait.mbar
	b := c.mbars[wt.addr]
	return fmt.Sprintf("mbarrier at %#x: wait for parity %d never completes (thread %d; phase %d with %d of %d arrivals and %d transaction bytes outstanding; %d live threads: %d warps wait on mbarriers, %d elsewhere)",
		wt.addr, wt.parity, 32*mw[0].id+wt.lane, b.phase, b.pending, b.count, b.tx, live, len(mw), live/32-len(mw))
}

// finish checks a CTA that ran to the end.
func (c *cta) finish() error {
	addrs := make([]uint64, 0, len(c.mbars))
	for a := range c.mbars {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i] < addrs[j] })
	for _, a := range addrs {
		if b := c.mbars[a]; len(b.copies) > 0 {
			return fmt.Errorf("the CTA exits with %d cp.async.bulk.tensor copies on the mbarrier at %#x in flight (no wait saw them land)", len(b.copies), a)
		}
	}
	return nil
}

// barrier is a named barrier (bar.sync id, n): complete when n threads
// have arrived, a warp counting as 32. barrier0 is barrier 0 over every
// thread of the CTA.
type barrier struct {
	n, count int
	gen      uint64
}

func (c *cta) barrier(id, n int) *barrier {
	b := c.named[id]
	if b == nil {
		b = &barrier{n: n}
		c.named[id] = b
	}
	if b.n != n {
		// Each use gives its count; arrivals of one generation must agree.
		if b.count > 0 {
			fail("named barrier %d used with counts %d and %d", id, b.n, n)
		}
		b.n = n
	}
	return b
}

// arrive counts one warp at b; it reports the generation it arrived in.
func (c *cta) arrive(b *barrier) uint64 {
	gen := b.gen
	b.count += 32
	if b.count >= b.n {
		b.count = 0
		b.gen++
		c.epoch++
	}
	return gen
}

// sync is a warp's bar.sync on barrier id of n threads: it arrives once,
// then waits for the generation to complete.
func (w *warp) sync(id, n int) bool {
	c := w.cta
	if !w.wait.active {
		b := c.barrier(id, n)
		w.wait = waitState{active: true, gen: c.arrive(b), what: fmt.Sprintf("bar.sync %d, %d", id, n), bar: b}
	}
	// A retry looks at the barrier it arrived at: later arrivals may use
	// it with another count.
	if w.wait.bar.gen == w.wait.gen {
		return false
	}
	w.wait = waitState{}
	return true
}

// rendezvous is a warpgroup's meeting point: its four warps deposit
// their part, the last one to arrive combines them.
type rendezvous struct {
	what   string
	count  int
	gen    uint64
	parts  [4]any
	result any
}

// meet is warp w's arrival at its warpgroup's rendezvous with part;
// combine (may be nil) runs once all four are in, and its result is
// what meet returns once the warp may go on.
func (w *warp) meet(what string, part any, combine func(parts [4]any) any) (any, bool) {
	c := w.cta
	r := c.groups[w.id/4]
	if !w.wait.active {
		if len(c.warps) < 4*(w.id/4+1) {
			fail("%s in a warpgroup of fewer than 4 warps", what)
		}
		if r.count > 0 && r.what != what {
			fail("warpgroup %d: warp %d at %s while others wait at %s", w.id/4, w.id, what, r.what)
		}
		r.what = what
		w.wait = waitState{active: true, gen: r.gen, what: what}
		r.parts[w.id%4] = part
		r.count++
		if r.count == 4 {
			r.result = nil
			if combine != nil {
				r.result = combine(r.parts)
			}
			r.parts = [4]any{}
			r.count = 0
			r.gen++
			c.epoch++
		}
	}
	if r.gen == w.wait.gen {
		return nil, false
	}
	w.wait = waitState{}
	return r.result, true
}
