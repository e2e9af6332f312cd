package passes

import (
	"slices"

	"github.com/fac-compiler/fac/tir"
)

// persistent turns kernels whose compile-time argument persistent is true
// into persistent ones (FlashAttention-3's tile scheduler, static): the
// P = grid.programs programs take the logical grid's tiles in rounds of
// P, program pid slot pid of each round, and slot s runs the tile the
// launch put at grid.order[s] (tir.GridOrder; tiles linearized x fastest).
// The launch chooses that order (launch.Call.Order): each round's tiles in
// launch order (the q tiles of a head together, sharing its K and V in
// L2), mirrored in odd rounds, or, where it knows the tiles' expected
// lengths (the block mask's counts), dealt longest first to the programs
// with the least work so far. One program's next tile then starts while
// the GPU is still busy with its last (a producer warp loads the next Q
// and K while the consumers store O):
//
//	kernel @k(…) { body[program_id(a)]; return }
//
// becomes
//
//	kernel @k(…, %grid.x: i32, %grid.y: i32, %grid.z: i32, %grid.programs: i32, %grid.order: ptr<i32>) {
//	  %pid = program_id {axis = 0} : i32
//	  %xy = mul %grid.x, %grid.y : i32
//	  %n = mul %xy, %grid.z : i32
//	  for %pid, %n, %grid.programs {
//	  ^(%s: i32):
//	    %p = addptr %grid.order, %s : ptr<i32>
//	    %t = load %p : i32
//	    %x = rem %t, %grid.x : i32          // program_id(0)
//	    %r = div %t, %grid.x : i32
//	    %y = rem %r, %grid.y : i32          // program_id(1)
//	    %z = div %r, %grid.y : i32          // program_id(2)
//	    body[program_id(a) -> x, y, z; num_programs(a) -> grid.x, .y, .z]
//	    yield
//	  }
//	  return
//	}
//
// A kernel returning anywhere but at its end, or returning values, stays
// as it is (and so is launched on its logical grid).
func persistent(m *tir.Module) error {
	for _, f := range m.Funcs {
		if on, _ := f.Attr("persistent").(bool); on && f.Kernel && persistable(f) {
			makePersistent(f)
		}
	}
	return nil
}

// persistable reports whether f's body is ops ending in one bare return,
// with no other return and no parameter already named like ours.
func persistable(f *tir.Func) bool {
	ops := f.Body.Ops
	if len(ops) == 0 || ops[len(ops)-1].Kind != tir.OpReturn || len(ops[len(ops)-1].Args) != 0 {
		return false
	}
	for _, p := range f.Params {
		if slices.Contains(tir.GridParams, p.Name) || p.Name == tir.GridOrder {
			return false
		}
	}
	early := false
	for _, op := range ops[:len(ops)-1] {
		early = early || op.Kind == tir.OpReturn
		for _, r := range op.Regions {
			early = early || r.Any(func(o *tir.Op) bool { return o.Kind == tir.OpReturn })
		}
	}
	return !early
}

func makePersistent(f *tir.Func) {
	i32 := tir.Scalar(tir.I32)
	var grid [4]*tir.Value
	for i, n := range tir.GridParams {
		grid[i] = &tir.Value{Type: i32, Name: n}
		f.Params = append(f.Params, grid[i])
	}
	order := &tir.Value{Type: tir.PtrTo(tir.I32), Name: tir.GridOrder}
	f.Params = append(f.Params, order)
	ops := f.Body.Ops
	body, ret := ops[:len(ops)-1], ops[len(ops)-1]

	pid := tir.NewOp(tir.OpProgramID, nil, i32)
	pid.Attrs = []tir.Attr{{Key: "axis", Val: int64(0)}}
	xy := tir.NewOp(tir.OpMul, []*tir.Value{grid[0], grid[1]}, i32)
	n := tir.NewOp(tir.OpMul, []*tir.Value{xy.Result(), grid[2]}, i32)
	loop := tir.NewOp(tir.OpFor, []*tir.Value{pid.Result(), n.Result(), grid[3]})
	t := &tir.Value{Type: i32}
	region := &tir.Block{Args: []*tir.Value{t}}
	loop.Regions = []*tir.Block{region}

	emit := func(k tir.Kind, a, b *tir.Value) *tir.Value {
		op := tir.NewOp(k, []*tir.Value{a, b}, i32)
		region.Ops = append(region.Ops, op)
		return op.Result()
	}
	// The tile slot t runs, as the launch ordered them.
	at := tir.NewOp(tir.OpAddPtr, []*tir.Value{order, t}, order.Type)
	load := tir.NewOp(tir.OpLoad, []*tir.Value{at.Result()}, i32)
	region.Ops = append(region.Ops, at, load)
	tile := load.Result()

	// The tile's coordinates, only those the body reads.
	used := [3]bool{}
	(&tir.Block{Ops: body}).Walk(func(o *tir.Op) bool {
		if o.Kind == tir.OpProgramID {
			used[o.Attr("axis").(int64)] = true
		}
		return true
	})
	var coord [3]*tir.Value
	if used[0] {
		coord[0] = emit(tir.OpRem, tile, grid[0])
	}
	if used[1] || used[2] {
		r := emit(tir.OpDiv, tile, grid[0])
		if used[1] {
			coord[1] = emit(tir.OpRem, r, grid[1])
		}
		if used[2] {
			coord[2] = emit(tir.OpDiv, r, grid[1])
		}
	}
	// The body's program_ids, wherever they are, become the coordinates,
	// and its num_programs the logical grid's.
	region.Ops = append(region.Ops, body...)
	sub := map[*tir.Value]*tir.Value{}
	region.Walk(func(o *tir.Op) bool {
		switch o.Kind {
		case tir.OpProgramID:
			sub[o.Result()] = coord[o.Attr("axis").(int64)]
		case tir.OpNumPrograms:
			sub[o.Result()] = grid[o.Attr("axis").(int64)]
		}
		return true
	})
	region.ReplaceUses(sub)
	region.Ops = removeGridOps(region.Ops)
	region.Ops = append(region.Ops, tir.NewOp(tir.OpYield, nil))
	f.Body.Ops = []*tir.Op{pid, xy, n, loop, ret}
}

// removeGridOps drops the program_id and num_programs ops of ops and of
// their regions (their uses were replaced).
func removeGridOps(ops []*tir.Op) []*tir.Op {
	out := ops[:0]
	for _, op := range ops {
		if op.Kind == tir.OpProgramID || op.Kind == tir.OpNumPrograms {
			continue
		}
		for _, r := range op.Regions {
			r.Ops = removeGridOps(r.Ops)
		}
		out = append(out, op)
	}
	return out
}
