package async

import (
	"fmt"
	"math/bits"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
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

// groupState is the kernel's consumer groups (nil: one group). Its
// methods take a nil receiver for one group.
type groupState struct {
	n         int
	privStart int           // where the private part starts
	barNext   int           // the next free byte of the mbarrier area
	stride    *constant.Int // the private part's size, set by finish
	group     value.Value   // the consumer thread's group (entry block)
	shift     value.Value   // group × stride (entry block)
	ctaTid    value.Value   // the thread's index in the CTA
	// producing: the producer program is being lowered, for group
	// prodGroup (its fills of the private tiles).
	producing bool
	prodGroup int
}

// newGroupState reads f's consumer_groups (nil: one group); check checks
// it once the phases run.
func newGroupState(f *tir.Func) *groupState {
	g, _ := f.Attr("consumer_groups").(int64)
	if g <= 1 {
		return nil
	}
	return &groupState{n: int(g), stride: constant.NewInt(types.I32, 0)}
}

// count is the number of consumer groups (1 without).
func (gs *groupState) count() int {
	if gs == nil {
		return 1
	}
	return gs.n
}

// consumerWarps is the warps of every consumer group together.
func (gs *groupState) consumerWarps(l *core.Lowerer) int { return l.NumWarps() * gs.count() }

// ctaThread is the thread's index in the CTA; core.Lowerer.ThreadID is its
// index in its consumer group (the same without groups).
func (gs *groupState) ctaThread(l *core.Lowerer) value.Value {
	if gs == nil {
		return l.ThreadID()
	}
	return gs.ctaTid
}

// check checks consumer_groups: whole warpgroups, no pingpong.
func (gs *groupState) check(l *core.Lowerer) {
	g, nw := gs.n, l.NumWarps()
	if g > 4 || nw%4 != 0 || (g*nw+4)*32 > 1024 {
		core.Fail("consumer_groups = %d with num_warps = %d: want 2 to 4 groups of whole warpgroups, at most 1024 threads with the producer", g, nw)
	}
	if on, _ := l.Func().Attr("pingpong").(bool); on {
		core.Fail("consumer_groups = %d: pingpong's named barriers are the groups'; set one of them", g)
	}
}

// entry splits the thread index tid at the kernel's entry: the group and
// the index within it (returned), from which lanes and warps count.
func (gs *groupState) entry(l *core.Lowerer, tid value.Value) value.Value {
	nw := l.NumWarps()
	e := l.Entry()
	gs.ctaTid = tid
	sh := int64(bits.TrailingZeros(uint(nw * 32)))
	gs.group = e.NewLShr(tid, core.ConstI32(sh))
	gs.shift = e.NewMul(gs.group, gs.stride)
	return e.NewAnd(tid, core.ConstI32(int64(nw*32-1)))
}

// id is the consumer group being lowered: the thread's own, or in the
// producer the group it fills for.
func (gs *groupState) id() value.Value {
	if gs == nil {
		return core.ConstI32(0)
	}
	if gs.producing {
		return core.ConstI32(int64(gs.prodGroup))
	}
	return gs.group
}

// place moves the tiles placed before the pipelined loop's, which start
// at ring (the private ones), after them and the mbarrier area (see the
// top of the file); end is where the tiles end. It returns where they end
// now.
func (gs *groupState) place(l *core.Lowerer, ring, end int) int {
	tiles := l.Plan().Tiles()
	for _, st := range tiles {
		if st.ByteOff < ring && st.ByteOff+st.Bytes > ring {
			core.Fail("consumer_groups: a tile at %d+%d straddles the pipelined loop's tiles at %d", st.ByteOff, st.Bytes, ring)
		}
	}
	priv := roundUpTo(end-ring+groupBarBytes, 1024)
	for _, st := range tiles {
		if st.ByteOff < ring {
			st.ByteOff += priv
		} else {
			st.ByteOff -= ring
		}
	}
	gs.barNext = end - ring
	gs.privStart = priv
	return priv + ring
}

// private reports whether shared memory at off is a consumer group's own:
// a staged tile there is filled once a group (its full mbarrier counts
// the groups' arrivals), an address there moves by the group's shift.
func (gs *groupState) private(off int) bool {
	return gs != nil && off >= gs.privStart
}

// shiftAt is the byte offset of the group being lowered's copy of the
// private part at off, or nil when off is shared.
func (gs *groupState) shiftAt(l *core.Lowerer, off int) value.Value {
	if !gs.private(off) {
		return nil
	}
	if gs.producing {
		return l.Block().NewMul(core.ConstI32(int64(gs.prodGroup)), gs.stride)
	}
	return gs.shift
}

// reserve takes bytes from the mbarrier area.
func (gs *groupState) reserve(bytes int) int {
	off := roundUpTo(gs.barNext, 8)
	if off+bytes > gs.privStart {
		core.Fail("internal error: consumer_groups: %d bytes of mbarriers past the area of %d", off+bytes, groupBarBytes)
	}
	gs.barNext = off + bytes
	return off
}

// barrier is a consumer group's CTA barrier: named barrier 1 + g over its
// threads.
func (gs *groupState) barrier(l *core.Lowerer) {
	id := l.Block().NewAdd(gs.group, core.ConstI32(1))
	l.Asm(types.Void, fmt.Sprintf("bar.sync $0, %d;", l.NumWarps()*32), "r,~{memory}", true, id)
}

// finish fixes the private part's size and the shared memory the groups
// need together, when the kernel is lowered.
func (gs *groupState) finish(l *core.Lowerer) {
	stride := roundUpTo(l.SharedBytes()-gs.privStart, 1024)
	gs.stride.X.SetInt64(int64(stride))
	l.SetSharedBytes(gs.privStart + gs.n*stride)
	l.Note(fmt.Sprintf("consumer_groups: %d groups of %d warps; shared memory: %d bytes for all, %d each group's own", gs.n, l.NumWarps(), gs.privStart, stride))
}
