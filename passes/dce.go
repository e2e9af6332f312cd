package passes

import "github.com/fac-compiler/fac/tir"

// dce removes ops with no effect on stores (and atomics, prefetches, last_arrivals), calls or returns: unused pure
// ops and loads, loop-carried values of for and results of if that feed
// nothing live (a dead accumulator goes even though its loop body uses it),
// and whole fors and ifs left with no live results and no effects inside.
//
// It computes the fixpoint directly by marking from the effects backwards
// (as cmd/compile's deadcode does) instead of deleting unused ops round
// after round.
func dce(m *tir.Module) error {
	for _, f := range m.Funcs {
		d := &dcer{
			live:   map[*tir.Value]bool{},
			liveOp: map[*tir.Op]bool{},
			slots:  map[*tir.Op][]bool{},
			argOf:  map[*tir.Value]slotRef{},
			parent: map[*tir.Op]*tir.Op{},
		}
		d.index(f.Body, nil)
		f.Body.Walk(func(op *tir.Op) bool {
			if op.Kind.OrdersMemory() || op.Kind == tir.OpPrefetch || op.Kind == tir.OpCall || op.Kind == tir.OpReturn {
				d.markOp(op)
			}
			return true
		})
		d.sweep(f.Body)
	}
	return nil
}

type slotRef struct {
	op *tir.Op
	i  int // region argument index
}

type dcer struct {
	live   map[*tir.Value]bool
	liveOp map[*tir.Op]bool
	slots  map[*tir.Op][]bool     // for/if → which carried values/results are live
	argOf  map[*tir.Value]slotRef // for region argument → its loop
	parent map[*tir.Op]*tir.Op    // op → the for/if whose region holds it
}

func (d *dcer) index(b *tir.Block, parent *tir.Op) {
	for _, op := range b.Ops {
		d.parent[op] = parent
		if len(op.Regions) > 0 {
			d.slots[op] = make([]bool, len(op.Results))
		}
		for _, r := range op.Regions {
			for i, a := range r.Args {
				d.argOf[a] = slotRef{op, i}
			}
			d.index(r, op)
		}
	}
}

// markOp marks op live, with the operands it needs whatever its results'
// liveness, and the ops that hold it.
func (d *dcer) markOp(op *tir.Op) {
	if d.liveOp[op] {
		return
	}
	d.liveOp[op] = true
	switch op.Kind {
	case tir.OpFor:
		d.markValues(op.Args[:3]) // lo, hi, step; inits go with their slots
	case tir.OpIf:
		d.markValues(op.Args[:1])
	case tir.OpYield:
		// Operands go with their slots.
	default:
		d.markValues(op.Args)
	}
	if p := d.parent[op]; p != nil {
		d.markOp(p)
	}
}

func (d *dcer) markValues(vs []*tir.Value) {
	for _, v := range vs {
		d.markValue(v)
	}
}

func (d *dcer) markValue(v *tir.Value) {
	if d.live[v] {
		return
	}
	d.live[v] = true
	if op := v.Def; op != nil {
		d.markOp(op)
		if len(op.Regions) > 0 {
			for i, r := range op.Results {
				if r == v {
					d.markSlot(op, i)
				}
			}
		}
	} else if ref, ok := d.argOf[v]; ok {
		d.markOp(ref.op)
		if ref.i > 0 { // not the induction variable
			d.markSlot(ref.op, ref.i-1)
		}
	}
}

// markSlot marks the i-th carried value of a for or result of an if: its
// initial value and what every region yields for it.
func (d *dcer) markSlot(op *tir.Op, i int) {
	if d.slots[op][i] {
		return
	}
	d.slots[op][i] = true
	if op.Kind == tir.OpFor {
		d.markValue(op.Args[3+i])
	}
	for _, r := range op.Regions {
		d.markValue(yieldOf(r).Args[i])
	}
}

func yieldOf(b *tir.Block) *tir.Op { return b.Ops[len(b.Ops)-1] }

func (d *dcer) sweep(b *tir.Block) {
	ops := b.Ops[:0]
	for _, op := range b.Ops {
		if !d.liveOp[op] && !op.Kind.IsTerminator() {
			continue
		}
		if len(op.Regions) > 0 {
			d.pruneSlots(op)
			for _, r := range op.Regions {
				d.sweep(r)
			}
		}
		ops = append(ops, op)
	}
	b.Ops = ops
}

// pruneSlots drops the dead results of a for or if with everything that
// carries them: init operand, region argument, yield operand.
func (d *dcer) pruneSlots(op *tir.Op) {
	live := d.slots[op]
	keep := func(vs []*tir.Value, off int) []*tir.Value {
		out := vs[:off:off]
		for i, v := range vs[off:] {
			if live[i] {
				out = append(out, v)
			}
		}
		return out
	}
	op.Results = keep(op.Results, 0)
	if op.Kind == tir.OpFor {
		op.Args = keep(op.Args, 3)
		op.Regions[0].Args = keep(op.Regions[0].Args, 1)
	}
	for _, r := range op.Regions {
		y := yieldOf(r)
		y.Args = keep(y.Args, 0)
	}
}
