package core

// Phase is one named step of a kernel's GPU lowering, in the manner of Go's
// SSA passes: targets list their phases in a table (Target.Phases), a
// driver runs them in order, and the names are the handles for printing
// the IR after a phase or disabling an optional one.
type Phase struct {
	Name string
	Doc  string
	// Required phases cannot be disabled: later phases rely on what they
	// produce.
	Required bool
	Run      func(*Lowerer) error
}

// Run runs phase p on l; a Fail inside it becomes the returned error.
func (l *Lowerer) Run(p Phase) (err error) {
	defer func() {
		if r := recover(); r != nil {
			le, ok := r.(lowerError)
			if !ok {
				panic(r)
			}
			err = le
		}
	}()
	return p.Run(l)
}

// The phases every target shares. A target's table puts its own phases
// (e.g. sm80's select-async) between them.
var (
	CheckKernel = Phase{
		Name:     "check-kernel",
		Doc:      "reject what codegen cannot lower: calls left (inline first), non-power-of-two shapes, tensor parameters",
		Required: true,
		Run:      func(l *Lowerer) error { return checkKernel(l.f) },
	}
	AssignLayouts = Phase{
		Name:     "assign-layouts",
		Doc:      "give every tensor value a layout: primary layouts forward, wanted layouts and conversions backward",
		Required: true,
		Run: func(l *Lowerer) error {
			l.layouts = assignLayouts(l)
			return nil
		},
	}
	PlanAsync = Phase{
		Name:     "plan-async",
		Doc:      "keep the staged loads whose dot reads them from shared memory and place their tiles at its start",
		Required: true,
		Run: func(l *Lowerer) error {
			l.plan.planAsync()
			return nil
		},
	}
	LowerLLVM = Phase{
		Name:     "lower-llvm",
		Doc:      "emit the kernel as LLVM IR for the NVPTX back end",
		Required: true,
		Run: func(l *Lowerer) error {
			l.Emitter = newEmitter(l)
			l.Emitter.lowerKernel()
			return nil
		},
	}
)
