package lang

import "github.com/fac-compiler/fac/tir"

// lastArrival lowers last_arrival(counter, n): true in the last of the n
// programs that call it on counter (one ptr[i32], zero before the first
// arrives), which then sees the stores every one of them made before its
// call and sets the counter back to 0 (tir.OpLastArrival). A reduction
// across programs merges in that program, with no second launch.
func (l *lowerer) lastArrival(ca *CallArgs) val {
	a := l.bindArgs("last_arrival", ca, []string{"counter", "n"}, 2)
	l.kernelOnly("last_arrival", ca.Pos)
	c := a["counter"]
	if c.v == nil || !c.v.Type.Equal(tir.PtrTo(tir.I32)) {
		l.fail(c.pos, "last_arrival's counter must be one ptr[i32] (a scalar pointer), got %s", c.describe())
	}
	nv := a["n"]
	if nv.c != nil && nv.c.Kind == CInt && nv.c.I < 1 {
		l.fail(nv.pos, "last_arrival's n must be at least 1 (the programs that arrive), got %d", nv.c.I)
	}
	if nv.v != nil && !nv.v.Type.Equal(tir.Scalar(tir.I32)) {
		l.fail(nv.pos, "last_arrival's n must be an i32 scalar (the programs that arrive), got %s", nv.describe())
	}
	n := l.materialize(nv, tir.I32)
	return val{v: l.b.LastArrival(c.v, n), pos: ca.Pos}
}
