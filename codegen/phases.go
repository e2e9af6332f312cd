package codegen

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fac-compiler/fac/codegen/core"
)

// Phase is one named step of a kernel's GPU lowering (see core.Phase).
type Phase = core.Phase

// Phases is the phase table of arch's target, in run order (empty arch:
// sm_80).
func Phases(arch string) ([]Phase, error) {
	if arch == "" {
		arch = "sm_80"
	}
	t, err := targetFor(TargetConfig{Arch: arch})
	if err != nil {
		return nil, err
	}
	return t.t.Phases(), nil
}

// PhaseNames lists the names of arch's phases in run order, nil for an
// arch codegen does not support. The names are what Options.PrintAfter
// and Options.Disable accept.
func PhaseNames(arch string) []string {
	ps, err := Phases(arch)
	if err != nil {
		return nil
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names
}

// phaseOrder lists ordering constraints between phases, as data (like Go's
// SSA passOrder): where both run, before runs first. TestPhaseOrder checks
// every target's table against it.
var phaseOrder = []struct{ before, after string }{
	// Rejections come before any work, with the clearest message.
	{"check-kernel", "select-async"},
	{"check-kernel", "assign-layouts"},
	// Staged loads get their copy layout during assignment.
	{"select-async", "assign-layouts"},
	{"stage-resident", "assign-layouts"},
	// A load select-async stages for its own block's dot is not resident.
	{"select-async", "stage-resident"},
	// Tiles are kept and sized from the assigned layouts.
	{"assign-layouts", "plan-async"},
	// The scratch area starts after the planned tiles.
	{"plan-async", "lower-llvm"},
	// Only the tiles plan-async kept are double-buffered, then re-placed.
	{"plan-async", "pipeline-loads"},
	{"pipeline-loads", "lower-llvm"},
	{"assign-layouts", "lower-llvm"},
	// It removes what lower-llvm emitted.
	{"lower-llvm", "remove-dead"},
}

// checkPhaseOptions rejects PrintAfter and Disable names the table does not
// have, and disabling a required phase.
func checkPhaseOptions(phases []Phase, opts Options) error {
	byName := map[string]Phase{}
	for _, p := range phases {
		byName[p.Name] = p
	}
	known := func() string {
		names := make([]string, len(phases))
		for i, p := range phases {
			names[i] = p.Name
		}
		return strings.Join(names, ", ")
	}
	var off []string
	for name, on := range opts.Disable {
		if on {
			off = append(off, name)
		}
	}
	sort.Strings(off)
	for _, name := range off {
		p, ok := byName[name]
		if !ok {
			return fmt.Errorf("codegen: cannot disable %q: no such phase for %s (phases: %s)", name, opts.Target.Arch, known())
		}
		if p.Required {
			return fmt.Errorf("codegen: cannot disable phase %s: it is required", name)
		}
	}
	if pa := opts.PrintAfter; pa != "" && pa != "all" {
		if _, ok := byName[pa]; !ok {
			return fmt.Errorf("codegen: cannot print after %q: no such phase for %s (phases: %s)", pa, opts.Target.Arch, known())
		}
		if opts.Disable[pa] {
			return fmt.Errorf("codegen: cannot print after %s: it is disabled", pa)
		}
	}
	return nil
}
