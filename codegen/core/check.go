package core

import (
	"fmt"

	"github.com/fac-compiler/fac/tir"
)

// checkKernel rejects what codegen cannot lower, with a clear message:
// call ops left (the inline pass did not run), tensor dimensions that are
// not powers of two, tensor-typed kernel parameters.
func checkKernel(f *tir.Func) error {
	var err error
	check := func(v *tir.Value, op *tir.Op) {
		if err != nil {
			return
		}
		for _, d := range v.Type.Shape {
			if !isPow2(d) {
				where := "value"
				if op != nil {
					where = fmt.Sprintf("%s: result of %s", op.Pos, op.Kind)
				}
				err = fmt.Errorf("%s has shape %v: codegen needs power-of-two dimensions", where, v.Type.Shape)
				return
			}
		}
	}
	f.Body.Walk(func(op *tir.Op) bool {
		if op.Kind == tir.OpCall && err == nil {
			err = fmt.Errorf("%s: call to %s not inlined (run the inline pass before codegen)", op.Pos, op.IdentAttr("callee"))
		}
		for _, r := range op.Results {
			check(r, op)
		}
		for _, rg := range op.Regions {
			for _, a := range rg.Args {
				check(a, op)
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, p := range f.Params {
		if !p.Type.IsScalar() {
			return fmt.Errorf("kernel parameter %%%s: tensor parameters are not supported (pass pointers)", p.Name)
		}
	}
	return nil
}
