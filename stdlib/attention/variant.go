package attention

import "github.com/fac-compiler/fac/launch"

// Variant is one way the host runs attention: its kernels in launch order
// and what passes between them. The host (package flash) compiles, binds,
// runs on the CPU device, uploads and launches every variant's kernels the
// same way, from this value and the kernels' contracts; what stays the
// variant's own there is its calling convention (input types, plan,
// float64 reference), since those need the devices and the mods'
// evaluation, which sit above this package.
//
// A variant is declared in the Go file of its main kernel's contract and
// registered there (registerVariant), so a new one is its .fa files, that
// Go file and a test.
type Variant struct {
	// Name names the variant in errors and listings.
	Name string
	// Kernels are the variant's kernels in launch order for o, or why the
	// variant cannot run with o.
	Kernels func(o VariantOptions) ([]*launch.Contract, error)
	// Main is the index in Kernels of the kernel whose mods, block sizes
	// and aux tensors stand for the variant's (flash_bwd among the
	// backward's), and which takes the score's aux gradients.
	Main int
	// Lists, when set, are the per-sequence block-mask lists the kernels
	// read (built on the host from the sequence lengths: varlen, paged);
	// nil: one block mask of the call's shape, read through each kernel
	// contract's BlockMask (the kv lists, or flash_bwd's transposed ones).
	Lists *VarlenLists
	// Workspace are the buffers that pass from one kernel to a later one
	// (written by the first kernel that has the tensor), or between the
	// programs of one kernel (InPlace), f32 but for a kernel's Zeroed
	// counters (i32): a launch on device pointers takes them from the
	// caller's workspace, sized by the contracts and zeroed when it is
	// allocated.
	Workspace []string
	// InPlace: the main kernel reads back the workspace it wrote, merged
	// by the last of its programs to finish (last_arrival), instead of a
	// later kernel.
	InPlace bool
	// Results are the outputs a call returns (a benchmark checks them for
	// NaN).
	Results []string
}

// VariantOptions are the compile-time choices that change a variant's
// kernels.
type VariantOptions struct {
	// Sinks: learnable per-head sink logits join the softmax (the _sinks
	// kernels).
	Sinks bool
	// Deterministic: dQ without atomics (DETERMINISTIC=true).
	Deterministic bool
}

// Names are the kernel names of v for o ("" where v cannot run with o).
func (v *Variant) Names(o VariantOptions) []string {
	cs, err := v.Kernels(o)
	if err != nil {
		return nil
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Kernel
	}
	return out
}

// variants are the registered variants, in registration order.
var variants []*Variant

func registerVariant(v *Variant) { variants = append(variants, v) }

// Variants lists the registered variants.
func Variants() []*Variant { return variants }

// only is a Kernels function of fixed kernels.
func only(cs ...*launch.Contract) func(VariantOptions) ([]*launch.Contract, error) {
	return func(VariantOptions) ([]*launch.Contract, error) { return cs, nil }
}
