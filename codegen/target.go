package codegen

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/codegen/sm80"
	"github.com/fac-compiler/fac/codegen/sm90"
)

// archTargets picks the target of an arch sm_NN[a|f] by NN: the first row
// whose range holds it. This package imports the targets directly (they
// import core, never this package), so no registration is needed.
// Archs past Hopper use sm80's mma.sync path, which they all run; wgmma
// is sm_90a-only.
var archTargets = []struct {
	name      string // the target package
	min, max  int    // SM numbers served, inclusive
	maxShared int    // bytes of shared memory a CTA may have (opt-in) on the largest part
	new       func(cfg TargetConfig) core.Target
}{
	{"sm90", 90, 90, 227 << 10, func(cfg TargetConfig) core.Target { return sm90.New(cfg) }},
	// A100's 163 KiB; sm_86/89 parts have less, which the load reports.
	{"sm80", 80, 1 << 30, 163 << 10, func(TargetConfig) core.Target { return sm80.Target{} }},
}

var archRE = regexp.MustCompile(`^sm_(\d+)[af]?$`)

type target struct {
	name      string
	t         core.Target
	maxShared int
}

// targetFor makes the target of cfg's arch, with cfg's switches.
func targetFor(cfg TargetConfig) (target, error) {
	am := archRE.FindStringSubmatch(cfg.Arch)
	if am == nil {
		return target{}, fmt.Errorf("codegen: bad arch %q (want sm_80, sm_90a, ...)", cfg.Arch)
	}
	n, _ := strconv.Atoi(am[1])
	for _, r := range archTargets {
		if n >= r.min && n <= r.max {
			return target{r.name, r.new(cfg), r.maxShared}, nil
		}
	}
	return target{}, fmt.Errorf("codegen: arch %s not supported: need sm_80 or newer (bf16 mma, cvt.rn.bf16)", cfg.Arch)
}

// Target is the name of the target package that lowers for arch ("sm80",
// "sm90"); empty arch means sm_80.
func Target(arch string) (string, error) {
	if arch == "" {
		arch = "sm_80"
	}
	t, err := targetFor(TargetConfig{Arch: arch})
	return t.name, err
}
