package gpu

import "github.com/fac-compiler/fac/runtime/cuda"

// Resources are what a loaded kernel uses per thread, as the driver's JIT
// (ptxas) allocated them: registers, and local memory (register spills and
// stack) in bytes.
func (k *Kernel) Resources() (regs, localBytes int, err error) {
	if regs, err = k.fn.Attribute(cuda.FuncAttrNumRegs); err != nil {
		return 0, 0, err
	}
	localBytes, err = k.fn.Attribute(cuda.FuncAttrLocalSizeBytes)
	return regs, localBytes, err
}
