package sm90

import (
	"fmt"
	"strings"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// TMA stores (a kernel's tma_store argument, or tma-store=on for every
// kernel), FlashAttention-3's epilogue: a stored
// 16-bit tile whose pointer tensor is an affine tile of a kernel tensor
// (the form TMA loads match: matchTile) and whose mask is `rows < bound`
// for an i32 parameter bound, or none, is written by the threads holding
// it into shared memory in the 128B-swizzled panel layout of tile.go (the
// layout TMA loads write, which TMA's SWIZZLE_128B reads back; the
// accumulator fragments' writes fall in distinct banks), fenced for the
// async proxy, and after a barrier among those threads one thread copies
// it to global memory with one cp.async.bulk.tensor per 64-column panel
// through a tensor map of its own, in one bulk group. The mask is the
// map's bound: a TMA store writes no element past the map's extents.
//
// The staging area is the scratch area where the core's exchanges go (the
// coalesced store's among them): over the K/V tiles once the loop is done,
// after the tiles beside a producer that runs ahead into the next tile of
// a persistent kernel. Its reads are asynchronous: the next CTA barrier
// (in the thread that issued them, a no-op elsewhere) and the kernel's
// exit wait for them first (cp.async.bulk.wait_group.read,
// core.Lowerer.BulkStoreIssued), so that nothing writes the area while they
// read it — in a persistent kernel, the next tile's uses of the scratch
// area (the epilogue's writes among them) and, without a producer, its Q
// copy over the tiles all come after a barrier.
//
// Stores in loops (except a persistent kernel's tile loop, whose
// iterations are whole kernels) and stores that do not match keep the
// core's path; -v says why.

// TMA stores: the inline asm forms (the simulator knows the same strings).
const (
	asmBulkCommit = "cp.async.bulk.commit_group;"
	asmFenceAsync = "fence.proxy.async.shared::cta;"
)

// asmTMAStore is the tensor store of an n-dim box: [$0, {$1 .. $n}] tensor
// map and coordinates, [$n+1] the shared source.
func asmTMAStore(n int) (text, constraints string) {
	text = fmt.Sprintf("cp.async.bulk.tensor.%dd.global.shared::cta.bulk_group [$0, {%s}], [$%d];", n, asmOperands(1, n), n+1)
	return text, "l" + strings.Repeat(",r", n+1) + ",~{memory}"
}

// tmaStore is the TMA plan of one store.
type tmaStore struct {
	tensor string       // the kernel tensor it writes
	param  int          // its tensor-map parameter (core.Lowerer.TensorMapParam)
	coords []*tir.Value // coordinates of dims 1.. (nil: 0)
	tile   tile         // the staged tile: the stored value's rows x cols
}

// TMAStores is the phase that picks the stores TMA writes.
var TMAStores = core.Phase{
	Name: "tma-store",
	Doc:  "write stored 16-bit tiles that are affine tiles of a kernel tensor, masked by rows < a parameter at most, by TMA from a swizzled staging tile (kernels with tma_store = true, or all with tma-store=on)",
	Run: func(l *core.Lowerer) error {
		t, ok := l.Target().(*Target)
		if !ok || !t.WGMMA || !t.TMA || !t.tmaStoreOn(l) || !l.CoalesceStores() {
			return nil
		}
		t.planTMAStores(l)
		return nil
	},
}

// tmaStoreOn: tma-store=on, or the kernel's tma_store argument (a
// schedule annotation, like warp_specialize).
func (t *Target) tmaStoreOn(l *core.Lowerer) bool {
	on, _ := l.Func().Attr("tma_store").(bool)
	return t.TMAStore || on
}

// planTMAStores finds the stores TMA can write and gives each a tensor-map
// parameter.
func (t *Target) planTMAStores(l *core.Lowerer) {
	// in: the op runs in the body of a loop that is not a loop around
	// others (as core's coalesceStore sees loops).
	var walk func(b *tir.Block, in bool)
	walk = func(b *tir.Block, in bool) {
		for _, op := range b.Ops {
			if op.Kind == tir.OpStore {
				t.planTMAStore(l, op, in)
			}
			for _, r := range op.Regions {
				walk(r, in || op.Kind == tir.OpFor && !r.Any(func(x *tir.Op) bool { return x.Kind == tir.OpFor }))
			}
		}
	}
	walk(l.Func().Body, false)
}

func (t *Target) planTMAStore(l *core.Lowerer, op *tir.Op, inLoop bool) {
	v := op.Args[1].Type
	if v.Rank() != 2 {
		return // only tiles: no note
	}
	why := func(s string) { l.Note(fmt.Sprintf("store at %s: not by TMA: %s", op.Pos, s)) }
	if v.Elem != tir.BF16 && v.Elem != tir.F16 {
		why("not a 16-bit tensor")
		return
	}
	if inLoop {
		why("in a loop")
		return
	}
	tl, ok := newTile(v.Shape[0], v.Shape[1])
	if !ok || tl.w != 128 || tl.rows > 256 || tl.rows&(tl.rows-1) != 0 {
		why("not a tile of 64-column panels of up to 256 rows")
		return
	}
	var mask *tir.Value
	if len(op.Args) == 3 {
		mask = op.Args[2]
	}
	spec, coords, s := matchTile(l, op.Args[0], mask, tl)
	if spec == nil {
		why(s)
		return
	}
	st := &tmaStore{tensor: spec.Tensor, coords: coords, tile: tl}
	st.param = l.Plan().AddTensorMapParam("tma."+spec.Tensor, v.Elem, spec)
	// The prologue prefetches its descriptor with the loads' (when there
	// are any).
	t.tmaMaps = append(t.tmaMaps, st.param)
	if t.tmaStores == nil {
		t.tmaStores = map[*tir.Op]*tmaStore{}
	}
	t.tmaStores[op] = st
	l.Note(fmt.Sprintf("store at %s: by TMA through %s", op.Pos, spec.Tensor))
}

// TensorStore: core.TensorStoreTarget (tma-store planned op).
func (t *Target) TensorStore(op *tir.Op) bool { return t.tmaStores[op] != nil }

// LowerTensorStore: core.TensorStoreTarget. Every thread holding the value
// writes its registers into the staging tile (after a barrier: earlier
// readers of the scratch area, and of the tiles under it, are done) and
// fences them for the async proxy; after a barrier, thread 0 issues the
// panels' copies and commits them as one bulk group. False (nothing
// emitted) when the layout's coordinates do not combine by XOR of its
// bases, which the staging addresses need (storeTile).
func (t *Target) LowerTensorStore(l *core.Lowerer, op *tir.Op, vals []value.Value, lay core.Layout) bool {
	st := t.tmaStores[op]
	x := l.Lin(lay, op.Args[1].Type.Shape)
	if !disjointBases(x) {
		l.Note(fmt.Sprintf("store at %s: not by TMA: its layout %s has overlapping coordinate bits", op.Pos, lay))
		return false
	}
	tl := st.tile
	off := roundUp(l.Scratch(), tileAlign)
	l.UseShared(off - l.Scratch() + tl.bytes())
	l.Barrier()
	t.storeTile(l, vals, x, tl, 1, off)
	l.Asm(types.Void, asmFenceAsync, "~{memory}", true)
	l.Barrier()
	coords := make([]value.Value, len(st.coords))
	for i, c := range st.coords {
		coords[i] = core.ConstI32(0)
		if c != nil {
			coords[i] = l.Scalar(c)
		}
	}
	b := l.Block()
	l.IfThen(b.NewICmp(enum.IPredEQ, l.ThreadID(), core.ConstI32(0)), "tma.store", func() {
		text, cons := asmTMAStore(1 + len(coords))
		for k := 0; k < tl.cols/(tl.w/2); k++ {
			src := sharedAddr32(l, off+k*tl.rows*tl.w, nil)
			args := append([]value.Value{l.TensorMapParam(st.param), core.ConstI32(int64(k * tl.w / 2))}, coords...)
			l.Asm(types.Void, text, cons, true, append(args, src)...)
		}
		l.Asm(types.Void, asmBulkCommit, "~{memory}", true)
	})
	l.BulkStoreIssued()
	return true
}

// disjointBases reports whether every basis of x is one power of two in
// one dim, none shared: a coordinate is then the OR (and the XOR) of its
// bases', and the swizzled offset of (base | register offset) is the XOR
// of their offsets (tile.go).
func disjointBases(x *core.Linear) bool {
	used := make([]int, 2)
	for _, bs := range [][][]int{x.RegBases(), x.LaneBases(), x.WarpBases()} {
		for _, b := range bs {
			nz := -1
			for d, c := range b {
				if c != 0 {
					if nz >= 0 || c&(c-1) != 0 || c < 0 {
						return false
					}
					nz = d
				}
			}
			if nz < 0 {
				continue // a copy
			}
			if used[nz]&b[nz] != 0 {
				return false
			}
			used[nz] |= b[nz]
		}
	}
	return true
}
