package passes

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/fac-compiler/fac/tir"
)

// Pipeline is a named list of passes from Table, run in its order, for one
// kind of module. Pipelines are data, so that a caller with other needs
// than the kernel compiler's runs its own list instead of disabling passes.
type Pipeline struct {
	Name   string
	Doc    string
	Passes []string // names from Table
}

// KernelPipeline is the whole Table: for attention kernels (flash_fwd,
// block_classify) compiled for a device.
var KernelPipeline = &Pipeline{
	Name:   "kernel",
	Doc:    "attention kernels (flash_fwd, block_classify): the whole pass table",
	Passes: Names(),
}

// MaskAnalysisPipeline is for a mask mod lowered alone, which the block-mask
// builders bound or evaluate: calls inlined, compile-time conditions folded,
// dead code removed. It has no kernel to specialize.
var MaskAnalysisPipeline = &Pipeline{
	Name:   "mask-analysis",
	Doc:    "a mask mod lowered alone, for the block-mask analyzer and evaluators",
	Passes: []string{"inline", "canonicalize", "cse", "dce"},
}

// Pipelines lists the named pipelines.
var Pipelines = []*Pipeline{KernelPipeline, MaskAnalysisPipeline}

// LookupPipeline returns the pipeline named name.
func LookupPipeline(name string) (*Pipeline, bool) {
	for _, p := range Pipelines {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// RunPipeline runs pipeline p on m. opts name passes of Table; disabling
// one that p does not run is allowed (and does nothing), printing after one
// is not.
func RunPipeline(m *tir.Module, p *Pipeline, opts Options) error { return p.run(m, opts, "") }

// Check reports what is wrong with p: an unknown or repeated pass, a
// required pass missing, or an order that breaks a constraint of Order.
func (p *Pipeline) Check() error {
	if p.Name == "" || len(p.Passes) == 0 {
		return fmt.Errorf("pipeline %q: a pipeline needs a name and passes", p.Name)
	}
	for i, name := range p.Passes {
		if _, ok := Lookup(name); !ok {
			return fmt.Errorf("pipeline %s: unknown pass %q (valid: %s)", p.Name, name, strings.Join(Names(), ", "))
		}
		if slices.Contains(p.Passes[:i], name) {
			return fmt.Errorf("pipeline %s: pass %s is listed twice", p.Name, name)
		}
	}
	for _, q := range Table {
		if q.Required && !slices.Contains(p.Passes, q.Name) {
			return fmt.Errorf("pipeline %s: lacks the required pass %s", p.Name, q.Name)
		}
	}
	if err := checkOrder(p.Passes); err != nil {
		return fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	return nil
}

// run runs p on m up to and including the pass named last ("" = all).
func (p *Pipeline) run(m *tir.Module, opts Options, last string) error {
	steps, err := p.plan(opts, last)
	if err != nil {
		return err
	}
	if opts.VerifyEach {
		// Blame the input, not the first pass, for IR that was already broken.
		if err := tir.Verify(m); err != nil {
			return fmt.Errorf("invalid IR before the first pass: %w", err)
		}
	}
	out := opts.Out
	if out == nil {
		out = os.Stderr
	}
	for _, s := range steps {
		if opts.Disable[s.Name] {
			continue
		}
		if err := runPass(m, s, opts.VerifyEach); err != nil {
			return err
		}
		if opts.PrintAfter == s.Name || opts.PrintAfter == "all" {
			fmt.Fprintf(out, "// -----// IR after %s //----- //\n%s", s.Name, m)
		}
	}
	return nil
}

// plan checks p, opts and last, and returns the passes to run up to and
// including last. Everything is checked before any pass runs, so that a
// bad flag fails loudly instead of running something else.
func (p *Pipeline) plan(opts Options, last string) ([]Pass, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	if err := checkNames(opts, last); err != nil {
		return nil, err
	}
	notIn := func(flag, name string) error {
		return fmt.Errorf("%s: pass %s is not in the %s pipeline (%s)", flag, name, p.Name, strings.Join(p.Passes, ", "))
	}
	if opts.PrintAfter != "" && opts.PrintAfter != "all" && !slices.Contains(p.Passes, opts.PrintAfter) {
		return nil, notIn("--print-ir-after", opts.PrintAfter)
	}
	n := len(p.Passes)
	if last != "" {
		if n = slices.Index(p.Passes, last) + 1; n == 0 {
			return nil, notIn("run until", last)
		}
	}
	steps := make([]Pass, n)
	for i, name := range p.Passes[:n] {
		steps[i], _ = Lookup(name)
	}
	for i, s := range steps {
		if s.Required && opts.Disable[s.Name] && slices.ContainsFunc(steps[i+1:], func(q Pass) bool { return !opts.Disable[q.Name] }) {
			return nil, fmt.Errorf("--disable-pass: %s is a required pass and cannot be disabled on its own "+
				"(disabling every pass from %s on stops the %s pipeline before it)", s.Name, s.Name, p.Name)
		}
	}
	return steps, nil
}
