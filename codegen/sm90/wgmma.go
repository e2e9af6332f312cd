package sm90

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// wgmma.mma_async (sm_90a): 16-bit dots with f32 accumulation on the
// warpgroup tensor-core instructions m64nNk16.
//
// The accumulator is MMA version 3 (core.MMA's doc): a warpgroup of 4
// warps per 64 rows, every warp along M where M has a 64-row block for
// each warpgroup, else warpgroups also along N, each issuing the
// instructions of its own contiguous columns (its B descriptor offset by
// its N block). B is always read from shared memory through a matrix
// descriptor: a tile staged by cp.async straight into the swizzled layout
// (tile.go), or a tensor in registers written there by the dot. A is read
// from registers in the m16n8k16 A fragment layout (RS form: P in
// attention, and Q, converted once by ldmatrix; copied in each warpgroup
// along N), or from shared memory when its load is staged (SS form).
//
// Per dot: the copies' wait, fence.proxy.async (generic-proxy writes
// before async-proxy reads) and a barrier, unless an earlier dot already
// waited for them (core.AwaitStaged); wgmma.fence; the wgmmas (k
// steps outermost, the zero accumulator of the first step dropped with
// scale-d = 0); commit_group. The wait (wait_group N) is the core's
// (core.DeferWait): where the result is first read, leaving later groups in
// flight. The accumulators are tied in/out operands of every wgmma and of
// the wait (and the A registers go through an empty asm before the fence),
// so LLVM neither reads them before the wait nor computes inputs between
// the fence and the wgmma.

// tilePlan is a staged tile's plan on the wgmma path (core.Staged.Plan):
// its swizzled tile, which each use views directly or transposed.
type tilePlan struct {
	tile tile
	tma  *tmaLoad // copied by TMA (tma-loads), or nil: cp.async
	// narrow: a 128-byte swizzle narrowed only for a dot's n_extent
	// (maxSwizzle), which TMA copies in narrower boxes; other tiles below
	// 128 bytes keep cp.async.
	narrow bool
}

// wgmmaLayout reports whether dot op runs on wgmma, and its accumulator
// layout: sm_90a (unless wgmma=off), 16-bit operands, f32 accumulator,
// warps in whole warpgroups, N a multiple of 8 and K of 16, and 64-row
// blocks of M for each warpgroup (all warps along M) or, where M is too
// short for that, warpgroups split along N (splitLayout).
func (t *Target) wgmmaLayout(l *core.Lowerer, op *tir.Op) (core.MMA, bool) {
	if !t.WGMMA {
		return core.MMA{}, false
	}
	x, y, c := op.Args[0].Type, op.Args[1].Type, op.Args[2].Type
	if x.Rank() != 2 || y.Rank() != 2 || c.Rank() != 2 {
		return core.MMA{}, false
	}
	M, K, N := x.Shape[0], x.Shape[1], y.Shape[1]
	nw := l.NumWarps()
	ok := (x.Elem == tir.BF16 || x.Elem == tir.F16) && y.Elem == x.Elem && c.Elem == tir.F32 &&
		nw%4 == 0 && N%8 == 0 && K%16 == 0
	if !ok {
		return core.MMA{}, false
	}
	if M%(16*nw) == 0 {
		return core.MMA{WarpsPerCTA: [2]int{nw, 1}, Version: 3}, true
	}
	return splitLayout(M, N, nw/4)
}

// splitLayout is the accumulator layout of an M x N dot on nWG
// warpgroups whose M does not give each a 64-row block (FlashAttention-3's
// split of such GEMMs): a warpgroups along M, the most that 64-row blocks
// allow, and the other b = nWG/a along N, each issuing m64n(N/b)k16 on its
// own contiguous columns.
func splitLayout(M, N, nWG int) (core.MMA, bool) {
	if M%64 != 0 || nWG&(nWG-1) != 0 {
		return core.MMA{}, false
	}
	a := nWG
	for M%(64*a) != 0 {
		a /= 2
	}
	b := nWG / a
	if N%(8*b) != 0 {
		return core.MMA{}, false
	}
	return core.MMA{WarpsPerCTA: [2]int{4 * a, b}, Version: 3}, true
}

// wgmmaShape is how dot op's accumulator (layout m) splits among the
// warpgroups: a warpgroups along M, b along N; each holds nM blocks of 64
// rows of nN columns, issued as instructions of nc columns.
type wgmmaShape struct{ a, b, nM, nN, nc int }

// newWGMMAShape is the split of dot op on accumulator layout m.
func newWGMMAShape(op *tir.Op, m core.MMA) wgmmaShape {
	M, N := op.Args[0].Type.Shape[0], op.Args[1].Type.Shape[1]
	a, b := m.WarpsPerCTA[0]/4, m.WarpsPerCTA[1]
	nN := N / b
	return wgmmaShape{a: a, b: b, nM: M / (64 * a), nN: nN, nc: min(nN, 256)}
}

// widths are the columns each of a warpgroup's instructions j (of nc
// columns, at j·nc in its N block) issues: nc, or for a dot with
// n_extent up to the last 8 columns holding one before it in any
// warpgroup's block (they all issue the same instructions), 0 when none
// does (the instruction is skipped; its registers keep the accumulator's).
func (sh wgmmaShape) widths(op *tir.Op) []int {
	ws := make([]int, sh.nN/sh.nc)
	e, ok := op.Attr("n_extent").(int64)
	for j := range ws {
		if !ok {
			ws[j] = sh.nc
			continue
		}
		for nb := 0; nb < sh.b; nb++ {
			ws[j] = max(ws[j], min(sh.nc, (int(e)-nb*sh.nN-j*sh.nc+7)/8*8))
		}
	}
	return ws
}

// stagedOperand is the staged load feeding operand i of dot op (the
// operand itself or its trans), and that use, or nil.
func stagedOperand(l *core.Lowerer, op *tir.Op, i int) (*core.Staged, core.StagedUse) {
	y := op.Args[i]
	if d := y.Def; d != nil && d.Kind == tir.OpTrans {
		y = d.Args[0]
	}
	if y.Def == nil || y.Def.Kind != tir.OpLoad {
		return nil, core.StagedUse{}
	}
	st := l.Plan().StagedLoad(y.Def)
	if st == nil {
		return nil, core.StagedUse{}
	}
	u, ok := st.UseBy(op, i)
	if !ok {
		return nil, core.StagedUse{}
	}
	return st, u
}

// stagedView is the operand view of a staged load's tile for one of its
// uses: the tile keeps the load's shape with its last dim contiguous (the
// planned tile, once planTile has chosen its swizzle); the operand sees it
// directly or transposed.
func stagedView(st *core.Staged, u core.StagedUse) (view, bool) {
	var tl tile
	if p, ok := st.Plan.(*tilePlan); ok {
		tl = p.tile
	} else {
		s := st.Load.Result().Type.Shape
		var ok bool
		if tl, ok = newTile(s[0], s[1]); !ok {
			return view{}, false
		}
	}
	return view{tl, useContiguous(st, u) == kDim(u.Operand)}, true
}

// useContiguous is the operand dim of use u that is contiguous in st's
// tile: the load's last dim, which a trans moves to dim 0.
func useContiguous(st *core.Staged, u core.StagedUse) int {
	if u.View != st.Load.Result() {
		return 0
	}
	return 1
}

// kDim is the K dim of operand i: A is [M, K], B is [K, N].
func kDim(i int) int {
	if i == 0 {
		return 1
	}
	return 0
}

// wgmmaOperandLayout is the layout a wgmma dot wants operand i in: B its
// own (it is staged, or written to shared memory by the dot from
// whatever layout it has); A its own when staged (SS), else the A
// fragment (RS).
func wgmmaOperandLayout(l *core.Lowerer, op *tir.Op, m core.MMA, i int) core.Layout {
	x := op.Args[i]
	own := func() core.Layout {
		lay, flex := l.Layouts().LayoutOf(x)
		if flex {
			return core.DefaultBlocked(x.Type.Shape, l.NumWarps())
		}
		return lay
	}
	if i == 1 {
		return own()
	}
	if st, u := stagedOperand(l, op, 0); st != nil {
		if _, ok := stagedView(st, u); ok {
			return own()
		}
	}
	return core.DotOperand{OpIdx: 0, Parent: m}
}

// planTile plans a staged tile of a wgmma dot, with the widest swizzle
// every use can read (maxSwizzle), or false (then it is loaded into
// registers and the dot writes it to shared memory).
func (t *Target) planTile(l *core.Lowerer, st *core.Staged) (int, bool) {
	w, wFull := 128, 128
	for _, u := range st.Uses() {
		ext, full := t.swizzleCaps(l, u.Dot, u.Operand, useContiguous(st, u))
		w, wFull = min(w, ext), min(wFull, full)
	}
	s := st.Load.Result().Type.Shape
	tl, ok := newTileMax(s[0], s[1], w)
	if !ok {
		return 0, false
	}
	full, _ := newTileMax(s[0], s[1], wFull)
	st.Plan = &tilePlan{tile: tl, narrow: tl.w < 128 && full.w == 128}
	return roundUp(tl.bytes(), tileAlign), true
}

// maxSwizzle is the widest swizzle (bytes) of a tile that operand i of dot
// op reads with its dim cd contiguous: an MN-major B's instructions start
// at multiples of nc columns, each on a panel of W/2 columns (mnAligned),
// and read whole panels, so the panel divides the widths of those
// narrowed to n_extent too (96: 32-column panels, 80: 16), where a panel
// of at least 16 columns does (else they issue full width); K-major
// tiles, and A's 64-row blocks, read any.
func (t *Target) maxSwizzle(l *core.Lowerer, op *tir.Op, i, cd int) int {
	w, _ := t.swizzleCaps(l, op, i, cd)
	return w
}

// swizzleCaps is maxSwizzle, and what it would be without n_extent.
func (t *Target) swizzleCaps(l *core.Lowerer, op *tir.Op, i, cd int) (ext, full int) {
	m, ok := t.wgmmaLayout(l, op)
	if !ok || i != 1 || cd == kDim(i) {
		return 128, 128
	}
	sh := newWGMMAShape(op, m)
	full = min(128, 2*sh.nc)
	p := full / 2
	for _, n := range sh.widths(op) {
		for n > 0 && n%p != 0 {
			p /= 2
		}
	}
	if p < 16 {
		return full, full
	}
	return 2 * p, full
}

func roundUp(n, a int) int { return (n + a - 1) / a * a }

// registerView picks the tile for operand i of shape held in layout x:
// the dim x's first register steps along is contiguous when the tile
// allows it (so stores are vectors; a swizzle at most mnMax bytes wide
// when that dim is not K, maxSwizzle), else K.
func registerView(x *core.Linear, shape []int, i, mnMax int) (view, int) {
	cd := -1
	if reg := x.RegBases(); len(reg) > 0 {
		for d, c := range reg[0] {
			if c != 0 {
				cd = d
			}
		}
	}
	if cd >= 0 {
		w := 128
		if cd != kDim(i) {
			w = mnMax
		}
		if tl, ok := newTileMax(shape[1-cd], shape[cd], w); ok {
			return view{tl, cd == kDim(i)}, cd
		}
	}
	cd = kDim(i)
	tl, ok := newTile(shape[1-cd], shape[cd])
	if !ok {
		core.Fail("internal error: wgmma operand %d of shape %v has no shared-memory tile", i, shape)
	}
	return view{tl, true}, cd
}

// tileBase is offset(base coordinates of x) for the tile with contiguous
// operand dim cd (entry block, cached).
func (t *Target) tileBase(l *core.Lowerer, x *core.Linear, tl tile, cd int) value.Value {
	key := fmt.Sprint(x.Shape(), x.RegBases(), x.LaneBases(), x.WarpBases(), tl, cd)
	if v, ok := t.bases[key]; ok {
		return v
	}
	bc := l.BaseCoords(x)
	v := tl.runtimeOffset(l, bc[1-cd], bc[cd])
	if t.bases == nil {
		t.bases = map[string]value.Value{}
	}
	t.bases[key] = v
	return v
}

// rowCol maps operand coordinates to tile (row, col) for contiguous dim cd.
func rowCol(c []int, cd int) (int, int) { return c[1-cd], c[cd] }

// lowerTileLoad issues the cp.async copies of a staged load into its
// swizzled tile (one 16-byte chunk per 8 registers; a chunk stays
// contiguous under the swizzle), or on misaligned global addresses
// scalar loads and stores into the same places; one commit group.
func (t *Target) lowerTileLoad(l *core.Lowerer, op *tir.Op, st *core.Staged, p *tilePlan) {
	lay, _ := l.Layouts().LayoutOf(op.Result())
	ws := l.Layouts().OperandWants(op, lay)
	ty := op.Result().Type
	e := ty.Elem
	ptrs := l.Get(op.Args[0], ws[0])
	var mask []value.Value
	if len(op.Args) == 3 {
		mask = l.Get(op.Args[1], ws[1])
	}
	mask = l.StagedMasks(st, mask, len(ptrs))
	x := l.Lin(lay, ty.Shape)
	if reg := x.RegBases(); len(reg) < 3 || !core.EqualBases(reg[:3], [][]int{{0, 1}, {0, 2}, {0, 4}}) {
		core.Fail("internal error: staged load layout %s has no 8-element chunks", lay)
	}
	tl := p.tile
	base := t.tileBase(l, x, tl, 1)
	l.CopyStaged(ptrs, mask, e, func(r int) value.Value {
		return l.StagedAddr(types.I8, st, xorOff(l, base, tl.offset(rowCol(x.RegOffset(r), 1))))
	})
}

// storeTile writes a 16-bit tensor in registers (layout x) into the tile at
// byte byteOff, cd being the operand dim that is contiguous there; runs
// of registers consecutive along cd (up to one 16-byte chunk) are stored
// as vectors.
func (t *Target) storeTile(l *core.Lowerer, src []value.Value, x *core.Linear, tl tile, cd, byteOff int) {
	v := runAlong(x, cd, 8)
	base := t.tileBase(l, x, tl, cd)
	b := l.Block()
	for r := 0; r < len(src); r += v {
		a := l.SharedAbs(types.I8, byteOff, xorOff(l, base, tl.offset(rowCol(x.RegOffset(r), cd))))
		if v == 1 {
			b.NewStore(src[r], b.NewBitCast(a, core.SharedPtr(types.I16)))
			continue
		}
		// Pairs packed into i32 (one cvt.rn.*x2 each where they are
		// roundings: the backward's dS).
		var vec value.Value
		vt := types.Type(types.I32)
		if v == 2 {
			vec = l.PackHalves(src[r], src[r+1])
		} else {
			vt = types.NewVector(uint64(v/2), types.I32)
			vec = undefOf(vt)
			for i := 0; i < v/2; i++ {
				vec = b.NewInsertElement(vec, l.PackHalves(src[r+2*i], src[r+2*i+1]), core.ConstI32(int64(i)))
			}
		}
		b.NewStore(vec, b.NewBitCast(a, core.SharedPtr(vt))).Align = alignOf(2 * v)
	}
}

// wgmmaDot lowers a dot on wgmma (see the top of this file).
func (t *Target) wgmmaDot(l *core.Lowerer, op *tir.Op, m core.MMA, ws []core.Layout) []value.Value {
	at, bt := op.Args[0].Type, op.Args[1].Type
	M, K, N := at.Shape[0], at.Shape[1], bt.Shape[1]
	sh := newWGMMAShape(op, m)
	if 4*sh.a*sh.b != l.NumWarps() || sh.nM*64*sh.a != M || sh.nN*sh.b != N || sh.nN%8 != 0 {
		core.Fail("internal error: wgmma %dx%dx%d on %d warps with accumulator %s", M, N, K, l.NumWarps(), m)
	}
	nM, nK, nc := sh.nM, K/16, sh.nc // per warpgroup: M blocks, k steps, N per instruction
	ab := "bf16"
	if at.Elem == tir.F16 {
		ab = "f16"
	}

	// Shared-memory operands: staged tiles (their copies in flight), or
	// tensors in registers written to the scratch area here.
	type smemOperand struct {
		v   view
		off int         // from the start of shared memory
		dyn value.Value // + this many bytes (the buffer in use of a pipelined tile), or nil
	}
	var ops [2]*smemOperand
	var staged []*core.Staged
	type write struct {
		i   int
		src []value.Value
		x   *core.Linear
		cd  int
	}
	var writes []write
	used := 0
	for i := 0; i < 2; i++ {
		x := op.Args[i]
		if _, ok := ws[i].(core.DotOperand); ok {
			continue
		}
		if st := l.StagedTile(x); st != nil {
			u, used := st.UseBy(op, i)
			v, ok := stagedView(st, u)
			if _, planned := st.Plan.(*tilePlan); !planned || !used || !ok {
				core.Fail("internal error: wgmma operand %d staged without a tile plan", i)
			}
			ops[i] = &smemOperand{v, st.ByteOff, st.StagedDyn()}
			staged = append(staged, st)
			continue
		}
		lin := l.Lin(ws[i], x.Type.Shape)
		v, cd := registerView(lin, x.Type.Shape, i, t.maxSwizzle(l, op, i, 1-kDim(i)))
		start := roundUp(l.Scratch()+used, tileAlign)
		ops[i] = &smemOperand{v, start, nil}
		used = start + v.bytes() - l.Scratch()
		writes = append(writes, write{i, l.Get(x, ws[i]), lin, cd})
		l.CountConversion()
	}
	if len(writes) > 0 {
		l.UseShared(used)
		// Earlier users of the scratch area must be done: a generic read
		// since the last barrier, or a wgmma that read it (the backward's
		// dQᵀ = Kᵀ·dS then needs one barrier per iteration, not two).
		if !l.SharedClean() || t.scratchRead && t.scratchBar == l.Barriers() {
			l.Barrier()
		}
		for _, w := range writes {
			t.storeTile(l, w.src, w.x, ops[w.i].v.tile, w.cd, ops[w.i].off)
		}
	}
	if l.AwaitStaged(op, staged) || len(writes) > 0 {
		// The tiles were written through the generic proxy (cp.async,
		// st.shared); wgmma reads through the async proxy.
		l.Asm(types.Void, "fence.proxy.async.shared::cta;", "~{memory}", true)
		l.Barrier()
	}

	// Register operands: A (RS form) and the accumulator.
	var aRegs []value.Value
	if ops[0] == nil {
		a := l.Get(op.Args[0], ws[0])
		if len(a) != 8*nK*nM {
			core.Fail("internal error: wgmma A operand has %d registers", len(a))
		}
		aRegs = make([]value.Value, len(a)/2)
		for i := range aRegs {
			aRegs[i] = l.PackHalves(a[2*i], a[2*i+1])
		}
		aRegs = pin(l, aRegs, types.I32, "r")
	}
	zero := core.IsZeroConst(op.Args[2])
	acc := make([]value.Value, nM*sh.nN/2)
	if !zero {
		c := l.Get(op.Args[2], ws[2])
		if len(c) != len(acc) {
			core.Fail("internal error: wgmma accumulator has %d registers for %dx%d %s", len(c), M, N, m)
		}
		acc = pin(l, c, types.Float, "f")
	}

	pp := t.pingpong(l)
	var wg value.Value
	if pp {
		wg = l.Block().NewLShr(l.WarpID(), core.ConstI32(2))
	}
	if pp && !t.isWGMMA(l, l.Neighbor(-1)) {
		// Wait for this warpgroup's turn to issue (named barrier 1 + g,
		// which the other warpgroup arrives at after its own issue).
		l.Asm(types.Void, "bar.sync $0, 256;", "r,~{memory}", true, l.Block().NewAdd(wg, core.ConstI32(1)))
	}
	l.Asm(types.Void, "wgmma.fence.sync.aligned;", "~{memory}", true)
	vb := ops[1].v
	for nb := 0; nb < sh.b; nb++ {
		for j := 0; j < sh.nN/nc; j++ {
			if c := nb*sh.nN + j*nc; !vb.mnAligned(c) {
				core.Fail("internal error: wgmma B tile %s cannot start an instruction at column %d", vb.tile, c)
			}
		}
	}
	descB := descValue(l, vb, ops[1].off, ops[1].dyn)
	if sh.b > 1 {
		// Warpgroup g multiplies the columns of its N block g/a.
		b := l.Block()
		nb := b.NewZExt(b.NewLShr(l.WarpID(), core.ConstI32(int64(2+log2(sh.a)))), types.I64)
		descB = b.NewAdd(descB, b.NewMul(nb, ci64(int64(vb.mnOff(sh.nN)>>4))))
	}
	var descA value.Value
	if ops[0] != nil {
		descA = descAOf(l, ops[0].v, ops[0].off, ops[0].dyn, sh)
	}
	// Instructions narrowed to n_extent (widths); an MN-major B tile whose
	// panel does not divide a width (another use capped its swizzle
	// otherwise) issues that one full width.
	widths := sh.widths(op)
	for j, w := range widths {
		if w > 0 && !vb.kMajor && w%(vb.w/2) != 0 {
			widths[j] = nc
		}
	}
	for kk := 0; kk < core.KSteps(op); kk++ {
		for i := 0; i < nM; i++ {
			for j, n := range widths {
				if n == 0 {
					continue
				}
				first := i*sh.nN/2 + j*nc/2
				// m64nNk16's registers for N < nc are the first N/2 of nc's.
				w := wgmmaOp{n: n, ab: ab, d: acc[first : first+n/2], accumulate: kk > 0 || !zero, transB: vb.trans()}
				w.descB = addDesc(l, descB, vb.kOff(kk)+vb.mnOff(j*nc))
				if aRegs != nil {
					w.a = aRegs[4*(i*nK+kk) : 4*(i*nK+kk)+4]
				} else {
					va := ops[0].v
					w.descA = addDesc(l, descA, va.kOff(kk)+va.mnOff(i*64*sh.a))
					w.transA = va.trans()
				}
				copy(acc[first:], w.emit(l))
			}
		}
	}
	for r, v := range acc {
		if v == nil {
			// Columns past n_extent of a zero accumulator.
			acc[r] = constant.NewFloat(types.Float, 0)
		}
	}
	l.Asm(types.Void, "wgmma.commit_group.sync.aligned;", "~{memory}", true)
	if len(writes) > 0 {
		t.scratchRead, t.scratchBar = true, l.Barriers()
	}
	if pp && !t.isWGMMA(l, l.Neighbor(1)) {
		// The other warpgroup's turn: barrier 2 - g.
		l.Asm(types.Void, "bar.arrive $0, 256;", "r,~{memory}", true, l.Block().NewSub(core.ConstI32(2), wg))
	}
	// The wait goes where the accumulators are first read (core.DeferWait).
	l.DeferWait(op.Result(), func(inFlight int, regs []value.Value) []value.Value {
		text := fmt.Sprintf("wgmma.wait_group.sync.aligned %d;", inFlight)
		if len(regs) == 0 {
			l.Asm(types.Void, text, "~{memory}", true)
			return nil
		}
		if aRegs != nil {
			// Keep ptxas from reusing the in-flight A registers (and so
			// hoisting this wait) above the work that should overlap it.
			l.SchedulingFence()
		}
		return tied(l, text, regs, types.Float, "f")
	})
	return acc
}

// descAOf is the SS form's A descriptor of warpgroup g for the tile at
// byte tileOff (+ dyn): rows 64(g%a).. of each M block (none to add when
// one warpgroup is along M with others along N).
func descAOf(l *core.Lowerer, va view, tileOff int, dyn value.Value, sh wgmmaShape) value.Value {
	if sh.a == 1 && sh.b > 1 {
		return descValue(l, va, tileOff, dyn)
	}
	b := l.Block()
	var g value.Value = b.NewLShr(l.WarpID(), core.ConstI32(2))
	if sh.b > 1 {
		g = b.NewAnd(g, core.ConstI32(int64(sh.a-1)))
	}
	g = b.NewZExt(g, types.I64)
	return b.NewAdd(descValue(l, va, tileOff, dyn), b.NewMul(g, ci64(int64(va.mnOff(64)>>4))))
}

// isWGMMA reports whether op is a dot lowered to wgmma.
func (t *Target) isWGMMA(l *core.Lowerer, op *tir.Op) bool {
	if op == nil || op.Kind != tir.OpDot {
		return false
	}
	_, ok := t.wgmmaLayout(l, op)
	return ok
}

// pingpong reports whether the kernel's wgmma dots run in pingpong (its
// compile-time argument pingpong = true, on exactly two warpgroups): the
// two warpgroups issue their GEMMs in turn, ordered by named barriers 1
// and 2, so that one warpgroup's GEMMs run on the tensor cores while the
// other computes its softmax (FlashAttention-3's pingpong schedule). The
// first turn is warpgroup 0's: warpgroup 1 arrives at barrier 1 on entry.
// A turn is a run of wgmma dots adjacent in their block (with
// overlap-softmax, Q·Kᵀ of one kv block and P·V of the one before: the
// softmax of one warpgroup then runs under both GEMMs of the other, as in
// FlashAttention-3), so both warpgroups must run the same sequence of turns
// (uniform control flow, as the attention kernels have).
func (t *Target) pingpong(l *core.Lowerer) bool {
	on, _ := l.Func().Attr("pingpong").(bool)
	if !on || l.NumWarps() != 8 {
		return false
	}
	if !t.ppEntry {
		t.ppEntry = true
		l.AtEntry(func() {
			l.Asm(types.Void, "{\n.reg .pred p;\nsetp.eq.u32 p, $0, 1;\n@p bar.arrive 1, 256;\n}",
				"r,~{memory}", true, l.Block().NewLShr(l.WarpID(), core.ConstI32(2)))
		})
	}
	return true
}

// wgmmaOp is one wgmma.mma_async m64nNk16 with f32 accumulators.
type wgmmaOp struct {
	n            int    // N
	ab           string // bf16 or f16
	d            []value.Value
	accumulate   bool          // scale-d: D = A·B + D, else D = A·B (d unused)
	a            []value.Value // RS: 4 packed i32 registers of A
	descA, descB value.Value
	transA       int // SS only
	transB       int
}

// emit emits the instruction as inline asm: the accumulators are outputs
// tied to their inputs (when accumulating), scale-d goes through a
// predicate.
func (w wgmmaOp) emit(l *core.Lowerer) []value.Value {
	r := w.n / 2
	cons := make([]string, 0, 2*r+7)
	var args []value.Value
	regs := make([]string, r)
	for i := range regs {
		regs[i] = "$" + strconv.Itoa(i)
		cons = append(cons, "=f")
	}
	if w.accumulate {
		for i := 0; i < r; i++ {
			cons = append(cons, strconv.Itoa(i))
			args = append(args, w.d[i])
		}
	}
	next := func(c string, v value.Value) string {
		s := "$" + strconv.Itoa(r+len(args))
		cons = append(cons, c)
		args = append(args, v)
		return s
	}
	var aRef, trans string
	if w.a != nil {
		refs := make([]string, 4)
		for i := range refs {
			refs[i] = next("r", w.a[i])
		}
		aRef = "{" + strings.Join(refs, ", ") + "}"
		trans = strconv.Itoa(w.transB)
	} else {
		aRef = next("l", w.descA)
		trans = strconv.Itoa(w.transA) + ", " + strconv.Itoa(w.transB)
	}
	bRef := next("l", w.descB)
	scale := int64(0)
	if w.accumulate {
		scale = 1
	}
	sRef := next("r", core.ConstI32(scale))
	cons = append(cons, "~{memory}")
	text := fmt.Sprintf("{\n.reg .pred p;\nsetp.ne.b32 p, %s, 0;\nwgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {%s}, %s, %s, p, 1, 1, %s;\n}",
		sRef, w.n, w.ab, w.ab, strings.Join(regs, ", "), aRef, bRef, trans)
	return unpack(l, l.Asm(structOf(types.Float, r), text, strings.Join(cons, ","), true, args...), r)
}

// tied emits asm text with regs as outputs tied to themselves (constraint
// c, type ty) and returns the outputs: nothing computed from them can move
// above it.
func tied(l *core.Lowerer, text string, regs []value.Value, ty types.Type, c string) []value.Value {
	n := len(regs)
	cons := make([]string, 0, 2*n+1)
	for i := 0; i < n; i++ {
		cons = append(cons, "="+c)
	}
	for i := 0; i < n; i++ {
		cons = append(cons, strconv.Itoa(i))
	}
	cons = append(cons, "~{memory}")
	return unpack(l, l.Asm(structOf(ty, n), text, strings.Join(cons, ","), true, regs...), n)
}

// pin passes regs through an empty asm: they are computed before it (and
// so before a following wgmma.fence).
func pin(l *core.Lowerer, regs []value.Value, ty types.Type, c string) []value.Value {
	return tied(l, "", regs, ty, c)
}

func structOf(t types.Type, n int) types.Type {
	if n == 1 {
		return t
	}
	fs := make([]types.Type, n)
	for i := range fs {
		fs[i] = t
	}
	return types.NewStruct(fs...)
}

func unpack(l *core.Lowerer, v value.Value, n int) []value.Value {
	if n == 1 {
		return []value.Value{v}
	}
	out := make([]value.Value, n)
	for i := range out {
		out[i] = l.Block().NewExtractValue(v, uint64(i))
	}
	return out
}

func undefOf(t types.Type) value.Value { return constant.NewUndef(t) }

func alignOf(n int) ir.Align { return ir.Align(n) }
