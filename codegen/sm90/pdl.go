package sm90

import (
	"github.com/llir/llvm/ir/types"

	"github.com/fac-compiler/fac/codegen/core"
)

// Programmatic dependent launch (the kernel's pdl schedule argument):
// every thread first lets the next kernel on the stream launch, then
// waits until the previous kernel's writes are visible. Launched with
// the runtime's dependent-launch attribute (gpu.Kernel.launch), the
// kernel's programs may start while the previous kernel's last ones still
// run; launched without it, the wait returns at once.
const (
	asmLaunchDependents = "griddepcontrol.launch_dependents;"
	asmGridDepWait      = "griddepcontrol.wait;"
)

// pdlPrologue emits the dependent launch's two instructions at the
// kernel's start when it asks for them.
func pdlPrologue(l *core.Lowerer) {
	if on, _ := l.Func().Attr("pdl").(bool); !on {
		return
	}
	l.Asm(types.Void, asmLaunchDependents, "~{memory}", true)
	l.Asm(types.Void, asmGridDepWait, "~{memory}", true)
}
