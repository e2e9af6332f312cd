package sm90

import (
	"fmt"

	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// Vectors that ride with a TMA tile: in a pipelined loop whose staged
// tiles TMA copies, an unmasked load of a contiguous vector — a kernel
// tensor plus scalar offsets plus arange(0, n), such as the backward's
// rows of LSE and Δ for its q block — is copied with the loop's first TMA
// tile: the thread that issues the tile also issues one cp.async.bulk per
// vector into a buffer of the vector's own per stage, completing on the
// tile's mbarrier, so the copy runs iterations ahead with the tile's.
// Each thread then reads its elements from shared memory after waiting
// for the tile, instead of from global memory at the top of the
// iteration, where the load's latency stood between the block's first
// GEMM and its softmax.
//
// A bulk copy moves whole 16-byte chunks from a 16-byte-aligned address,
// which a vector starting at any row of a sequence need not have: the
// copy takes the chunks that hold the vector (never a chunk past the
// ones its elements touch, so never another page), and readers skip the
// bytes before it.

// asmBulkCopy is a contiguous copy from global to shared memory: [$0]
// destination, [$1] source, $2 bytes (multiples of 16), [$3] mbarrier.
const asmBulkCopy = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];"

// rider is a vector copied with a TMA tile.
type rider struct {
	load  *tir.Op
	host  *core.Staged // the tile whose fills it rides
	root  *tir.Value   // the kernel tensor
	terms []term       // its offset in elements: scalar terms (stride nil: 1)
	index *tir.Value   // the arange(0, n) of its pointers
	n     int          // elements
	elem  int          // bytes per element
	slot  int          // bytes per buffer: the chunks of any n-element vector
	off   int          // byte offset of buffer 0
}

// TMARiders is the phase that finds the vectors riding with TMA tiles. It
// runs before warp-specialize, whose producer then issues the riders with
// their tiles (CopyOperands names their offsets); consumer groups, whose
// tiles may be each group's own, keep the loads.
var TMARiders = core.Phase{
	Name: "tma-riders",
	Doc:  "copy a pipelined loop's contiguous unmasked vector loads (the backward's LSE and Δ rows) with its first TMA tile: a cp.async.bulk each on the tile's mbarrier, read from shared memory",
	Run: func(l *core.Lowerer) error {
		if t, ok := l.Target().(*Target); ok && t.Riders && t.Groups() == 1 {
			t.planRiders(l)
		}
		return nil
	},
}

// planRiders finds each pipelined loop's riders and gives them buffers.
func (t *Target) planRiders(l *core.Lowerer) {
	hosts := map[*tir.Op]*core.Staged{}
	for _, st := range l.Plan().Tiles() {
		if p, ok := st.Plan.(*tilePlan); ok && p.tma != nil && st.PipeLoop() != nil && hosts[st.PipeLoop()] == nil {
			hosts[st.PipeLoop()] = st
		}
	}
	l.Func().Body.Walk(func(loop *tir.Op) bool {
		host := hosts[loop]
		if host == nil {
			return true
		}
		for _, op := range loop.Regions[0].Ops {
			r := matchRider(l, op)
			if r == nil {
				continue
			}
			var roots []*tir.Value
			for _, tm := range r.terms {
				roots = append(roots, tm.idx)
			}
			if !t.AddToSlice(l, loop, roots) {
				continue
			}
			r.host = host
			// Bulk copies land on 16-byte boundaries; reservations are
			// 8-byte aligned.
			r.off = roundUp16(l.Plan().ReserveShared(host.Stages()*r.slot + 8))
			if t.riders == nil {
				t.riders = map[*tir.Op]*rider{}
			}
			t.riders[op] = r
			hp := host.Plan.(*tilePlan)
			hp.tma.riders = append(hp.tma.riders, r)
			l.Note(fmt.Sprintf("%s: %s rides with %s's TMA copies (%d bytes a stage)", op.Pos, r.root.Name, hp.tma.tensor, r.slot))
		}
		return true
	})
}

// matchRider matches op against a rider's load: no mask, a 1-D result of
// 4-byte elements, pointers root + scalar offsets + arange(0, n) (the
// range may start at a scalar).
func matchRider(l *core.Lowerer, op *tir.Op) *rider {
	if op.Kind != tir.OpLoad || len(op.Args) != 1 || l.Plan().StagedLoad(op) != nil {
		return nil
	}
	rt := op.Result().Type
	if rt.Rank() != 1 || (rt.Elem != tir.F32 && rt.Elem != tir.I32) {
		return nil
	}
	root, terms, _, ok := tileTerms(l, op.Args[0])
	if !ok || root == nil {
		return nil
	}
	r := &rider{load: op, root: root, n: rt.Shape[0], elem: 4}
	ranges := 0
	for _, tm := range terms {
		switch {
		case tm.idx.Type.IsScalar():
			r.terms = append(r.terms, tm)
		case tm.stride == nil:
			if s := unsplat(tm.idx); s.Type.IsScalar() {
				r.terms = append(r.terms, term{idx: s})
				continue
			}
			start, n, ok := rangeOf(tm.idx)
			if !ok || n != r.n {
				return nil
			}
			r.index = tm.idx
			if start != nil {
				r.index = aranged(tm.idx)
			}
			ranges++
			if start != nil {
				r.terms = append(r.terms, term{idx: start})
			}
		default:
			return nil
		}
	}
	if ranges != 1 {
		return nil
	}
	r.slot = roundUp16(r.n*r.elem) + 16
	return r
}

func roundUp16(n int) int { return (n + 15) &^ 15 }

// aranged is the arange(0, n) of splat(s) + arange(0, n).
func aranged(v *tir.Value) *tir.Value {
	for _, a := range v.Def.Args {
		if a.Def != nil && a.Def.Kind == tir.OpArange {
			return a
		}
	}
	return v
}

// riderCopy is one fill of a rider: its global source's aligned chunks.
type riderCopy struct {
	src, bytes value.Value // i64 address, i32 size
}

// riderSource is r's first element's address (i64) in the environment
// being lowered (an iteration's, or the one a prefetch lowers).
func riderSource(l *core.Lowerer, r *rider) value.Value {
	b := l.Block()
	var off value.Value = core.ConstI32(0)
	for _, tm := range r.terms {
		x := l.Scalar(tm.idx)
		if tm.stride != nil {
			x = b.NewMul(x, l.Scalar(tm.stride))
		}
		off = b.NewAdd(off, x)
	}
	base := b.NewPtrToInt(l.Scalar(r.root), types.I64)
	return b.NewAdd(base, b.NewMul(b.NewSExt(off, types.I64), core.ConstI64(int64(r.elem))))
}

// riderCopies are the copies of the host's riders for the fill being
// issued: their sources and sizes, which the fill's expect_tx counts.
func riderCopies(l *core.Lowerer, riders []*rider) []riderCopy {
	out := make([]riderCopy, len(riders))
	for i, r := range riders {
		b := l.Block()
		a := riderSource(l, r)
		lo := b.NewAnd(a, core.ConstI64(^15))
		hi := b.NewAnd(b.NewAdd(a, core.ConstI64(int64(r.n*r.elem+15))), core.ConstI64(^15))
		out[i] = riderCopy{src: lo, bytes: b.NewTrunc(b.NewSub(hi, lo), types.I32)}
	}
	return out
}

// issueRiders issues the riders' copies into the buffer being filled
// (dyn: the host's buffer index, nil: 0) on mbarrier bar.
func issueRiders(l *core.Lowerer, riders []*rider, cs []riderCopy, buf, bar value.Value) {
	for i, r := range riders {
		var dyn value.Value
		if buf != nil {
			dyn = l.Block().NewMul(buf, core.ConstI32(int64(r.slot)))
		}
		l.Asm(types.Void, asmBulkCopy, "r,l,r,r,~{memory}", true, sharedAddr32(l, r.off, dyn), cs[i].src, cs[i].bytes, bar)
	}
}

// lowerRider reads rider r's vector from its buffer in use, once the
// host's fill has landed.
func (t *Target) lowerRider(l *core.Lowerer, r *rider) {
	t.WaitTile(l, r.host)
	b := l.Block()
	var first value.Value = core.ConstI32(0) // the buffer's first element
	if buf := r.host.Buffer(); buf != nil {
		first = b.NewMul(buf, core.ConstI32(int64(r.slot/r.elem)))
	}
	var mt types.Type = types.Float
	if r.load.Result().Type.Elem == tir.I32 {
		mt = types.I32
	}
	// The vector's first element in the buffer: past the bytes its first
	// chunk holds before it.
	src := riderSource(l, r)
	b = l.Block()
	skip := b.NewTrunc(b.NewLShr(b.NewSub(src, b.NewAnd(src, core.ConstI64(^15))), core.ConstI64(2)), types.I32)
	first = b.NewAdd(first, skip)
	l.LowerLoadVia(r.load, func(lay core.Layout) []value.Value {
		idx := l.Get(r.index, lay)
		out := make([]value.Value, len(idx))
		for i, x := range idx {
			b := l.Block()
			out[i] = b.NewLoad(mt, l.SharedAddress(mt, r.off, b.NewAdd(first, x)))
		}
		return out
	})
}

// OwnsOp: a rider is read from shared memory in the body of its host's
// loop (async.Scheduler.OwnsOp otherwise).
func (t *Target) OwnsOp(l *core.Lowerer, op *tir.Op) bool {
	if r := t.riders[op]; r != nil && t.InPipelinedBody(r.host) {
		t.lowerRider(l, r)
		return true
	}
	return t.Scheduler.OwnsOp(l, op)
}
