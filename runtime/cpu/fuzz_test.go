package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

// TestMutationsDoNotPanic breaks the sample module at random (operands
// swapped for other values, result shapes changed) and runs it: every
// outcome must be a result or an error, never a panic.
func TestMutationsDoNotPanic(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for it := 0; it < 3000; it++ {
		m := sampleModule()
		var ops []*tir.Op
		var vals []*tir.Value
		for _, f := range m.Funcs {
			vals = append(vals, f.Params...)
			f.Body.Walk(func(op *tir.Op) bool {
				ops = append(ops, op)
				vals = append(vals, op.Results...)
				for _, rg := range op.Regions {
					vals = append(vals, rg.Args...)
				}
				return true
			})
		}
		for range 1 + r.IntN(3) {
			op := ops[r.IntN(len(ops))]
			switch r.IntN(3) {
			case 0:
				if len(op.Args) > 0 {
					op.Args[r.IntN(len(op.Args))] = vals[r.IntN(len(vals))]
				}
			case 1:
				if len(op.Results) > 0 {
					res := op.Results[r.IntN(len(op.Results))]
					res.Type = vals[r.IntN(len(vals))].Type
				}
			case 2:
				for i := range op.Attrs {
					if v, ok := op.Attrs[i].Val.(int64); ok {
						op.Attrs[i].Val = v + int64(r.IntN(5)) - 2
					}
				}
			}
		}
		x, out := FromF32("x", make([]float32, 16)), NewBuffer("out", tir.F32, 8)
		// One program: mutated kernels may make programs store to one element.
		_ = Launch(m, "sample", [3]int{1, 1, 1}, x, out, 2)
	}
}
