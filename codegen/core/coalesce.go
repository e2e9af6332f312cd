package core

import "github.com/fac-compiler/fac/tir"

// Stores of tiles whose layout gives each warp short runs of a row (the
// tensor-core accumulators: 16 bytes of each of 8 rows per instruction)
// write half-used sectors, and a thread issues one narrow store per pair
// of elements: the forward's 128×128 bf16 O took 32 stores a thread, each
// touching 8 sectors, and its epilogue about 8% of a sliding-window
// kernel's time (Nsight Compute). Such a store is made from a
// blocked layout with 16-byte vectors instead: the value goes through
// shared memory once (rows padded by 16 bytes, so the fragments' writes
// hit 32 banks), and each warp then writes whole rows.

// coalesceStore reports the layout store op should write from instead of
// lay, the layout of its value, when that pays: a rank-2 tile outside any
// loop (a conversion costs two CTA barriers), or in one only whose
// iterations run loops of their own (a persistent kernel's tile loop),
// of 16- or 32-bit elements,
// whose addresses run contiguously along the last dim for 16 bytes and
// whose mask is constant along them, held in lay with runs of under 32
// bytes per warp instruction, and big enough that every thread holds a
// whole 16-byte vector.
func (a *Assignment) coalesceStore(op *tir.Op, lay Layout) (Layout, bool) {
	p := op.Args[0]
	t := p.Type
	if t.Rank() != 2 || a.noCoalesce || a.inLoop(op) || a.tensorStore(op) {
		return nil, false
	}
	bytes := t.Elem.Bytes()
	if bytes != 2 && bytes != 4 {
		return nil, false
	}
	vec := 16 / bytes
	last := 1
	n := t.Shape[0] * t.Shape[1]
	if t.Shape[last] < vec || n < 32*a.nw*vec || a.axis(p).contig[last] < vec {
		return nil, false
	}
	if len(op.Args) == 3 && a.axis(op.Args[2]).constancy[last] < vec {
		return nil, false
	}
	switch lay.(type) {
	case Blocked, StoreVec:
		return nil, false
	}
	if rowRun(lay.Linear(t.Shape, a.nw), last)*bytes >= 32 {
		return nil, false
	}
	return NewStoreVec(t.Shape, a.nw, vec), true
}

// rowRun is the number of consecutive elements along dim d that one warp
// instruction covers from element 0: a thread's contiguous registers, then
// its neighbouring lanes'.
func rowRun(x *Linear, d int) int {
	run := 1
	for _, bs := range [][][]int{x.reg, x.lane} {
		for _, b := range bs {
			if !onlyDim(b, d) || b[d] != run {
				break
			}
			run *= 2
		}
	}
	return run
}

// tensorStore reports whether the target writes store op from shared
// memory in bulk (TensorStoreTarget).
func (k *kernel) tensorStore(op *tir.Op) bool {
	t, ok := k.target.(TensorStoreTarget)
	return ok && op.Kind == tir.OpStore && t.TensorStore(op)
}

// inLoop reports whether op sits in the body of a for loop, at any depth,
// except a loop around others (a persistent kernel's tile loop: its
// iterations are whole kernels).
func (a *Assignment) inLoop(op *tir.Op) bool {
	if a.loopOps == nil {
		a.loopOps = map[*tir.Op]bool{}
		var walk func(b *tir.Block, in bool)
		walk = func(b *tir.Block, in bool) {
			for _, o := range b.Ops {
				if in {
					a.loopOps[o] = true
				}
				for _, r := range o.Regions {
					walk(r, in || o.Kind == tir.OpFor && !r.Any(func(x *tir.Op) bool { return x.Kind == tir.OpFor }))
				}
			}
		}
		walk(a.f.Body, false)
	}
	return a.loopOps[op]
}
