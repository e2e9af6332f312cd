package core

import (
	"fmt"
	"math/bits"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// Consumer groups (the compile-time argument consumer_groups = G, with a
// producer warpgroup): the CTA runs G copies of the kernel's num_warps-warp
// program side by side, group g on the tiles its group_id() = g names,
// all fed by the one producer (FlashAttention-3's three consumer
// warpgroups at D = 64, whose 192 rows no power-of-two layout holds). The
// groups share what the pipelined loop streams (its buffers, mbarriers and
// the producer's fills, which wait for every group's hand-back); each owns
// the tiles loaded before the loop (the producer fills each group's copy,
// with the group's coordinates, on one mbarrier counting G arrivals) and
// the scratch area. Shared memory is therefore laid out as
//
//	[pipelined tiles][mbarriers][group 0's private tiles, scratch] … [group G-1's]
//
// and an address inside the private part moves by g times its size
// (groupState.stride, fixed when lowering ends). CTA barriers among the
// consumers become one named barrier a group. Every group must walk the
// same pipelined loop as group 0, whose values the producer computes: the
// kernel's contract (flash_fwd: the groups' q tiles share a block-mask row).

// groupBarBytes is the mbarrier area of a kernel with consumer groups,
// placed before the private part (ReserveShared takes from it).
const groupBarBytes = 1024

// groupState is the lowering's consumer-group state (l.grp; nil: one group).
type groupState struct {
	n         int
	privStart int           // where the private part starts
	barNext   int           // the next free byte of the mbarrier area
	stride    *constant.Int // the private part's size, set by finishGroups
	group     value.Value   // the consumer thread's group (entry block)
	shift     value.Value   // group × stride (entry block)
	prodGroup int           // the group the producer is filling for
	ctaTid    value.Value   // the thread's index in the CTA
}

// newGroupState reads f's consumer_groups (nil: one group); planGroups
// checks it once the phases run.
func newGroupState(f *tir.Func) *groupState {
	g, _ := f.Attr("consumer_groups").(int64)
	if g <= 1 {
		return nil
	}
	return &groupState{n: int(g), stride: constant.NewInt(types.I32, 0)}
}

// Groups is the number of consumer groups (1 without).
func (l *Lowerer) Groups() int {
	if l.grp == nil {
		return 1
	}
	return l.grp.n
}

// ConsumerWarps is the warps of every consumer group together.
func (l *Lowerer) ConsumerWarps() int { return l.nw * l.Groups() }

// CTAThreadID is the thread's index in the CTA; ThreadID is its index in
// its consumer group (the same without groups).
func (l *Lowerer) CTAThreadID() value.Value {
	if l.grp == nil {
		return l.tid
	}
	return l.grp.ctaTid
}

// planGroups checks consumer_groups (NewLowerer read it): whole
// warpgroups, no pingpong.
func (l *Lowerer) planGroups() {
	g := l.grp.n
	if g > 4 || l.nw%4 != 0 || (g*l.nw+4)*32 > 1024 {
		Fail("consumer_groups = %d with num_warps = %d: want 2 to 4 groups of whole warpgroups, at most 1024 threads with the producer", g, l.nw)
	}
	if on, _ := l.f.Attr("pingpong").(bool); on {
		Fail("consumer_groups = %d: pingpong's named barriers are the groups'; set one of them", g)
	}
}

// groupEntry splits the thread index at the kernel's entry: the group and
// the index within it, from which lanes and warps count.
func (l *Lowerer) groupEntry() {
	gs := l.grp
	gs.ctaTid = l.tid
	sh := int64(bits.TrailingZeros(uint(l.nw * 32)))
	gs.group = l.entry.NewLShr(l.tid, ConstI32(sh))
	gs.shift = l.entry.NewMul(gs.group, gs.stride)
	l.tid = l.entry.NewAnd(l.tid, ConstI32(int64(l.nw*32-1)))
}

// GroupID is the consumer group being lowered: the thread's own, or in the
// producer the group it fills for.
func (l *Lowerer) GroupID() value.Value {
	if l.grp == nil {
		return ConstI32(0)
	}
	if l.InProducer() {
		return ConstI32(int64(l.grp.prodGroup))
	}
	return l.grp.group
}

// placeGroups moves the tiles placed before the pipelined loop's (the
// private ones) after it and the mbarrier area (see the top of the file).
func (l *Lowerer) placeGroups(end int) int {
	ring := end
	for _, p := range l.pipes {
		for _, st := range p.loads {
			ring = min(ring, st.ByteOff)
		}
	}
	for _, st := range l.a.async {
		if st.ByteOff < ring && st.ByteOff+st.Bytes > ring {
			Fail("consumer_groups: a tile at %d+%d straddles the pipelined loop's tiles at %d", st.ByteOff, st.Bytes, ring)
		}
	}
	priv := roundUpTo(end-ring+groupBarBytes, 1024)
	for _, st := range l.a.async {
		if st.ByteOff < ring {
			st.ByteOff += priv
		} else {
			st.ByteOff -= ring
		}
	}
	l.grp.barNext = end - ring
	l.grp.privStart = priv
	return priv + ring
}

// IsGroupPrivate reports whether shared memory at off is a consumer
// group's own: a staged tile there is filled once a group (its full
// mbarrier counts Groups() arrivals), an address there moves by the
// group's shift.
func (l *Lowerer) IsGroupPrivate(off int) bool {
	return l.grp != nil && off >= l.grp.privStart
}

// groupShift is the byte offset of the group being lowered's copy of the
// private part.
func (l *Lowerer) groupShift() value.Value {
	if l.InProducer() {
		return l.b.NewMul(ConstI32(int64(l.grp.prodGroup)), l.grp.stride)
	}
	return l.grp.shift
}

// reserveGroupBars takes bytes from the mbarrier area.
func (l *Lowerer) reserveGroupBars(bytes int) int {
	off := roundUpTo(l.grp.barNext, 8)
	if off+bytes > l.grp.privStart {
		Fail("internal error: consumer_groups: %d bytes of mbarriers past the area of %d", off+bytes, groupBarBytes)
	}
	l.grp.barNext = off + bytes
	return off
}

// groupBarrier is a consumer group's CTA barrier: named barrier 1 + g over
// its threads.
func (l *Lowerer) groupBarrier() {
	id := l.b.NewAdd(l.grp.group, ConstI32(1))
	l.asm(types.Void, fmt.Sprintf("bar.sync $0, %d;", l.nw*32), "r,~{memory}", true, id)
}

// finishGroups fixes the private part's size and the shared memory the
// groups need together.
func (l *Lowerer) finishGroups() {
	gs := l.grp
	stride := roundUpTo(l.smemBytes-gs.privStart, 1024)
	gs.stride.X.SetInt64(int64(stride))
	l.smemBytes = gs.privStart + gs.n*stride
	l.Note(fmt.Sprintf("consumer_groups: %d groups of %d warps; shared memory: %d bytes for all, %d each group's own", gs.n, l.nw, gs.privStart, stride))
}

// isProducerThread is whether the thread at the CTA index tid is the
// producer warpgroup's (tid >= the consumers' threads).
func (l *Lowerer) isProducerThread(first bool) value.Value {
	n := ConstI32(int64(l.ConsumerWarps() * 32))
	if first {
		return l.b.NewICmp(enum.IPredEQ, l.CTAThreadID(), n)
	}
	return l.b.NewICmp(enum.IPredUGE, l.CTAThreadID(), n)
}

// produceGroups issues a private tile's copy once a group, from the
// producer: the ops before it that depend on group_id are lowered again
// with each group's id (the tile's coordinates), last group first so that
// group 0's values, which the pipelined loop's copies read, stay.
func (l *Lowerer) produceGroups(st *Staged) {
	ws := l.ws
	dep := map[*tir.Value]bool{}
	var redo []*tir.Op
	for _, op := range l.f.Body.Ops {
		if op == st.Load {
			break
		}
		if !ws.need[op] || len(op.Regions) > 0 {
			continue
		}
		d := op.Kind == tir.OpGroupID
		for _, a := range op.Args {
			d = d || dep[a]
		}
		if d {
			for _, r := range op.Results {
				dep[r] = true
			}
			redo = append(redo, op)
		}
	}
	for g := l.grp.n - 1; g >= 0; g-- {
		l.grp.prodGroup = g
		for _, op := range redo {
			l.lowerOp(op)
		}
		ws.pt.WaitRefill(l, st)
		l.issueCopy(st, nil, 0, nil)
	}
}
