package compiler

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/fac-compiler/fac/codegen"
)

// KnownArchs are the GPU archs fac builds for: NVIDIA's names from sm_80
// on, as LLVM's NVPTX back end (llc 22) knows them. codegen's arch table
// serves each of them (codegen.Target); a name outside this list (sm_1000,
// sm_75) is refused before llc sees it, which otherwise aborts with a
// stack dump or makes code for a GPU that does not exist.
var KnownArchs = []string{
	"sm_80", "sm_86", "sm_87", "sm_88", "sm_89",
	"sm_90", "sm_90a",
	"sm_100", "sm_100a", "sm_100f", "sm_101", "sm_101a", "sm_101f", "sm_103", "sm_103a", "sm_103f",
	"sm_110", "sm_110a", "sm_110f",
	"sm_120", "sm_120a", "sm_120f", "sm_121", "sm_121a", "sm_121f",
}

var archNameRE = regexp.MustCompile(`^sm_(\d+)([af]?)$`)

// CheckArch checks a GPU arch against the targets fac has (issue 46 item
// 11). A known arch gives no error, and fallback says, when the arch runs
// another arch's code path rather than its own, which one ("" for sm_80
// and sm_90a, whose paths fac was written for): sm_86 to sm_89 and every
// arch past Hopper run sm_80's mma.sync path, sm_90 runs Hopper's target
// without wgmma and TMA, which are sm_90a's.
func CheckArch(arch string) (fallback string, err error) {
	m := archNameRE.FindStringSubmatch(arch)
	if m == nil {
		return "", fmt.Errorf("GPU arch %q: want sm_NN, e.g. %s", arch, archList())
	}
	if !slices.Contains(KnownArchs, arch) {
		n, _ := strconv.Atoi(m[1])
		why := "no such GPU"
		if n < 80 {
			why = "fac needs sm_80 or newer (bf16 mma.sync, cp.async)"
		}
		return "", fmt.Errorf("GPU arch %s: %s; known: %s", arch, why, archList())
	}
	t, err := codegen.Target(arch)
	if err != nil {
		return "", err
	}
	if (codegen.TargetConfig{Arch: arch}).WGMMA() || arch == "sm_80" {
		return "", nil
	}
	if t == "sm90" {
		return fmt.Sprintf("%s runs without wgmma and TMA, which need sm_90a: mma.sync and cp.async, as on sm_80 (an H100 or H200 is sm_90a)", arch), nil
	}
	return fmt.Sprintf("%s has no code path of its own: it runs sm_80's (mma.sync tensor cores, cp.async; target %s), not its own GPU's newer instructions", arch, t), nil
}

// archList is KnownArchs for an error message.
func archList() string { return strings.Join(KnownArchs, ", ") }
