package async

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// Bulk reductions, FlashAttention-3's way for the backward's dQ: an f32
// atomic_add tile in a loop body is written to a staging area in shared
// memory, and added to global memory with one cp.reduce.async.bulk per run
// of rows (chooseRuns: rows consecutive in global memory share a run where
// that keeps the stores conflict-free) instead of a red per element. The
// adds of iteration k are issued after the first CTA barrier of iteration
// k+1 (and after the loop, behind one barrier of its own), so the loop
// gains no barrier: the body's barrier
// that follows the writes is what makes every thread's rows complete. Two
// staging buffers alternate; a buffer is written again two iterations
// later, after a barrier before which the threads that issued its adds
// waited for their reads (core.Lowerer.Barrier's
// cp.async.bulk.wait_group.read).
// A form with a barrier of its own measured 14% slower than the
// per-element reds, while without the reds the backward ran 58% faster, so
// the reds are the cost to remove; this deferred form is not the default
// either (docs/decisions.md, Retired).

// bulkRowPad pads each staged run by at least 16 bytes: with the MMA
// accumulator layouts (a warp's lanes spread over 8 rows of the dimension
// of stride 1 and 4 of the other), rows 4 floats apart put the 32 lanes' stores in 32
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
	runs     int // staged runs: one bulk reduction each
	runElems int // f32 per run, padding included
	n        int // f32 added per run
	// tensor, when set, stages and issues the tile instead (a target's
	// tensor reductions): buffers of bufElems f32 from absolute byte
	// abs, 1024-aligned, then a 16-byte header per buffer.
	tensor TensorReducer
	abs    int
}

// BulkReduceTarget is implemented by targets that can add a tile of f32 to
// global memory from shared memory in bulk (sm90: cp.reduce.async.bulk).
// BulkReduce reports whether atomic_add should take that path.
type BulkReduceTarget interface {
	BulkReduce(l *core.Lowerer) bool
}

// TensorReduceTarget is implemented by targets that add planned f32
// atomic_add tiles by tensor reductions from a staging tile (sm90: TMA's
// cp.reduce.async.bulk.tensor), which this package double-buffers and
// defers as it does its bulk reductions. TensorReduce is op's reducer, or
// nil.
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
	Stage(l *core.Lowerer, base int, dyn value.Value, hdr int, dyn16 value.Value, vals []value.Value, lin *core.Linear)
	// Issue, in thread 0 after a CTA barrier, adds the buffer at base +
	// dyn to global memory with the header at hdr + dyn16 as Stage left it,
	// and commits the bulk group.
	Issue(l *core.Lowerer, base int, dyn value.Value, hdr int, dyn16 value.Value)
}

// tensorReducer is op's tensor reducer when the target has one.
func tensorReducer(l *core.Lowerer, op *tir.Op) TensorReducer {
	if t, ok := l.Target().(TensorReduceTarget); ok {
		return t.TensorReduce(op)
	}
	return nil
}

// bulkIn reports that b holds an atomic_add the target may lower to bulk
// or tensor reductions (atomicAddBulk, atomicAddTensor).
func bulkIn(l *core.Lowerer, b *tir.Block) bool {
	bulk := false
	if t, ok := l.Target().(BulkReduceTarget); ok {
		bulk = t.BulkReduce(l)
	}
	return b.Any(func(op *tir.Op) bool { return op.Kind == tir.OpAtomicAdd && (bulk || tensorReducer(l, op) != nil) })
}

// bulkFrames are the for loops being lowered, innermost last, with what a
// bulk reduction deferred in their bodies needs.
type bulkFrames struct {
	loops []*loopFrame
}

// atomicAdd lowers f32 atomic_add op by the target's tensor reductions,
// else by bulk reductions, when either applies (core.ScheduleTarget's
// AtomicAdd).
func (bf *bulkFrames) atomicAdd(l *core.Lowerer, op *tir.Op, ws []core.Layout, ptrs, vals, mask []value.Value) bool {
	if tr := tensorReducer(l, op); tr != nil {
		if bf.atomicAddTensor(l, op, ws, vals, tr) {
			return true
		}
		l.Note(fmt.Sprintf("atomic_add at %s: by red: a tensor reduction is deferred past the next iteration's first barrier, and this one is not directly in a loop body after one", op.Pos))
	}
	if t, ok := l.Target().(BulkReduceTarget); ok {
		if t.BulkReduce(l) && bf.atomicAddBulk(l, op, ws, ptrs, vals, mask) {
			return true
		}
	}
	return false
}

// innerLoop is the innermost loop being lowered, or nil.
func (bf *bulkFrames) innerLoop() *loopFrame {
	if len(bf.loops) == 0 {
		return nil
	}
	return bf.loops[len(bf.loops)-1]
}

// push starts the frame of a loop whose body is about to be lowered;
// only one consumer group (bulk, else none: the staging is not each
// group's own) may defer reductions.
func (bf *bulkFrames) push(l *core.Lowerer, body *tir.Block, iv, lo, hi, step value.Value, bulk bool) *loopFrame {
	fr := &loopFrame{depth: l.Depth(), iv: iv, lo: lo, hi: hi}
	if c, ok := step.(*constant.Int); ok && c.X.IsInt64() && c.X.Int64() == 1 {
		fr.unit = true
	}
	fr.wantBulk = bulk && bulkIn(l, body) &&
		slices.ContainsFunc(body.Ops, func(o *tir.Op) bool { return o.Kind == tir.OpAtomicAdd })
	bf.loops = append(bf.loops, fr)
	return fr
}

// issuePoint ends the current block after the first barrier of a body
// that may stage a bulk reduction, leaving an empty block for its adds.
func (bf *bulkFrames) issuePoint(l *core.Lowerer) {
	fr := bf.innerLoop()
	if fr == nil || !fr.wantBulk || fr.issue != nil || l.Depth() != fr.depth || l.InBranch() {
		return
	}
	fr.issue, fr.next = l.NewBlock("bulk.issue"), l.NewBlock("bulk.next")
	l.Block().NewBr(fr.issue)
	l.SetBlock(fr.next)
}

// pop fills the issue block of the loop's body (the previous
// iteration's adds, in every iteration but the first) and, at the exit
// (the current block), adds what the last iteration staged.
func (bf *bulkFrames) pop(l *core.Lowerer, fr *loopFrame) {
	bf.loops = bf.loops[:len(bf.loops)-1]
	if fr.issue == nil {
		return
	}
	exit := l.Block()
	l.SetBlock(fr.issue)
	if fr.bulk == nil {
		fr.issue.NewBr(fr.next)
		l.SetBlock(exit)
		return
	}
	b := l.Block()
	k := b.NewSub(fr.iv, fr.lo)
	bf.bulkIssueIf(l, fr.bulk, b.NewICmp(enum.IPredSGT, k, core.ConstI32(0)), b.NewSub(k, core.ConstI32(1)))
	l.Block().NewBr(fr.next)
	l.SetBlock(exit)
	l.PinScratch(0)
	// The last iteration's rows are complete once every thread is here.
	l.Barrier()
	b = l.Block()
	n := b.NewSub(fr.hi, fr.lo)
	bf.bulkIssueIf(l, fr.bulk, b.NewICmp(enum.IPredSGT, n, core.ConstI32(0)), b.NewSub(n, core.ConstI32(1)))
	l.BulkReduceIssued()
}

// bulkIssueIf adds the rows of the buffer iteration k (i32) staged, when
// cond holds, continuing in a new current block.
func (bf *bulkFrames) bulkIssueIf(l *core.Lowerer, sb *stagedBulk, cond, k value.Value) {
	do, done := l.NewBlock("bulk.add"), l.NewBlock("bulk.done")
	l.Block().NewCondBr(cond, do, done)
	l.SetBlock(do)
	b := do
	if sb.tensor != nil {
		odd := b.NewAnd(k, core.ConstI32(1))
		dyn, dyn16 := b.NewMul(odd, core.ConstI32(int64(4*sb.bufElems))), b.NewMul(odd, core.ConstI32(16))
		l.IfThen(b.NewICmp(enum.IPredEQ, l.ThreadID(), core.ConstI32(0)), "tensor.reduce", func() {
			sb.tensor.Issue(l, sb.abs, dyn, sb.abs+8*sb.bufElems, dyn16)
		})
		l.Block().NewBr(done)
		l.SetBlock(done)
		return
	}
	buf := b.NewMul(b.NewAnd(k, core.ConstI32(1)), core.ConstI32(int64(sb.bufElems)))
	// Rows go to threads spread over the warps: thread t*(T/rows) takes
	// row t, or thread t rows t, t+T, ….
	threads := bodyThreads(l)
	tid := l.ThreadID()
	type job struct{ row, on value.Value }
	var jobs []job
	if threads >= sb.runs {
		every := int64(threads / sb.runs) // a power of two (atomicAddBulk)
		jobs = append(jobs, job{
			row: b.NewLShr(tid, core.ConstI32(int64(bits.TrailingZeros64(uint64(every))))),
			on:  b.NewICmp(enum.IPredEQ, b.NewAnd(tid, core.ConstI32(every-1)), core.ConstI32(0)),
		})
	} else {
		for i := 0; i < sb.runs/threads; i++ {
			jobs = append(jobs, job{row: b.NewAdd(tid, core.ConstI32(int64(i*threads))), on: constant.True})
		}
	}
	text := fmt.Sprintf("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, $2, 0;\n\t@p cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], %d;\n\t}", 4*sb.n)
	for _, j := range jobs {
		start := b.NewAdd(buf, b.NewMul(j.row, core.ConstI32(int64(sb.runElems))))
		pad := b.NewAdd(start, core.ConstI32(int64(sb.n)))
		addr := b.NewLoad(types.I64, sb.at(l, types.I64, b.NewLShr(pad, core.ConstI32(1))))
		flag := b.NewLoad(types.I32, sb.at(l, types.I32, b.NewAdd(pad, core.ConstI32(2))))
		on := b.NewAnd(j.on, b.NewICmp(enum.IPredNE, flag, core.ConstI32(0)))
		src := b.NewPtrToInt(sb.at(l, types.Float, start), types.I32)
		l.Asm(types.Void, text, "l,r,r,~{memory}", true, addr, src, b.NewZExt(on, types.I32))
	}
	l.Asm(types.Void, "cp.async.bulk.commit_group;", "~{memory}", true)
	b.NewBr(done)
	l.SetBlock(done)
}

// at is the address of element idx (i32) of a t array at the staging
// area's start (in the scratch area).
func (sb *stagedBulk) at(l *core.Lowerer, t types.Type, idx value.Value) value.Value {
	return l.SharedAbs(t, l.Scratch()+sb.off, idx)
}

// atomicAddTensor stages the f32 tile of atomic_add op for its tensor
// reducer tr in this iteration's buffer (as atomicAddBulk, with the
// target's layout and issue). False (nothing emitted) where atomicAddBulk
// could not defer it either.
func (bf *bulkFrames) atomicAddTensor(l *core.Lowerer, op *tir.Op, ws []core.Layout, vals []value.Value, tr TensorReducer) bool {
	fr := bf.innerLoop()
	if fr == nil || fr.issue == nil || fr.bulk != nil || !fr.unit || l.Depth() != fr.depth || l.InBranch() {
		return false
	}
	n := tr.Bytes()
	if n%1024 != 0 {
		core.Fail("internal error: %s: tensor reduction staging of %d bytes", op.Pos, n)
	}
	// Past every scratch use so far (a wgmma's operand still being read
	// among them): the buffers live across iterations.
	abs := roundUpTo(l.SharedBytes(), 1024)
	sb := &stagedBulk{tensor: tr, abs: abs, off: abs - l.Scratch(), bufElems: n / 4}
	l.UseShared(sb.off + 2*n + 32)
	l.PinScratch(sb.off)
	fr.bulk = sb
	b := l.Block()
	odd := b.NewAnd(b.NewSub(fr.iv, fr.lo), core.ConstI32(1))
	lin := l.Lin(ws[1], op.Args[1].Type.Shape)
	tr.Stage(l, abs, b.NewMul(odd, core.ConstI32(int64(n))), abs+2*n, b.NewMul(odd, core.ConstI32(16)), vals, lin)
	l.SetSharedDirty(true)
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
func (bf *bulkFrames) atomicAddBulk(l *core.Lowerer, op *tir.Op, ws []core.Layout, ptrs, vals, mask []value.Value) bool {
	fr := bf.innerLoop()
	if fr == nil || fr.issue == nil || fr.bulk != nil || !fr.unit || l.Depth() != fr.depth || l.InBranch() {
		return false
	}
	p := op.Args[0]
	shape := p.Type.Shape
	if lin := l.Lin(ws[1], shape); core.RegBitsApart(lin) && sameLayouts(l, op, ws, lin) {
		if to := tileOrder(op, lin, mask != nil); to != nil {
			bf.stageTileOrder(l, fr, op, to, ptrs, vals)
			return true
		}
	}
	strides, ok := l.Affine(p)
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
	if len(op.Args) == 3 && l.Constancy(op.Args[2])[inner] < shape[inner] {
		return false
	}
	lin := l.Lin(ws[1], shape)
	if !sameLayouts(l, op, ws, lin) || !core.RegBitsApart(lin) {
		return false
	}
	st := chooseRuns(lin, shape, strides, inner, mask != nil)
	sb := &stagedBulk{bufElems: roundUpTo(st.runs*st.runElems, 32), runs: st.runs, runElems: st.runElems, n: st.group * shape[inner]}
	if threads := bodyThreads(l); threads >= sb.runs && (threads%sb.runs != 0 || bits.OnesCount(uint(threads/sb.runs)) != 1) ||
		threads < sb.runs && sb.runs%threads != 0 {
		return false
	}
	l.Note(fmt.Sprintf("atomic_add at %s: %d bulk reductions of %d B an iteration (%d rows a run, %d B of padding, %d shared wavefronts a warp)",
		op.Pos, sb.runs, 4*sb.n, st.group, 4*(st.runElems-sb.n), st.wavefronts(lin)))
	// Past every scratch use so far (a wgmma's operand still being read
	// among them): the buffers live across iterations.
	sb.off = roundUpTo(l.SharedBytes()-l.Scratch(), 128)
	l.UseShared(sb.off + 2*4*sb.bufElems)
	l.PinScratch(sb.off)
	fr.bulk = sb

	b := l.Block()
	k := b.NewSub(fr.iv, fr.lo)
	base := l.BaseCoords(lin)
	// The thread's first element's run and place in it (the register
	// offsets add to both without carries: their bits are apart).
	var row value.Value = core.ConstI32(0)
	for d, c := range base {
		if d != inner {
			row = b.NewAdd(row, b.NewMul(c, core.ConstI32(st.rowStride[d])))
		}
	}
	lg := int64(bits.TrailingZeros(uint(st.group)))
	baseRun := b.NewLShr(row, core.ConstI32(lg))
	baseInRow := b.NewAnd(row, core.ConstI32(int64(st.group-1)))
	var idx0 value.Value = b.NewMul(b.NewAnd(k, core.ConstI32(1)), core.ConstI32(int64(sb.bufElems)))
	idx0 = b.NewAdd(idx0, b.NewMul(baseRun, core.ConstI32(int64(st.runElems))))
	idx0 = b.NewAdd(idx0, b.NewMul(baseInRow, core.ConstI32(int64(shape[inner]))))
	idx0 = b.NewAdd(idx0, base[inner])
	regIdx := func(r int) value.Value {
		return l.Block().NewAdd(idx0, core.ConstI32(int64(st.index(lin.RegOffset(r)))))
	}
	for r, v := range vals {
		b.NewStore(v, sb.at(l, types.Float, regIdx(r)))
	}
	// The run's first element is held by the threads whose coordinates
	// along inner and in the run are 0 in a register with no offset
	// there; of copies, the first. They describe the run in its padding.
	first := b.NewAnd(b.NewICmp(enum.IPredEQ, base[inner], core.ConstI32(0)), b.NewICmp(enum.IPredEQ, baseInRow, core.ConstI32(0)))
	if own := l.CopyOwner(lin); own != nil {
		first = b.NewAnd(first, own)
	}
	desc, done := l.NewBlock("bulk.row"), l.NewBlock("bulk.staged")
	b.NewCondBr(first, desc, done)
	l.SetBlock(desc)
	b = desc
	for r := range vals {
		if st.index(lin.RegOffset(r))%st.runElems != 0 {
			continue
		}
		pad := b.NewAdd(regIdx(r), core.ConstI32(int64(sb.n)))
		b.NewStore(b.NewPtrToInt(ptrs[r], types.I64), sb.at(l, types.I64, b.NewLShr(pad, core.ConstI32(1))))
		var on value.Value = core.ConstI32(1)
		if mask != nil {
			on = b.NewZExt(mask[r], types.I32)
		}
		b.NewStore(on, sb.at(l, types.I32, b.NewAdd(pad, core.ConstI32(2))))
	}
	b.NewBr(done)
	l.SetBlock(done)
	// The bulk copies read through the async proxy.
	l.Asm(types.Void, "fence.proxy.async.shared::cta;", "~{memory}", true)
	l.SetSharedDirty(true)
	return true
}

// runStaging is how a bulk reduction's tile is staged: runs of group rows
// along the pointers' dimension of stride 1 (rows consecutive in global
// memory), each run padded, one cp.reduce.async.bulk a run.
type runStaging struct {
	inner     int
	rowLen    int     // elements of a row (the inner dimension)
	rowStride []int64 // rows a step along each other dimension adds
	group     int     // rows a run (a power of two)
	runElems  int     // f32 a run, padding included
	runs      int
}

// index is the staging offset, in f32 from the buffer's start, of
// coordinate c.
func (st *runStaging) index(c []int) int {
	row := 0
	for d, x := range c {
		if d != st.inner {
			row += x * int(st.rowStride[d])
		}
	}
	return row/st.group*st.runElems + row%st.group*st.rowLen + c[st.inner]
}

// wavefronts is the shared-memory wavefronts a warp's stores of lin's
// registers take under st: per register, the most distinct words any
// bank receives (lanes holding copies write one word).
func (st *runStaging) wavefronts(lin *core.Linear) int {
	total := 0
	for r := range lin.NumRegs() {
		reg := lin.RegOffset(r)
		words := map[int]bool{}
		perBank := map[int]int{}
		most := 0
		for lane := range 32 {
			c := lin.LaneOffset(lane)
			for d := range c {
				c[d] ^= reg[d]
			}
			w := st.index(c)
			if words[w] {
				continue
			}
			words[w] = true
			perBank[w%32]++
			most = max(most, perBank[w%32])
		}
		total += most
	}
	return total
}

// chooseRuns stages the tile in as few runs as keep its stores as cheap as
// one padded row a run (the fewest shared-memory wavefronts of any
// padding): a run may hold several rows where the rows are consecutive in
// global memory (the dimension outside the inner one has a stride of a
// row) and the tile is unmasked (a mask is per row). Rows are padded by
// bulkRowPad f32 (the row's address and flag, and 16-byte alignment)
// or more, up to a bank's sweep, where that removes conflicts.
func chooseRuns(lin *core.Linear, shape []int, strides []int64, inner int, masked bool) runStaging {
	rowStride := make([]int64, len(shape))
	rows, step, fast := 1, int64(1), -1
	for d := len(shape) - 1; d >= 0; d-- {
		if d != inner {
			if fast < 0 {
				fast = d
			}
			rowStride[d] = step
			step *= int64(shape[d])
			rows *= shape[d]
		}
	}
	maxGroup := 1
	if !masked && fast >= 0 && strides[fast] == int64(shape[inner]) {
		maxGroup = shape[fast]
	}
	best := runStaging{}
	bestCost := -1
	for g := 1; g <= maxGroup; g *= 2 {
		for pad := bulkRowPad; pad <= 32; pad += 4 {
			st := runStaging{inner: inner, rowLen: shape[inner], rowStride: rowStride, group: g,
				runElems: g*shape[inner] + pad, runs: rows / g}
			cost := st.wavefronts(lin)
			// Fewer wavefronts first, then fewer runs; padding only as
			// much as it pays.
			if bestCost < 0 || cost < bestCost || cost == bestCost && st.runs < best.runs {
				best, bestCost = st, cost
			}
		}
	}
	return best
}

// tileOrdered is an atomic_add tile whose pointers are one run-time base
// plus offsets known at compile time that number the tile's elements 0 to
// N-1 (dq_accum.fa's tiles): it is staged in that order, one bulk
// reduction for the whole tile.
type tileOrdered struct {
	base  *tir.Value // the scalar base pointer
	n     int        // elements
	delta []int      // offset of register r from the thread's register 0
	vec   int        // registers a shared store moves (1 or 4)
}

// tileOrder recognizes op's pointers as base + offsets (tileOrdered), where
// every thread's registers sit at the same offsets from its register 0's;
// nil otherwise (a mask, run-time offsets, offsets that are not a
// permutation).
func tileOrder(op *tir.Op, lin *core.Linear, masked bool) *tileOrdered {
	p := op.Args[0].Def
	if masked || p == nil || p.Kind != tir.OpAddPtr {
		return nil
	}
	splat := p.Args[0].Def
	if splat == nil || splat.Kind != tir.OpSplat || !splat.Args[0].Type.IsScalar() {
		return nil
	}
	off, ok := core.ConstTile(p.Args[1])
	if !ok {
		return nil
	}
	shape := lin.Shape()
	n := len(off)
	seen := make([]bool, n)
	for _, o := range off {
		if o < 0 || o >= int64(n) || seen[o] {
			return nil
		}
		seen[o] = true
	}
	at := func(c []int) int {
		i := 0
		for d, x := range c {
			i = i*shape[d] + x
		}
		return int(off[i])
	}
	regs := lin.NumRegs()
	to := &tileOrdered{base: splat.Args[0], n: n, delta: make([]int, regs), vec: 4}
	for w := range 1 << len(lin.WarpBases()) {
		for lane := range 32 {
			tc := lin.LaneOffset(lane)
			for i, b := range lin.WarpBases() {
				if w>>i&1 != 0 {
					for d := range tc {
						tc[d] ^= b[d]
					}
				}
			}
			first := 0
			for r := range regs {
				c := lin.RegOffset(r)
				for d := range c {
					c[d] ^= tc[d]
				}
				o := at(c)
				if r == 0 {
					first = o
				} else if w == 0 && lane == 0 {
					to.delta[r] = o - first
				} else if o-first != to.delta[r] {
					return nil
				}
				if r%4 == 0 && (o%4 != 0 || r+3 >= regs) {
					to.vec = 1
				}
			}
		}
	}
	for r := 0; r+3 < regs && to.vec == 4; r += 4 {
		for k := 1; k < 4; k++ {
			if to.delta[r+k] != to.delta[r]+k {
				to.vec = 1
			}
		}
	}
	return to
}

// stageTileOrder writes the thread's registers at their offsets into this
// iteration's buffer (16-byte stores where the registers run in fours),
// and thread 0 the tile's base address after them, for one bulk reduction
// of the whole tile.
func (bf *bulkFrames) stageTileOrder(l *core.Lowerer, fr *loopFrame, op *tir.Op, to *tileOrdered, ptrs, vals []value.Value) {
	sb := &stagedBulk{bufElems: roundUpTo(to.n+bulkRowPad, 32), runs: 1, runElems: to.n + bulkRowPad, n: to.n}
	l.Note(fmt.Sprintf("atomic_add at %s: one bulk reduction of %d B an iteration, staged in the tile's order (%d-register stores)", op.Pos, 4*to.n, to.vec))
	sb.off = roundUpTo(l.SharedBytes()-l.Scratch(), 128)
	l.UseShared(sb.off + 2*4*sb.bufElems)
	l.PinScratch(sb.off)
	fr.bulk = sb

	b := l.Block()
	base := b.NewPtrToInt(l.Scalar(to.base), types.I64)
	first := b.NewTrunc(b.NewLShr(b.NewSub(b.NewPtrToInt(ptrs[0], types.I64), base), constant.NewInt(types.I64, 2)), types.I32)
	buf := b.NewMul(b.NewAnd(b.NewSub(fr.iv, fr.lo), core.ConstI32(1)), core.ConstI32(int64(sb.bufElems)))
	idx0 := b.NewAdd(buf, first)
	for r := 0; r < len(vals); r += to.vec {
		idx := b.NewAdd(idx0, core.ConstI32(int64(to.delta[r])))
		if to.vec == 1 {
			b.NewStore(vals[r], sb.at(l, types.Float, idx))
			continue
		}
		vt := types.NewVector(uint64(to.vec), types.Float)
		var vec value.Value = constant.NewUndef(vt)
		for k := range to.vec {
			vec = b.NewInsertElement(vec, vals[r+k], core.ConstI32(int64(k)))
		}
		b.NewStore(vec, b.NewBitCast(sb.at(l, types.Float, idx), core.SharedPtr(vt))).Align = 16
	}
	desc, done := l.NewBlock("bulk.row"), l.NewBlock("bulk.staged")
	b.NewCondBr(b.NewICmp(enum.IPredEQ, l.ThreadID(), core.ConstI32(0)), desc, done)
	l.SetBlock(desc)
	pad := desc.NewAdd(buf, core.ConstI32(int64(sb.n)))
	desc.NewStore(base, sb.at(l, types.I64, desc.NewLShr(pad, core.ConstI32(1))))
	desc.NewStore(core.ConstI32(1), sb.at(l, types.I32, desc.NewAdd(pad, core.ConstI32(2))))
	desc.NewBr(done)
	l.SetBlock(done)
	l.Asm(types.Void, "fence.proxy.async.shared::cta;", "~{memory}", true)
	l.SetSharedDirty(true)
}

// sameLayouts reports that every operand of atomic_add op has layout lin:
// a thread holds a pointer, value (and mask) of the same elements.
func sameLayouts(l *core.Lowerer, op *tir.Op, ws []core.Layout, lin *core.Linear) bool {
	for i, w := range ws {
		if i < len(op.Args) && !l.Lin(w, op.Args[0].Type.Shape).Equal(lin) {
			return false
		}
	}
	return true
}

// bodyThreads is how many threads run the loop bodies that stage and issue
// the reductions: the num_warps warps (beside a producer warpgroup, its
// consumers).
func bodyThreads(l *core.Lowerer) int { return l.NumWarps() * 32 }
