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
	new       func(arch string) core.Target
}{
	{"sm90", 90, 90, 227 << 10, func(arch string) core.Target { return sm90.New(arch) }},
	// A100's 163 KiB; sm_86/89 parts have less, which the load reports.
	{"sm80", 80, 1 << 30, 163 << 10, func(string) core.Target { return sm80.Target{} }},
}

var archRE = regexp.MustCompile(`^sm_(\d+)[af]?$`)

type target struct {
	name      string
	t         core.Target
	maxShared int
}

func targetFor(arch string) (target, error) {
	am := archRE.FindStringSubmatch(arch)
	if am == nil {
		return target{}, fmt.Errorf("codegen: bad arch %q (want sm_80, sm_90a, ...)", arch)
	}
	n, _ := strconv.Atoi(am[1])
	for _, r := range archTargets {
		if n >= r.min && n <= r.max {
			return target{r.name, r.new(arch), r.maxShared}, nil
		}
	}
	return target{}, fmt.Errorf("codegen: arch %s not supported: need sm_80 or newer (bf16 mma, cvt.rn.bf16)", arch)
}

// Target is the name of the target package that lowers for arch ("sm80",
// "sm90"); empty arch means sm_80.
func Target(arch string) (string, error) {
	if arch == "" {
		arch = "sm_80"
	}
	t, err := targetFor(arch)
	return t.name, err
}

// Variant names the code-shaping choices for arch that come from outside a
// compile's inputs (wgmma on sm_90a, which FAC_WGMMA=0 turns off, and TMA staging with
// it, which FAC_TMA=0 turns off: "wgmma-cpasync", or FAC_TMA=barrier keeps on a CTA barrier
// per iteration: "wgmma-tmabarrier", or FAC_DQ_BULK=1 adds f32 tiles through shared memory in bulk:
// "wgmma-dqbulk"; FAC_TMA_STORE=1, TMA stores of stored tiles, adds
// "-tmastore" to any of the TMA ones: "wgmma-tmastore"; FAC_CTAS_PER_SM=n, n CTAs a
// multiprocessor, adds "-ctas<n>" to any), so that kernels built with
// and without them never share a cache entry or a bundle slot; "" when none.
func Variant(arch string) string {
	if t, err := targetFor(arch); err == nil {
		if s, ok := t.t.(*sm90.Target); ok && s.WGMMA {
			v := "wgmma"
			switch {
			case !s.TMA:
				v = "wgmma-cpasync"
			case !s.Release:
				v = "wgmma-tmabarrier"
			case s.DQBulk:
				v = "wgmma-dqbulk"
			}
			if s.TMAStore {
				v += "-tmastore"
			}
			if s.CTAs > 1 {
				v += fmt.Sprintf("-ctas%d", s.CTAs)
			}
			return v
		}
	}
	return ""
}
