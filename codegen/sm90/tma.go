package sm90

import (
	"fmt"
	"slices"
	"strings"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// TMA staging (cp.async.bulk.tensor): a staged wgmma tile whose pointer
// tensor is an affine tile of a kernel tensor — a kernel pointer plus
// scalar coordinates times i32 stride parameters, plus a row vector
// start + arange(R) times a stride parameter, plus the contiguous columns
// arange(C) — is copied by one thread through a tensor map (a
// grid-constant kernel parameter the runtime encodes, artifact.TMA), in
// boxes of one panel each (64 columns at TMA's SWIZZLE_128B, 32 at 64B, 16
// at 32B), which TMA writes in exactly the panel layout of tile.go. The copy completes on an mbarrier per buffer; every
// thread waits on the buffer's phase parity (core.Staged.Parity) instead
// of a cp.async group, and a pipelined loop's buffers go back through
// release counters, the last warpgroup to release one refilling it
// (ReleaseBuffer), with no CTA barrier per iteration. Masks are the tensor map's bounds: the load's mask
// may only be `rows < bound` for an i32 parameter bound (elements past it
// read as zero, as the load's other = 0 says).
//
// The loads qualify when every thread waits on each fill of their buffers
// exactly once: a pipelined loop's loads whose dots are in the loop's body
// (not in a branch), and loads outside every loop (resident Q, K, V). Everything else keeps cp.async, and -v says
// why (Result.Notes).

// TMA loads: the inline asm forms (the simulator knows the same strings).
const (
	asmMbarInit     = "mbarrier.init.shared::cta.b64 [$0], %d;" // arrivals per phase
	asmMbarInitDone = "fence.mbarrier_init.release.cluster;"
	// $0: a tensor map's generic address (i64): its descriptor fetched
	// into the cache before the first copy needs it.
	asmPrefetchTensorMap = "prefetch.tensormap [$0];"
	asmExpectTx          = "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;"
	// A release counter: zeroed, then counted up modulo the warpgroups;
	// the thread that wraps it around frees the buffer last.
	asmCounterInit = "st.shared.u32 [$0], 0;"
	asmRelease     = "atom.acq_rel.cta.shared::cta.inc.u32 $0, [$1], $2;"
	asmMbarWait    = "{\n.reg .pred P1;\nLAB_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P1, [$0], $1;\n@!P1 bra LAB_WAIT;\n}"
)

// asmTMA is the tensor copy of an n-dim box: [$0] destination, [$1, {$2
// .. $n+1}] tensor map and coordinates, [$n+2] mbarrier.
func asmTMA(n int) (text, constraints string) {
	text = fmt.Sprintf("cp.async.bulk.tensor.%dd.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {%s}], [$%d];",
		n, asmOperands(2, n), n+2)
	return text, "r,l" + strings.Repeat(",r", n+1) + ",~{memory}"
}

// asmOperands lists n inline-asm operands from $from: "$2, $3, …".
func asmOperands(from, n int) string {
	cs := make([]string, n)
	for i := range cs {
		cs[i] = fmt.Sprintf("$%d", from+i)
	}
	return strings.Join(cs, ", ")
}

// tmaLoad is the TMA plan of one staged tile.
type tmaLoad struct {
	param    int          // its tensor-map parameter (core.Lowerer.TensorMapParam)
	coords   []*tir.Value // coordinates of dims 1.. (nil: 0)
	panels   int          // boxes (one panel each) per tile
	bars     int          // byte offset of its first full mbarrier (one per buffer, 8 bytes each)
	counters int          // byte offset of its loop's release counters (one per buffer, 8 bytes each), or -1
	// again: a tile filled once per iteration of a loop (a resident tile
	// in the loop around the pipelined one, a tail there), whose waits
	// take the parity of its fills so far (waits, a variable of each
	// thread; refills, the producer's of its empty waits).
	again          bool
	empty          int // byte offset of its empty mbarrier (a resident tile beside a producer), or -1
	waits, refills *ir.InstAlloca
	tensor         string   // the kernel tensor it copies from
	riders         []*rider // vectors copied with each fill (riders.go)
}

// TMALoads is the phase that moves eligible staged tiles to TMA.
var TMALoads = core.Phase{
	Name: "tma-loads",
	Doc:  "copy staged wgmma tiles that are affine tiles of a kernel tensor by TMA (one thread, a tensor map, an mbarrier per buffer)",
	Run: func(l *core.Lowerer) error {
		t, ok := l.Target().(*Target)
		if !ok || !t.WGMMA || !t.TMA {
			return nil
		}
		t.planTMA(l)
		return nil
	},
}

// planTMA finds the staged tiles TMA can copy and gives each a tensor-map
// parameter and its mbarriers.
func (t *Target) planTMA(l *core.Lowerer) {
	loops := map[*tir.Op]int{} // op -> enclosing loops
	parent := map[*tir.Op]*tir.Block{}
	var walk func(b *tir.Block, depth int)
	walk = func(b *tir.Block, depth int) {
		for _, op := range b.Ops {
			loops[op] = depth
			parent[op] = b
			d := depth
			if op.Kind == tir.OpFor {
				d++
			}
			for _, r := range op.Regions {
				walk(r, d)
			}
		}
	}
	walk(l.Func().Body, 0)
	var loads []*tmaLoad
	counters := map[*tir.Op]int{} // pipelined loop -> its release counters
	l.Func().Body.Walk(func(op *tir.Op) bool {
		st := l.Plan().StagedLoad(op)
		if st == nil {
			return true
		}
		p, ok := st.Plan.(*tilePlan)
		if !ok {
			return true
		}
		if p.tile.w != 128 && !p.narrow {
			t.note(l, op, fmt.Sprintf("cp.async: its %d-byte swizzle (TMA copies 128-byte ones, or those narrowed for n_extent)", p.tile.w))
			return true
		}
		if loop := st.PipeLoop(); loop != nil {
			body := loop.Regions[0]
			for _, u := range st.Uses() {
				if parent[u.Dot] != body {
					t.note(l, op, "cp.async: a dot reading it is in a branch")
					return true
				}
			}
		} else if loops[op] > 1 || loops[op] == 1 && !st.Resident && !st.Tail() {
			t.note(l, op, "cp.async: in a loop that does not pipeline it")
			return true
		}
		spec, coords, why := matchTMA(l, op, p.tile)
		if spec == nil {
			t.note(l, op, "cp.async: "+why)
			return true
		}
		tl := &tmaLoad{coords: coords, panels: p.tile.cols / (p.tile.w / 2), bars: 8 * len(t.tmaBars), counters: -1, empty: -1, again: loops[op] == 1 && st.PipeLoop() == nil, tensor: spec.Tensor}
		tl.param = l.Plan().AddTensorMapParam("tma."+spec.Tensor, op.Result().Type.Elem, spec)
		if !slices.Contains(t.tmaMaps, tl.param) {
			t.tmaMaps = append(t.tmaMaps, tl.param)
		}
		p.tma = tl
		// Full barriers (one arrival: the fill's expect_tx); a pipelined
		// loop's tiles share one release counter per buffer
		// (ReleaseBuffer), made with its first tile.
		for i := 0; i < st.Stages(); i++ {
			// A consumer group's own tile: the producer fills every
			// group's copy, each with its expect_tx.
			n := 1
			if t.IsGroupPrivate(st.ByteOff) {
				n = t.Groups()
			}
			t.tmaBars = append(t.tmaBars, n)
		}
		if loop := st.PipeLoop(); loop != nil {
			c, ok := counters[loop]
			if !ok {
				c = 8 * len(t.tmaBars)
				counters[loop] = c
				for i := 0; i < st.Stages(); i++ {
					t.tmaBars = append(t.tmaBars, 0)
				}
			}
			tl.counters = c
		}
		if tl.again && st.Resident {
			tl.empty = 8 * len(t.tmaBars)
			t.tmaBars = append(t.tmaBars, 0) // an empty mbarrier beside a producer
		}
		loads = append(loads, tl)
		return true
	})
	if len(t.tmaBars) > 0 {
		// All mbarriers in one place after the tiles.
		t.tmaBase = l.Plan().ReserveShared(8 * len(t.tmaBars))
		for _, tl := range loads {
			tl.bars += t.tmaBase
			if tl.counters >= 0 {
				tl.counters += t.tmaBase
			}
			if tl.empty >= 0 {
				tl.empty += t.tmaBase
			}
		}
	}
}

// note records why a staged tile is not on TMA (fac compile -v prints the
// notes).
func (t *Target) note(l *core.Lowerer, op *tir.Op, s string) {
	l.Note(fmt.Sprintf("load at %s: %s", op.Pos, s))
}

// matchTMA matches load op's pointer tensor and mask against the affine
// form TMA describes (see the top of this file); it returns the tensor
// map spec and the coordinates of dims 1.., or why not.
func matchTMA(l *core.Lowerer, op *tir.Op, tl tile) (*artifact.TMA, []*tir.Value, string) {
	e := op.Result().Type.Elem
	if e != tir.BF16 && e != tir.F16 {
		return nil, nil, "not a 16-bit tensor"
	}
	if len(op.Args) == 3 && !core.IsZeroConst(op.Args[2]) {
		return nil, nil, "masked elements are not zero"
	}
	var mask *tir.Value
	if len(op.Args) == 3 {
		mask = op.Args[1]
	}
	return matchTile(l, op.Args[0], mask, tl)
}

// matchTile matches a pointer tensor of 16-bit elements (a load's or a
// store's) and its mask (nil: none) against the affine form of a tensor
// map: see matchTMA.
func matchTile(l *core.Lowerer, ptrs, mask *tir.Value, tl tile) (*artifact.TMA, []*tir.Value, string) {
	root, terms, isParam, ok := tileTerms(l, ptrs)
	if !ok {
		return nil, nil, "the pointer is not a kernel tensor plus offsets"
	}
	spec := &artifact.TMA{Tensor: root.Name, Swizzle: tl.w}
	var row, col *vec
	var rowStride string
	var outer []term
	for _, tm := range terms {
		v, isVec := vecOf(tm.idx)
		switch {
		case isVec && v.dim == 0 && row == nil && tm.stride != nil:
			row, rowStride = &v, tm.stride.Name
		case isVec && v.dim == 1 && col == nil && tm.stride == nil && v.start == nil:
			col = &v
		case !isVec && tm.idx.Type.IsScalar() && tm.stride != nil:
			outer = append(outer, tm)
		default:
			return nil, nil, "an offset is not a coordinate times a stride parameter"
		}
	}
	switch {
	case row == nil || col == nil:
		return nil, nil, "no row vector times a stride parameter plus contiguous columns"
	case row.n != tl.rows || col.n != tl.cols:
		return nil, nil, "the tile is not the load's shape"
	case len(outer) > 3:
		return nil, nil, "more than five dims"
	}
	// The mask: rows < a parameter, columns < a constant (a head dim that
	// pad-dims computed padded: TMA fills the columns past it with zeros),
	// or both.
	bound, cols := "", tl.cols
	for _, m := range andTerms(mask) {
		if b, ok := rowBound(m, *row, isParam); ok && bound == "" {
			bound = b
		} else if c, ok := colBound(m, *col); ok && cols == tl.cols {
			cols = c
		} else {
			return nil, nil, "the mask is not rows < a parameter, columns < a constant, or both"
		}
	}
	spec.Dims = []artifact.TMADim{{Extent: cols}, {Stride: rowStride, Bound: bound}}
	spec.Box = []int{tl.w / 2, tl.rows}
	coords := []*tir.Value{row.start}
	for _, o := range outer {
		spec.Dims = append(spec.Dims, artifact.TMADim{Stride: o.stride.Name})
		spec.Box = append(spec.Box, 1)
		coords = append(coords, o.idx)
	}
	return spec, coords, ""
}

// tileTerms splits a tile of pointers into the kernel tensor they point
// into and the terms of their offsets; isParam reports a kernel scalar
// parameter (of type i32 when asked).
func tileTerms(l *core.Lowerer, ptrs *tir.Value) (root *tir.Value, terms []term, isParam func(v *tir.Value, i32 bool) bool, ok bool) {
	params := map[*tir.Value]bool{}
	for _, p := range l.Func().Params {
		params[p] = true
	}
	isParam = func(v *tir.Value, i32 bool) bool {
		return params[v] && !v.Type.Ptr && (!i32 || v.Type.Elem == tir.I32)
	}
	var ptr func(v *tir.Value) bool
	ptr = func(v *tir.Value) bool {
		switch {
		case params[v] && v.Type.Ptr:
			root = v
			return true
		case v.Def == nil:
			return false
		}
		switch d := v.Def; d.Kind {
		case tir.OpSplat, tir.OpBroadcast, tir.OpReshape:
			return ptr(d.Args[0])
		case tir.OpAddPtr:
			return ptr(d.Args[0]) && offsets(d.Args[1], &terms, isParam)
		}
		return false
	}
	ok = ptr(ptrs)
	return root, terms, isParam, ok
}

// term is one offset of a pointer: idx times stride (nil: 1).
type term struct {
	idx, stride *tir.Value
}

// offsets splits an i32 offset into terms (sums of products with a stride
// parameter, through splats and broadcasts).
func offsets(v *tir.Value, out *[]term, isParam func(*tir.Value, bool) bool) bool {
	if d := v.Def; d != nil {
		switch d.Kind {
		case tir.OpAdd:
			return offsets(d.Args[0], out, isParam) && offsets(d.Args[1], out, isParam)
		case tir.OpBroadcast:
			if s := d.Args[0]; s.Def != nil && (s.Def.Kind == tir.OpAdd || s.Def.Kind == tir.OpMul) {
				return offsets(s, out, isParam)
			}
		case tir.OpSplat:
			// A scalar offset added after the row vector (q + rows·s_t +
			// h·s_h) rather than before it: the same coordinate.
			if s := d.Args[0]; s.Type.IsScalar() && s.Def != nil && (s.Def.Kind == tir.OpAdd || s.Def.Kind == tir.OpMul) {
				return offsets(s, out, isParam)
			}
		case tir.OpMul:
			for i := 0; i < 2; i++ {
				if s := unsplat(d.Args[1-i]); isParam(s, true) {
					*out = append(*out, term{idx: d.Args[i], stride: s})
					return true
				}
			}
		}
	}
	*out = append(*out, term{idx: v})
	return true
}

// unsplat is v without splats and broadcasts of a scalar.
func unsplat(v *tir.Value) *tir.Value {
	for v.Def != nil && (v.Def.Kind == tir.OpSplat || v.Def.Kind == tir.OpBroadcast) && v.Def.Args[0].Type.IsScalar() {
		v = v.Def.Args[0]
	}
	if v.Def != nil && v.Def.Kind == tir.OpSplat {
		return v.Def.Args[0]
	}
	return v
}

// vec is start + arange(0, n) laid along dim of a 2-D tile (start nil: 0).
type vec struct {
	start *tir.Value
	n     int
	dim   int
}

// vecOf recognises broadcast(reshape(start + arange(0, n))) as a vec.
func vecOf(v *tir.Value) (vec, bool) {
	for v.Def != nil && v.Def.Kind == tir.OpBroadcast {
		v = v.Def.Args[0]
	}
	d := v.Def
	if d == nil || d.Kind != tir.OpReshape || len(v.Type.Shape) != 2 {
		return vec{}, false
	}
	dim := 0
	if v.Type.Shape[0] == 1 {
		dim = 1
	} else if v.Type.Shape[1] != 1 {
		return vec{}, false
	}
	start, n, ok := rangeOf(d.Args[0])
	return vec{start: start, n: n, dim: dim}, ok
}

// rangeOf recognises arange(0, n) and splat(s) + arange(0, n).
func rangeOf(v *tir.Value) (*tir.Value, int, bool) {
	d := v.Def
	if d == nil {
		return nil, 0, false
	}
	if d.Kind == tir.OpArange {
		s, e := d.IntAttr("start"), d.IntAttr("end")
		return nil, int(e - s), s == 0
	}
	if d.Kind != tir.OpAdd {
		return nil, 0, false
	}
	for i := 0; i < 2; i++ {
		a, s := d.Args[i], d.Args[1-i]
		if s.Def != nil && s.Def.Kind == tir.OpSplat && a.Def != nil && a.Def.Kind == tir.OpArange && a.Def.IntAttr("start") == 0 {
			return s.Def.Args[0], int(a.Def.IntAttr("end")), true
		}
	}
	return nil, 0, false
}

// andTerms splits a mask into the terms of its ands (nil: none).
func andTerms(m *tir.Value) []*tir.Value {
	if m == nil {
		return nil
	}
	if d := m.Def; d != nil && d.Kind == tir.OpAnd {
		return append(andTerms(d.Args[0]), andTerms(d.Args[1])...)
	}
	return []*tir.Value{m}
}

// colBound recognises mask = broadcast(reshape(arange(0, n) < c)) for the
// tile's columns (col, from 0) and a constant c below n: the real columns
// of a dimension pad-dims padded.
func colBound(m *tir.Value, col vec) (int, bool) {
	for m.Def != nil && (m.Def.Kind == tir.OpBroadcast || m.Def.Kind == tir.OpReshape) {
		m = m.Def.Args[0]
	}
	d := m.Def
	if d == nil || d.Kind != tir.OpCmp || fmt.Sprint(d.Attr("pred")) != "lt" || col.start != nil {
		return 0, false
	}
	a, c := d.Args[0].Def, d.Args[1].Def
	if a == nil || a.Kind != tir.OpArange || a.IntAttr("start") != 0 || int(a.IntAttr("end")) != col.n ||
		c == nil || c.Kind != tir.OpConst {
		return 0, false
	}
	n, ok := c.Attr("value").(int64)
	if !ok || n <= 0 || int(n) >= col.n {
		return 0, false
	}
	return int(n), true
}

// rowBound recognises mask = broadcast(row < splat(bound)) for the load's
// row vector and an i32 parameter bound.
func rowBound(m *tir.Value, row vec, isParam func(*tir.Value, bool) bool) (string, bool) {
	for m.Def != nil && m.Def.Kind == tir.OpBroadcast {
		m = m.Def.Args[0]
	}
	d := m.Def
	if d == nil || d.Kind != tir.OpCmp || fmt.Sprint(d.Attr("pred")) != "lt" {
		return "", false
	}
	r, ok := vecOf(d.Args[0])
	b := unsplat(d.Args[1])
	if !ok || r != row || !isParam(b, true) {
		return "", false
	}
	return b.Name, true
}

// ---- emission ----

// Prologue starts a dependent launch's kernel (pdl.go), then initialises
// the TMA loads' mbarriers and release counters (one thread; a CTA
// barrier publishes them before anyone waits). The same
// thread first prefetches the tensor maps' descriptors (as CUTLASS's
// kernels do): the first copy of each would otherwise fetch its 128 bytes
// from the kernel's parameters in series with the copy, at every CTA.
func (t *Target) Prologue(l *core.Lowerer) {
	pdlPrologue(l)
	if len(t.tmaBars) == 0 {
		return
	}
	l.IfThen(l.Block().NewICmp(enum.IPredEQ, t.CTAThreadID(l), core.ConstI32(0)), "mbar.init", func() {
		for _, i := range t.tmaMaps {
			l.Asm(types.Void, asmPrefetchTensorMap, "l,~{memory}", true, l.TensorMapParam(i))
		}
		for i, n := range t.tmaBars {
			a := sharedAddr32(l, t.tmaBase+8*i, nil)
			if n == 0 && t.WarpSpecialized() {
				n = t.ConsumerWarps(l) / 4 // an empty mbarrier: one arrival per consumer warpgroup
			}
			if n == 0 {
				l.Asm(types.Void, asmCounterInit, "r,~{memory}", true, a)
				continue
			}
			l.Asm(types.Void, fmt.Sprintf(asmMbarInit, n), "r,~{memory}", true, a)
		}
		l.Asm(types.Void, asmMbarInitDone, "~{memory}", true)
	})
	l.Barrier()
}

// sharedAddr32 is the shared-window address (i32) of byte off (+ dyn).
func sharedAddr32(l *core.Lowerer, off int, dyn value.Value) value.Value {
	b := l.Block()
	a := b.NewPtrToInt(l.SharedAddress(types.I8, off, core.ConstI32(0)), types.I32)
	if dyn != nil {
		return b.NewAdd(a, dyn)
	}
	return a
}

// mbar is the address of the full mbarrier of st's buffer in use.
func (tl *tmaLoad) mbar(l *core.Lowerer, st *core.Staged) value.Value {
	return barOf(l, tl.bars, st.Buffer())
}

// barOf is the address of mbarrier buf (nil: 0) of the array at off.
func barOf(l *core.Lowerer, off int, buf value.Value) value.Value {
	var dyn value.Value
	if buf != nil {
		dyn = l.Block().NewShl(buf, core.ConstI32(3))
	}
	return sharedAddr32(l, off, dyn)
}

// lowerTMA issues the tile's copies from thread 0, or from the thread
// ReleaseBuffer elected (under the staged load's guard): the expected bytes
// on the buffer's full mbarrier, then one box per panel. An
// empty cp.async group keeps the group counts of cp.async tiles right
// (core.TileWaiter).
func (t *Target) lowerTMA(l *core.Lowerer, st *core.Staged, p *tilePlan) {
	commit := func() { l.Call("llvm.nvvm.cp.async.commit.group", types.Void) }
	if t.WarpSpecialized() && !t.InProducer() {
		commit() // the producer issues it
		return
	}
	tl := p.tma
	b := l.Block()
	coords := make([]value.Value, len(tl.coords))
	for i, c := range tl.coords {
		coords[i] = core.ConstI32(0)
		if c != nil {
			coords[i] = l.Scalar(c)
		}
	}
	if st.Resident && !t.WarpSpecialized() && (tl.again || !l.SharedClean()) {
		// Refilled by each iteration of the loop around, or filled where
		// threads have used shared memory since the last barrier (a
		// conversion's scratch area, at 0 while no copy is in flight):
		// every thread is done with what the copy overwrites (the
		// previous fill's dots, the epilogue's or a conversion's scratch,
		// through the generic proxy) before one thread issues it.
		l.Asm(types.Void, "fence.proxy.async.shared::cta;", "~{memory}", true)
		l.Barrier()
		b = l.Block()
	}
	// Thread 0 issues the copies, or the thread ReleaseBuffer elected.
	var cond value.Value = constant.True
	if !st.Elected {
		cond = b.NewICmp(enum.IPredEQ, l.ThreadID(), core.ConstI32(0))
	}
	if st.Guard != nil {
		cond = b.NewAnd(cond, st.Guard)
	}
	l.IfThen(cond, "tma", func() {
		bar := tl.mbar(l, st)
		rcs := riderCopies(l, tl.riders)
		var tx value.Value = core.ConstI32(int64(p.tile.bytes()))
		for _, c := range rcs {
			tx = l.Block().NewAdd(tx, c.bytes)
		}
		l.Asm(types.Void, asmExpectTx, "r,r,~{memory}", true, bar, tx)
		text, cons := asmTMA(1 + len(coords))
		for k := 0; k < tl.panels; k++ {
			dst := sharedAddr32(l, st.ByteOff+k*p.tile.rows*p.tile.w, st.StagedDyn())
			args := append([]value.Value{dst, l.TensorMapParam(tl.param), core.ConstI32(int64(k * p.tile.w / 2))}, coords...)
			l.Asm(types.Void, text, cons, true, append(args, bar)...)
		}
		issueRiders(l, tl.riders, rcs, st.Buffer(), bar)
	})
	if !t.InProducer() {
		commit()
	}
}

// WaitTile waits on the mbarrier of a TMA tile's buffer in use.
func (t *Target) WaitTile(l *core.Lowerer, st *core.Staged) bool {
	p, ok := st.Plan.(*tilePlan)
	if !ok || p.tma == nil {
		return false
	}
	parity := st.Parity()
	if parity == nil && p.tma.again {
		parity = p.tma.flip(l, &p.tma.waits)
	}
	if parity == nil {
		parity = core.ConstI32(0)
	}
	l.Asm(types.Void, asmMbarWait, "r,r,~{memory}", true, p.tma.mbar(l, st), parity)
	return true
}

// flip returns the parity in *v (a variable of the calling thread, 0 at
// the kernel's entry) and flips it: the parity of the wait for one fill
// of a tile filled again and again.
func (tl *tmaLoad) flip(l *core.Lowerer, v **ir.InstAlloca) value.Value {
	if *v == nil {
		*v = l.Entry().NewAlloca(types.I32)
		l.Entry().NewStore(core.ConstI32(0), *v)
	}
	b := l.Block()
	n := b.NewLoad(types.I32, *v)
	b.NewStore(b.NewXor(n, core.ConstI32(1)), *v)
	return n
}

// OwnCompletion: a TMA tile completes on its mbarrier.
func (t *Target) OwnCompletion(st *core.Staged) bool {
	p, ok := st.Plan.(*tilePlan)
	return ok && p.tma != nil
}

// ReleasesBuffers: a pipelined TMA tile's buffers are handed back through
// its release counters (unless release=barrier).
func (t *Target) ReleasesBuffers(st *core.Staged) bool {
	p, ok := st.Plan.(*tilePlan)
	return ok && p.tma != nil && p.tma.counters >= 0 && t.Release
}

// ReleaseBuffer counts the release of buffer buf on the tiles' (their
// loop's) release counter, from one thread per warpgroup (its wgmma reads are
// complete for the whole warpgroup once any of its threads waited for
// them), when cond holds; the thread whose count wraps the counter around
// (the last warpgroup to release the buffer) refills it (fill). The
// counter's acquire-release atomic orders every warpgroup's reads before
// that thread's copies; no thread waits for another.
//
// Where there is nothing to release (cond false: the loop's first
// iteration), thread 0 fills.
//
// With a producer warpgroup, the buffer goes back on its empty mbarrier
// instead, and the producer refills it (fill is not called).
func (t *Target) ReleaseBuffer(l *core.Lowerer, tiles []*core.Staged, buf, cond value.Value, fill func()) {
	if t.WarpSpecialized() {
		t.arriveEmpty(l, tiles, buf, cond)
		return
	}
	b := l.Block()
	tid := l.ThreadID()
	lead := b.NewICmp(enum.IPredEQ, b.NewAnd(tid, core.ConstI32(127)), core.ConstI32(0))
	last := int64(max(l.NumWarps()/4, 1) - 1)
	// The last count's old value, through a variable LLVM promotes to a
	// register (-1: not counted here).
	oldVar := l.Entry().NewAlloca(types.I32)
	b.NewStore(core.ConstI32(-1), oldVar)
	l.IfThen(b.NewAnd(cond, lead), "release", func() {
		old := l.Asm(types.I32, asmRelease, "=r,r,r,~{memory}", true,
			barOf(l, tiles[0].Plan.(*tilePlan).tma.counters, buf), core.ConstI32(last))
		l.Block().NewStore(old, oldVar)
	})
	b = l.Block()
	isLast := b.NewICmp(enum.IPredEQ, b.NewLoad(types.I32, oldVar), core.ConstI32(last))
	first := b.NewICmp(enum.IPredEQ, tid, core.ConstI32(0))
	l.IfThen(b.NewSelect(cond, isLast, first), "refill", fill)
}

// String is the plan as --print-ir-after shows it: the copy engine.
func (p *tilePlan) String() string {
	if p.tma == nil {
		return ""
	}
	return "TMA"
}
