package sm90

import (
	"fmt"
	"strings"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/codegen/async"
	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// TMA reductions (the config's dq=tma, sm_90a with TMA), FlashAttention-3's
// way for the backward's dQ: an f32 atomic_add tile directly in a loop
// body, whose pointers are an affine tile of a kernel tensor (rows times a
// stride parameter, columns contiguous from any start, scalar offsets times
// stride parameters), with no mask or `cols < bound` for an i32 parameter
// bound (no mask: the rows' stride bounds them), is written by the threads
// holding it into a staging tile in
// shared memory, in the 128B-swizzled panel layout of tile.go with f32
// elements (32 columns a panel; the accumulator fragments' pairs fall in
// distinct banks), and one thread adds it to global memory with one
// cp.reduce.async.bulk.tensor .add per panel through a tensor map of its
// own, whose bound on the columns is the mask's (or the stride): TMA adds
// nothing past it.
// The core double-buffers the staging tile and issues iteration k's adds
// after the first CTA barrier of iteration k+1 (codegen/async/bulk.go), so the
// reduction costs the loop no barrier: a thread's 32 reds an iteration
// become 16 shared stores and, in one thread, a few bulk instructions.

// asmTMAReduce is the tensor reduction of an n-dim box: [$0, {$1 .. $n}]
// tensor map and coordinates, [$n+1] the shared source.
func asmTMAReduce(n int) (text, constraints string) {
	text = fmt.Sprintf("cp.reduce.async.bulk.tensor.%dd.global.shared::cta.add.tile.bulk_group [$0, {%s}], [$%d];", n, asmOperands(1, n), n+1)
	return text, "l" + strings.Repeat(",r", n+1) + ",~{memory}"
}

// tmaReduce is the TMA plan of one atomic_add.
type tmaReduce struct {
	t      *Target
	tensor string       // the kernel tensor it adds to
	param  int          // its tensor-map parameter (core.Lowerer.TensorMapParam)
	coords []*tir.Value // the box's coordinate per dim (nil: 0)
	tile   tile         // the staged f32 tile: the value's rows x cols
}

// TMAReduces is the phase that picks the atomic_add tiles TMA adds.
var TMAReduces = core.Phase{
	Name: "tma-reduce",
	Doc:  "add f32 atomic_add tiles in loop bodies that are affine tiles of a kernel tensor, columns masked by cols < a parameter, by TMA tensor reductions from a swizzled staging tile (dq=tma)",
	Run: func(l *core.Lowerer) error {
		t, ok := l.Target().(*Target)
		if !ok || !t.DQTMA {
			return nil
		}
		t.planTMAReduces(l)
		return nil
	},
}

// planTMAReduces finds the atomic_add tiles directly in the body of a
// loop that TMA can add, and gives each a tensor-map parameter.
func (t *Target) planTMAReduces(l *core.Lowerer) {
	var walk func(b *tir.Block, inLoop bool)
	walk = func(b *tir.Block, inLoop bool) {
		for _, op := range b.Ops {
			if op.Kind == tir.OpAtomicAdd {
				t.planTMAReduce(l, op, inLoop)
			}
			for _, r := range op.Regions {
				walk(r, op.Kind == tir.OpFor)
			}
		}
	}
	walk(l.Func().Body, false)
}

func (t *Target) planTMAReduce(l *core.Lowerer, op *tir.Op, inLoop bool) {
	v := op.Args[1].Type
	if v.Rank() != 2 {
		return // only tiles: no note
	}
	why := func(s string) { l.Note(fmt.Sprintf("atomic_add at %s: not by TMA: %s", op.Pos, s)) }
	if !inLoop {
		why("not directly in a loop body")
		return
	}
	var mask *tir.Value
	if len(op.Args) == 3 {
		mask = op.Args[2]
	}
	spec, coords, tl, s := matchReduceTile(l, op.Args[0], mask, v.Shape[0], v.Shape[1])
	if spec == nil {
		why(s)
		return
	}
	r := &tmaReduce{t: t, tensor: spec.Tensor, coords: coords, tile: tl}
	r.param = l.Plan().AddTensorMapParam("tma."+spec.Tensor, tir.F32, spec)
	t.tmaMaps = append(t.tmaMaps, r.param)
	if t.tmaReduces == nil {
		t.tmaReduces = map[*tir.Op]*tmaReduce{}
	}
	t.tmaReduces[op] = r
	l.Note(fmt.Sprintf("atomic_add at %s: by TMA tensor reductions through %s", op.Pos, spec.Tensor))
}

// matchReduceTile matches the pointers of a rows x cols f32 tile: root
// plus rowVec·s (+ rowStart·s) + colVec (+ outer·s', …), with mask
// broadcast(colVec < bound). It returns the tensor map, the box's
// coordinates per dim and the staging tile, or why not.
func matchReduceTile(l *core.Lowerer, ptrs, mask *tir.Value, rows, cols int) (*artifact.TMA, []*tir.Value, tile, string) {
	root, terms, isParam, ok := tileTerms(l, ptrs)
	if !ok {
		return nil, nil, tile{}, "the pointer is not a kernel tensor plus offsets"
	}
	var row, col *vec
	var rowStride *tir.Value
	var scalars []term
	for _, tm := range terms {
		v, isVec := vecOf(tm.idx)
		switch {
		case isVec && v.dim == 0 && row == nil && tm.stride != nil:
			row, rowStride = &v, tm.stride
		case isVec && v.dim == 1 && col == nil && tm.stride == nil:
			col = &v
		case !isVec && tm.idx.Type.IsScalar() && tm.stride != nil:
			scalars = append(scalars, tm)
		default:
			return nil, nil, tile{}, "an offset is not a coordinate times a stride parameter"
		}
	}
	if row == nil || col == nil {
		return nil, nil, tile{}, "no row vector times a stride parameter plus contiguous columns"
	}
	if row.n != rows || col.n != cols {
		return nil, nil, tile{}, "the tile is not the value's shape"
	}
	// The rows' coordinate: the row vector's start or one scalar term of
	// the rows' stride, not both.
	rowStart := row.start
	var outer []term
	for _, s := range scalars {
		if s.stride == rowStride && rowStart == nil {
			rowStart = s.idx
			continue
		}
		if s.stride == rowStride {
			return nil, nil, tile{}, "the rows' coordinate is a sum of several terms"
		}
		outer = append(outer, s)
	}
	if len(outer) > 3 {
		return nil, nil, tile{}, "more than five dims"
	}
	tl := tile{rows: rows, cols: cols, w: 128, eb: 4}
	if cols%tl.panelCols() != 0 || rows%8 != 0 || rows > 256 {
		return nil, nil, tile{}, "not a tile of 32-column panels of up to 256 rows (a multiple of 8)"
	}
	// TMA adds nothing past the box's bound on the columns: the mask's
	// cols < bound, or without a mask the rows' stride, which then holds
	// the columns (a padded row: what falls past it is the kernel's to
	// make zero, as the reds would add it into the next row).
	bound := rowStride.Name
	if mask != nil {
		b, ok := rowBound(mask, *col, isParam)
		if !ok {
			return nil, nil, tile{}, "the mask is not cols < a parameter"
		}
		bound = b
	}
	spec := &artifact.TMA{Tensor: root.Name, Swizzle: tl.w,
		Dims: []artifact.TMADim{{Bound: bound}, {Stride: rowStride.Name}},
		Box:  []int{tl.panelCols(), rows}}
	coords := []*tir.Value{col.start, rowStart}
	for _, o := range outer {
		spec.Dims = append(spec.Dims, artifact.TMADim{Stride: o.stride.Name})
		spec.Box = append(spec.Box, 1)
		coords = append(coords, o.idx)
	}
	return spec, coords, tl, ""
}

// TensorReduce: async.TensorReduceTarget (tma-reduce planned op).
func (t *Target) TensorReduce(op *tir.Op) async.TensorReducer {
	if r := t.tmaReduces[op]; r != nil {
		return r
	}
	return nil
}

// Bytes: async.TensorReducer.
func (r *tmaReduce) Bytes() int { return r.tile.bytes() }

// Stage: async.TensorReducer. The registers go to their swizzled places
// (runs of up to four consecutive along the columns as one vector), the
// writes are fenced for the async proxy, and thread 0 writes the box's
// coordinates into the header.
func (r *tmaReduce) Stage(l *core.Lowerer, base int, dyn value.Value, hdr int, dyn16 value.Value, vals []value.Value, x *core.Linear) {
	tl := r.tile
	const cd = 1
	v := runAlong(x, cd, 4)
	b := l.Block()
	// A register's offset is the thread's base XOR its own where the
	// layout's coordinate bits are disjoint (tile.go), else computed.
	xor := disjointBases(x)
	var tb value.Value
	if xor {
		tb = r.t.tileBase(l, x, tl, cd)
	}
	bc := l.BaseCoords(x)
	for reg := 0; reg < len(vals); reg += v {
		ro, co := rowCol(x.RegOffset(reg), cd)
		var off value.Value
		if xor {
			off = xorOff(l, tb, tl.offset(ro, co))
		} else {
			k := func(n int) value.Value { return core.ConstI32(int64(n)) }
			off = tl.runtimeOffset(l, l.Entry().NewOr(bc[1-cd], k(ro)), l.Entry().NewOr(bc[cd], k(co)))
		}
		a := l.SharedAbs(types.I8, base, b.NewAdd(dyn, off))
		if v == 1 {
			b.NewStore(vals[reg], b.NewBitCast(a, core.SharedPtr(types.Float)))
			continue
		}
		vt := types.NewVector(uint64(v), types.Float)
		var vec value.Value = undefOf(vt)
		for i := 0; i < v; i++ {
			vec = b.NewInsertElement(vec, vals[reg+i], core.ConstI32(int64(i)))
		}
		b.NewStore(vec, b.NewBitCast(a, core.SharedPtr(vt))).Align = alignOf(4 * v)
	}
	l.Asm(types.Void, asmFenceAsync, "~{memory}", true)
	coords := make([]value.Value, len(r.coords))
	for i, c := range r.coords {
		coords[i] = core.ConstI32(0)
		if c != nil {
			coords[i] = l.Scalar(c)
		}
	}
	l.IfThen(l.Block().NewICmp(enum.IPredEQ, l.ThreadID(), core.ConstI32(0)), "tma.reduce.hdr", func() {
		b := l.Block()
		for i, c := range coords {
			p := l.SharedAbs(types.I8, hdr+4*i, dyn16)
			b.NewStore(c, b.NewBitCast(p, core.SharedPtr(types.I32)))
		}
	})
}

// Issue: async.TensorReducer. One reduction per 32-column panel, the
// columns' coordinate advancing by 32, in one committed bulk group.
func (r *tmaReduce) Issue(l *core.Lowerer, base int, dyn value.Value, hdr int, dyn16 value.Value) {
	tl := r.tile
	b := l.Block()
	coords := make([]value.Value, len(r.coords))
	for i := range coords {
		p := l.SharedAbs(types.I8, hdr+4*i, dyn16)
		coords[i] = b.NewLoad(types.I32, b.NewBitCast(p, core.SharedPtr(types.I32)))
	}
	text, cons := asmTMAReduce(len(coords))
	for k := 0; k < tl.cols/tl.panelCols(); k++ {
		src := sharedAddr32(l, base+k*tl.rows*tl.w, dyn)
		args := []value.Value{l.TensorMapParam(r.param), b.NewAdd(coords[0], core.ConstI32(int64(k*tl.panelCols())))}
		args = append(args, coords[1:]...)
		l.Asm(types.Void, text, cons, true, append(args, src)...)
	}
	l.Asm(types.Void, asmBulkCommit, "~{memory}", true)
}
