// Package passes is fac's pipeline over tile IR. As in Go's
// cmd/compile/internal/ssa/compile.go, passes are data: Table lists them in
// the order they run, one file per pass; Order lists the constraints on that
// order (order.go); Pipelines name the pass lists that run for each job
// (pipeline.go). Run drives the kernel pipeline, optionally printing or
// verifying the IR after each pass.
package passes

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/fac-compiler/fac/tir"
)

// Pass is one named transformation of a module.
type Pass struct {
	Name string
	Doc  string
	Run  func(m *tir.Module) error
	// TargetIndependent passes may run before the target is known (all of
	// today's passes are).
	TargetIndependent bool
	// Required passes cannot be disabled: what consumes the pipeline's
	// output (codegen, the block-mask analyzer) depends on their work, and
	// would otherwise fail later and less clearly. Every pipeline runs them.
	Required bool
}

// Table is the kernel pipeline, in order; Order says why it is in this order.
var Table = []Pass{
	{Name: "specialize-mask", Doc: "add a <kernel>.full variant of each masked kernel with the mask known true", Run: specializeMask, TargetIndependent: true},
	// Codegen cannot lower calls, nor can the block-mask analyzer bound them.
	{Name: "inline", Doc: "inline every call and delete functions no longer called", Run: inline, TargetIndependent: true, Required: true},
	{Name: "pad-dims", Doc: "compute tiles whose dimensions are not powers of two in the next power of two, the extra lanes masked off (loads, stores) or read as identities (reductions and dots over them)", Run: padDims, TargetIndependent: true},
	{Name: "persistent", Doc: "with persistent = true, run the kernel body in a loop over the logical grid's tiles, strided by the programs launched", Run: persistent, TargetIndependent: true},
	{Name: "canonicalize", Doc: "fold constants and exact algebraic identities, take constant ifs", Run: canonicalize, TargetIndependent: true},
	{Name: "cse", Doc: "eliminate common subexpressions of pure ops, scoped by region", Run: cse, TargetIndependent: true},
	{Name: "sink-select", Doc: "move a select of a mask tile an if yields into the if's branches, so no i1 tile joins after it", Run: sinkSelect, TargetIndependent: true},
	{Name: "mask-range", Doc: "rewrite a masked select's conditions bounding the column by row values (causal, windows, the sequence end) into one per-row range [lo, hi) on the tile's column index", Run: maskRange, TargetIndependent: true},
	{Name: "fold-scale", Doc: "with fold_scale = true, multiply by the softmax scale in the factors the scores meet (exp2's log2(e), the row max's) instead of score by score", Run: foldScale, TargetIndependent: true},
	{Name: "fuse-dot-acc", Doc: "accumulate an add of a dot with a zero accumulator in the dot (dot(a, b, 0) + x -> dot(a, b, x))", Run: fuseDotAcc, TargetIndependent: true},
	{Name: "overlap-softmax", Doc: "with overlap = true, move a loop's accumulating dot to the next iteration, so the next block's softmax runs while it does", Run: overlapSoftmax, TargetIndependent: true},
	{Name: "persistent-prefetch", Doc: "in a persistent kernel, load the next tile's scalar header (block counts) during the current tile, carried into the next iteration", Run: persistentPrefetch, TargetIndependent: true},
	{Name: "dce", Doc: "remove unused pure ops and unused loop-carried and if results", Run: dce, TargetIndependent: true},
}

// Options control a pipeline run.
type Options struct {
	// Disable skips passes (--disable-pass=NAME). A Required pass may only
	// be disabled with every pass after it: that cuts the pipeline short,
	// as RunUntil does, to look at or interpret unfinished IR.
	Disable    map[string]bool
	PrintAfter string    // --print-ir-after=NAME|all: print the module after that pass to Out
	Out        io.Writer // defaults to os.Stderr
	VerifyEach bool      // run tir.Verify after every pass
}

// Lookup returns the pass named name.
func Lookup(name string) (Pass, bool) {
	for _, p := range Table {
		if p.Name == name {
			return p, true
		}
	}
	return Pass{}, false
}

// Names lists the pass names in pipeline order.
func Names() []string {
	names := make([]string, len(Table))
	for i, p := range Table {
		names[i] = p.Name
	}
	return names
}

// Run runs the kernel pipeline (the whole Table) on m.
func Run(m *tir.Module, opts Options) error { return KernelPipeline.run(m, opts, "") }

// RunUntil runs the kernel pipeline on m up to and including the pass named
// last (the whole pipeline when last is ""). A disabled last pass is not
// run, but the passes before it are.
func RunUntil(m *tir.Module, opts Options, last string) error {
	return KernelPipeline.run(m, opts, last)
}

// runPass runs one pass, turning a failure into an internal compiler error:
// passes only see IR that verified, so any failure is the compiler's bug.
func runPass(m *tir.Module, p Pass, verify bool) error {
	if err := p.Run(m); err != nil {
		return fmt.Errorf("internal compiler error: pass %s failed on %s: %w", p.Name, funcNames(m, nil), err)
	}
	if !verify {
		return nil
	}
	err := tir.Verify(m)
	if err == nil {
		return nil
	}
	// Name the functions that fail on their own; a module-level failure
	// (duplicate names) names all kernels.
	var broken []*tir.Func
	for _, f := range m.Funcs {
		if tir.VerifyFunc(m, f) != nil {
			broken = append(broken, f)
		}
	}
	// The verifier's message carries its own "verify:" after a position;
	// put one in front instead.
	msg := strings.Replace(err.Error(), "verify: ", "", 1)
	return fmt.Errorf("internal compiler error: pass %s broke the IR of %s: verify: %s", p.Name, funcNames(m, broken), msg)
}

// funcNames names fs for an error ("kernel flash_fwd", "kernels a, b",
// "func mask"), or, when fs is empty, all of m's kernels, or all of its
// functions if it has none (a mod lowered alone).
func funcNames(m *tir.Module, fs []*tir.Func) string {
	if len(fs) == 0 {
		for _, f := range m.Funcs {
			if f.Kernel {
				fs = append(fs, f)
			}
		}
	}
	if len(fs) == 0 {
		fs = m.Funcs
	}
	if len(fs) == 0 {
		return "an empty module"
	}
	var names []string
	kernels := true
	for _, f := range fs {
		names = append(names, f.Name)
		kernels = kernels && f.Kernel
	}
	kw := "func"
	if kernels {
		kw = "kernel"
	}
	if len(names) > 1 {
		kw += "s"
	}
	return kw + " " + strings.Join(names, ", ")
}

// checkNames rejects unknown pass names up front, so a typo in a flag
// fails loudly instead of silently running the default pipeline.
func checkNames(opts Options, last string) error {
	check := func(flag, name string) error {
		if _, ok := Lookup(name); !ok {
			return fmt.Errorf("%s: unknown pass %q (valid: %s)", flag, name, strings.Join(Names(), ", "))
		}
		return nil
	}
	// Sorted so the first error reported is deterministic.
	for _, name := range slices.Sorted(maps.Keys(opts.Disable)) {
		if err := check("--disable-pass", name); err != nil {
			return err
		}
	}
	if opts.PrintAfter != "" && opts.PrintAfter != "all" {
		if err := check("--print-ir-after", opts.PrintAfter); err != nil {
			return err
		}
	}
	if last != "" {
		return check("run until", last)
	}
	return nil
}
