package codegen

import (
	"os"

	"github.com/fac-compiler/fac/codegen/simt"
	"github.com/fac-compiler/fac/runtime/cpu"
)

// simKernel describes lowered kernel res to the simulator.
func simKernel(res *Result) *simt.Kernel {
	k := &simt.Kernel{Name: res.Name, Threads: res.Threads, SharedBytes: res.SharedBytes}
	for _, p := range res.Params {
		sp := simt.Param{Name: p.Name, Elem: p.Type.Elem, TMA: p.TMA}
		switch p.Kind {
		case ParamU64:
			sp.Kind = simt.Ptr
		case ParamI32:
			sp.Kind = simt.I32
		case ParamI64:
			sp.Kind = simt.I64
		case ParamF32:
			sp.Kind = simt.F32
		case ParamTensorMap:
			sp.Kind = simt.TensorMap
		}
		k.Params = append(k.Params, sp)
	}
	return k
}

// simSeeds are the scheduler seeds TestSimulate runs each case with: one,
// or four in the long tier (FAC_TEST_LONG=1, scripts/test --long), whose
// other interleavings of the warps may show a missing barrier.
func simSeeds() []int64 {
	if os.Getenv("FAC_TEST_LONG") != "" {
		return []int64{0, 1, 2, 3}
	}
	return []int64{0}
}

// simulate runs lowered kernel res on the SIMT simulator (codegen/simt).
func simulate(ll string, res *Result, grid [3]int, args []any, misalign bool) error {
	return simulateSeed(ll, res, grid, args, misalign, 0)
}

// simulateSeed is simulate with the scheduler's seed.
func simulateSeed(ll string, res *Result, grid [3]int, args []any, misalign bool, seed int64) error {
	var p *simt.Program
	var err error
	if res.Func != nil && ll == res.LL {
		p, err = simt.CompileFunc(res.Func, simKernel(res))
	} else {
		p, err = simt.Compile(ll, simKernel(res))
	}
	if err != nil {
		return err
	}
	// The simulator writes its results into the CPU buffers' slices.
	sargs := make([]any, len(args))
	for i, a := range args {
		sargs[i] = a
		if b, ok := a.(*cpu.Buffer); ok {
			sargs[i] = &simt.Buffer{Elem: b.Elem, Vals: b.Vals}
		}
	}
	return p.Run(grid, sargs, simt.Options{Misalign: misalign, Seed: seed})
}
