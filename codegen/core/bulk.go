package core

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// Bulk reductions, FlashAttention-3's way for the backward's dQ: an f32
// atomic_add tile in a loop body is written to a staging area in shared
// memory, and added to global memory with one cp.reduce.async.bulk per row
// instead of a red per element. The adds of iteration k are issued after
// the first CTA barrier of iteration k+1 (and after the loop, behind one
// barrier of its own), so the loop gains no barrier: the body's barrier
// that follows the writes is what makes every thread's rows complete. Two
// staging buffers alternate; a buffer is written again two iterations
// later, after a barrier before which the threads that issued its adds
// waited for their reads (Barrier's cp.async.bulk.wait_group.read).
// A form with a barrier of its own measured 14% slower than the
// per-element reds, while without the reds the backward ran 58% faster, so
// the reds are the cost to remove; this deferred form is not the default
// either (docs/decisions.md, Retired).

// bulkRowPad pads each staged row by 16 bytes: with the MMA accumulator
// layouts (a warp's lanes spread over 8 rows of the dimension of stride 1
// and 4 of the other), rows 4 floats apart put the 32 lanes' stores in 32
// banks; unpadded, four lanes share one. The padding also carries the
// row's global address (8 bytes) and whether it is added (4 bytes), so the
// thread that issues a row's add need not hold it.
const bulkRowPad = 4

// loopFrame is a for loop whose body is being lowered, with what a
// deferred bulk reduction in it needs.
type loopFrame struct {
	depth  int
	iv, lo value.Value
	hi     value.Value
	unit   bool // the step is the constant 1
	// wantBulk: an atomic_add the target may take in bulk sits directly
	// in the body (not under a branch or in an inner loop).
	wantBulk bool
	// issue is the empty block after the body's first barrier, filled
	// when the loop is done: the adds staged by the previous iteration;
	// next follows it.
	issue, next *ir.Block
	bulk        *stagedBulk
}

// stagedBulk is the staging area of a loop's bulk reduction.
type stagedBulk struct {
	off      int // bytes from the scratch area's start to buffer 0
	bufElems int // f32 per buffer (two of them)
	rows     int
	rowElems int // f32 per row, padding included
	n        int // f32 added per row
	// tensor, when set, stages and issues the tile instead (a target's
	// tensor reductions): buffers of bufElems f32 from absolute byte
	// abs, 1024-aligned, then a 16-byte header per buffer.
	tensor TensorReducer
	abs    int
}

// TensorReduceTarget is implemented by targets that add planned f32
// atomic_add tiles by tensor reductions from a staging tile (sm90: TMA's
// cp.reduce.async.bulk.tensor), which the core double-buffers and defers
// as it does its bulk reductions. TensorReduce is op's reducer, or nil.
type TensorReduceTarget interface {
	TensorReduce(op *tir.Op) TensorReducer
}

// TensorReducer stages and issues one atomic_add's tensor reductions.
type TensorReducer interface {
	// Bytes is one staging buffer's size, a multiple of 1024.
	Bytes() int
	// Stage writes the thread's registers vals (layout lin) into the
	// staging buffer at absolute shared byte base + dyn (an i32), fences
	// them for the async proxy, and has one thread write what Issue needs
	// into the 16 bytes at absolute byte hdr + dyn16 (an i32).
	Stage(l *Lowerer, base int, dyn value.Value, hdr int, dyn16 value.Value, vals []value.Value, lin *Linear)
	// Issue, in thread 0 after a CTA barrier, adds the buffer at base +
	// dyn to global memory with the header at hdr + dyn16 as Stage left it,
	// and commits the bulk group.
	Issue(l *Lowerer, base int, dyn value.Value, hdr int, dyn16 value.Value)
}

// tensorReducer is op's tensor reducer when the target has one.
func (l *Lowerer) tensorReducer(op *tir.Op) TensorReducer {
	if t, ok := l.target.(TensorReduceTarget); ok {
		return t.TensorReduce(op)
	}
	return nil
}

// innerLoop is the innermost loop being lowered, or nil.
func (l *Lowerer) innerLoop() *loopFrame {
	if len(l.loops) == 0 {
		return nil
	}
	return l.loops[len(l.loops)-1]
}

// pushLoop starts the frame of a loop whose body is about to be lowered.
func (l *Lowerer) pushLoop(body *tir.Block, iv, lo, hi, step value.Value) *loopFrame {
	fr := &loopFrame{depth: l.depth, iv: iv, lo: lo, hi: hi}
	if c, ok := step.(*constant.Int); ok && c.X.IsInt64() && c.X.Int64() == 1 {
		fr.unit = true
	}
	fr.wantBulk = l.ws == nil && l.bulkIn(body) &&
		slices.ContainsFunc(body.Ops, func(o *tir.Op) bool { return o.Kind == tir.OpAtomicAdd })
	l.loops = append(l.loops, fr)
	return fr
}

// bulkIssuePoint ends the current block after the first barrier of a body
// that may stage a bulk reduction, leaving an empty block for its adds.
func (l *Lowerer) bulkIssuePoint() {
	fr := l.innerLoop()
	if fr == nil || !fr.wantBulk || fr.issue != nil || l.depth != fr.depth || l.branchDepth != 0 {
		return
	}
	fr.issue, fr.next = l.newBlock("bulk.issue"), l.newBlock("bulk.next")
	l.b.NewBr(fr.issue)
	l.b = fr.next
}

// popLoop fills the issue block of the loop's body (the previous
// iteration's adds, in every iteration but the first) and, at the exit
// (the current block), adds what the last iteration staged.
func (l *Lowerer) popLoop(fr *loopFrame) {
	l.loops = l.loops[:len(l.loops)-1]
	if fr.issue == nil {
		return
	}
	exit := l.b
	l.b = fr.issue
	if fr.bulk == nil {
		l.b.NewBr(fr.next)
		l.b = exit
		return
	}
	k := l.b.NewSub(fr.iv, fr.lo)
	l.bulkIssueIf(fr.bulk, l.b.NewICmp(enum.IPredSGT, k, ConstI32(0)), l.b.NewSub(k, ConstI32(1)))
	l.b.NewBr(fr.next)
	l.b = exit
	l.stagingFrom = 0
	// The last iteration's rows are complete once every thread is here.
	l.Barrier()
	n := l.b.NewSub(fr.hi, fr.lo)
	l.bulkIssueIf(fr.bulk, l.b.NewICmp(enum.IPredSGT, n, ConstI32(0)), l.b.NewSub(n, ConstI32(1)))
	l.bulkPending, l.bulkUsed = true, true
	l.smemDirty = true
}

// bulkIssueIf adds the rows of the buffer iteration k (i32) staged, when
// cond holds, continuing in a new current block.
func (l *Lowerer) bulkIssueIf(sb *stagedBulk, cond, k value.Value) {
	do, done := l.newBlock("bulk.add"), l.newBlock("bulk.done")
	l.b.NewCondBr(cond, do, done)
	l.b = do
	if sb.tensor != nil {
		odd := l.b.NewAnd(k, ConstI32(1))
		dyn, dyn16 := l.b.NewMul(odd, ConstI32(int64(4*sb.bufElems))), l.b.NewMul(odd, ConstI32(16))
		l.IfThen(l.b.NewICmp(enum.IPredEQ, l.tid, ConstI32(0)), "tensor.reduce", func() {
			sb.tensor.Issue(l, sb.abs, dyn, sb.abs+8*sb.bufElems, dyn16)
		})
		l.b.NewBr(done)
		l.b = done
		return
	}
	buf := l.b.NewMul(l.b.NewAnd(k, ConstI32(1)), ConstI32(int64(sb.bufElems)))
	// Rows go to threads spread over the warps: thread t*(T/rows) takes
	// row t, or thread t rows t, t+T, ….
	threads := l.Threads()
	type job struct{ row, on value.Value }
	var jobs []job
	if threads >= sb.rows {
		every := int64(threads / sb.rows) // a power of two (atomicAddBulk)
		jobs = append(jobs, job{
			row: l.b.NewLShr(l.tid, ConstI32(int64(bits.TrailingZeros64(uint64(every))))),
			on:  l.b.NewICmp(enum.IPredEQ, l.b.NewAnd(l.tid, ConstI32(every-1)), ConstI32(0)),
		})
	} else {
		for i := 0; i < sb.rows/threads; i++ {
			jobs = append(jobs, job{row: l.b.NewAdd(l.tid, ConstI32(int64(i*threads))), on: constant.True})
		}
	}
	text := fmt.Sprintf("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, $2, 0;\n\t@p cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], %d;\n\t}", 4*sb.n)
	for _, j := range jobs {
		start := l.b.NewAdd(buf, l.b.NewMul(j.row, ConstI32(int64(sb.rowElems))))
		pad := l.b.NewAdd(start, ConstI32(int64(sb.n)))
		addr := l.b.NewLoad(types.I64, l.sharedAt(types.I64, sb.off, l.b.NewLShr(pad, ConstI32(1))))
		flag := l.b.NewLoad(types.I32, l.sharedAt(types.I32, sb.off, l.b.NewAdd(pad, ConstI32(2))))
		on := l.b.NewAnd(j.on, l.b.NewICmp(enum.IPredNE, flag, ConstI32(0)))
		src := l.b.NewPtrToInt(l.sharedAt(types.Float, sb.off, start), types.I32)
		l.asm(types.Void, text, "l,r,r,~{memory}", true, addr, src, l.b.NewZExt(on, types.I32))
	}
	l.asm(types.Void, "cp.async.bulk.commit_group;", "~{memory}", true)
	l.b.NewBr(done)
	l.b = done
}

// atomicAddTensor stages the f32 tile of atomic_add op for its tensor
// reducer tr in this iteration's buffer (as atomicAddBulk, with the
// target's layout and issue). False (nothing emitted) where atomicAddBulk
// could not defer it either.
func (l *Lowerer) atomicAddTensor(op *tir.Op, ws []Layout, vals []value.Value, tr TensorReducer) bool {
	fr := l.innerLoop()
	if fr == nil || fr.issue == nil || fr.bulk != nil || !fr.unit || l.depth != fr.depth || l.branchDepth != 0 {
		return false
	}
	n := tr.Bytes()
	if n%1024 != 0 {
		Fail("internal error: %s: tensor reduction staging of %d bytes", op.Pos, n)
	}
	// Past every scratch use so far (a wgmma's operand still being read
	// among them): the buffers live across iterations.
	abs := roundUpTo(l.smemBytes, 1024)
	sb := &stagedBulk{tensor: tr, abs: abs, off: abs - l.Scratch(), bufElems: n / 4}
	l.UseShared(sb.off + 2*n + 32)
	l.stagingFrom = sb.off
	fr.bulk = sb
	odd := l.b.NewAnd(l.b.NewSub(fr.iv, fr.lo), ConstI32(1))
	lin := l.Lin(ws[1], op.Args[1].Type.Shape)
	tr.Stage(l, abs, l.b.NewMul(odd, ConstI32(int64(n))), abs+2*n, l.b.NewMul(odd, ConstI32(16)), vals, lin)
	l.smemDirty = true
	return true
}

// atomicAddBulk stages the f32 tile of atomic_add op for a bulk reduction
// (see the top of the file): every thread writes its values as rows along
// the pointers' dimension of stride 1 into this iteration's buffer, and
// the threads holding a row's first element write its address and mask
// into the row's padding. It applies in a loop body with a barrier before
// the op, when the pointers are affine with stride 1 along one dimension
// whose rows are a multiple of 16 bytes, the mask is constant along it,
// the layout's register bits are apart from its lane and warp bits, and
// the threads are a power of two times the rows (or a divisor of them); false
// otherwise (nothing emitted).
func (l *Lowerer) atomicAddBulk(op *tir.Op, ws []Layout, ptrs, vals, mask []value.Value) bool {
	fr := l.innerLoop()
	if fr == nil || fr.issue == nil || fr.bulk != nil || !fr.unit || l.depth != fr.depth || l.branchDepth != 0 {
		return false
	}
	p := op.Args[0]
	shape := p.Type.Shape
	strides, ok := l.a.affine(p)
	if !ok || len(strides) != len(shape) {
		return false
	}
	inner := -1
	for d, s := range strides {
		if s == 1 && shape[d] > 1 {
			inner = d
		}
	}
	if inner < 0 || 4*shape[inner]%16 != 0 {
		return false
	}
	if len(op.Args) == 3 && l.a.axis(op.Args[2]).constancy[inner] < shape[inner] {
		return false
	}
	lin := l.Lin(ws[1], shape)
	for i, w := range ws {
		if i < len(op.Args) && !l.Lin(w, shape).equal(lin) {
			return false
		}
	}
	if !regBitsApart(lin) {
		return false
	}
	// Staging strides in elements: rows of shape[inner] (padded), the
	// other dimensions in order outside them.
	ss := make([]int64, len(shape))
	ss[inner] = 1
	rowElems := shape[inner] + bulkRowPad
	step := int64(rowElems)
	for d := len(shape) - 1; d >= 0; d-- {
		if d != inner {
			ss[d] = step
			step *= int64(shape[d])
		}
	}
	sb := &stagedBulk{bufElems: roundUpTo(int(step), 32), rows: int(step) / rowElems, rowElems: rowElems, n: shape[inner]}
	if threads := l.Threads(); threads >= sb.rows && (threads%sb.rows != 0 || bits.OnesCount(uint(threads/sb.rows)) != 1) ||
		threads < sb.rows && sb.rows%threads != 0 {
		return false
	}
	// Past every scratch use so far (a wgmma's operand still being read
	// among them): the buffers live across iterations.
	sb.off = roundUpTo(l.smemBytes-l.Scratch(), 128)
	l.UseShared(sb.off + 2*4*sb.bufElems)
	l.stagingFrom = sb.off
	fr.bulk = sb

	k := l.b.NewSub(fr.iv, fr.lo)
	base := l.baseCoords(lin)
	var idx0 value.Value = l.b.NewMul(l.b.NewAnd(k, ConstI32(1)), ConstI32(int64(sb.bufElems)))
	for d, c := range base {
		idx0 = l.b.NewAdd(idx0, l.b.NewMul(c, ConstI32(ss[d])))
	}
	regIdx := func(r int) value.Value {
		var k int64
		for d, c := range lin.RegOffset(r) {
			k += int64(c) * ss[d]
		}
		return l.b.NewAdd(idx0, ConstI32(k))
	}
	for r, v := range vals {
		l.b.NewStore(v, l.sharedAt(types.Float, sb.off, regIdx(r)))
	}
	// The row's first element is held by the threads whose coordinate
	// along inner is 0 in a register with no offset along it; of copies,
	// the first. They describe the row in its padding.
	var first value.Value = l.b.NewICmp(enum.IPredEQ, base[inner], ConstI32(0))
	if own := l.copyOwner(lin); own != nil {
		first = l.b.NewAnd(first, own)
	}
	desc, done := l.newBlock("bulk.row"), l.newBlock("bulk.staged")
	l.b.NewCondBr(first, desc, done)
	l.b = desc
	for r := range vals {
		if lin.RegOffset(r)[inner] != 0 {
			continue
		}
		pad := l.b.NewAdd(regIdx(r), ConstI32(int64(sb.n)))
		l.b.NewStore(l.b.NewPtrToInt(ptrs[r], types.I64), l.sharedAt(types.I64, sb.off, l.b.NewLShr(pad, ConstI32(1))))
		var on value.Value = ConstI32(1)
		if mask != nil {
			on = l.b.NewZExt(mask[r], types.I32)
		}
		l.b.NewStore(on, l.sharedAt(types.I32, sb.off, l.b.NewAdd(pad, ConstI32(2))))
	}
	l.b.NewBr(done)
	l.b = done
	// The bulk copies read through the async proxy.
	l.asm(types.Void, "fence.proxy.async.shared::cta;", "~{memory}", true)
	l.smemDirty = true
	return true
}

// BulkStoreIssued records that this thread's code issued bulk tensor
// stores (TensorStoreTarget) reading the scratch area, in a committed bulk
// group: the next CTA barrier waits for their reads first
// (cp.async.bulk.wait_group.read, a no-op in threads that issued none), as
// the kernel does before it exits, and shared memory counts as accessed.
func (l *Lowerer) BulkStoreIssued() {
	l.bulkPending, l.bulkStored = true, true
	l.smemDirty = true
}
