// Package llc finds LLVM's llc with the NVPTX back end and uses it to turn
// LLVM IR text into PTX.
//
// fac emits textual LLVM IR and relies on an external llc (LLVM 19 or newer,
// for sm_90a and the intrinsics the kernels use) instead of linking LLVM, so
// the compiler stays pure Go. Find locates a suitable llc; Tool.Compile runs
// it and CheckPTX rejects PTX that llc produced from a misspelled intrinsic.
package llc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// MinMajor is the oldest LLVM major version accepted.
const MinMajor = 19

// maxMajor is the newest llc-NN / llvm-NN probed for.
const maxMajor = 30

// EnvLLC names the environment variable that overrides the search.
const EnvLLC = "FAC_LLC"

// libPattern is where Debian/Ubuntu apt.llvm.org packages put llc; a
// variable so tests can point it at a temporary directory.
var libPattern = "/usr/lib/llvm-%d/bin/llc"

// Tool is an llc binary known to support NVPTX.
type Tool struct {
	Path    string // absolute or PATH-resolved path of the binary
	Major   int    // LLVM major version, e.g. 22
	Version string // full version, e.g. "22.1.8"
}

func (t *Tool) String() string { return fmt.Sprintf("%s (LLVM %s)", t.Path, t.Version) }

var versionRE = regexp.MustCompile(`LLVM version (\d+)\.(\d+)(?:\.(\d+))?\S*`)

// ParseVersion extracts the LLVM version and whether the nvptx64 target is
// registered from the output of `llc --version`.
func ParseVersion(out string) (major int, version string, nvptx bool, err error) {
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		return 0, "", false, errors.New("no \"LLVM version\" line in llc --version output")
	}
	major, _ = strconv.Atoi(m[1])
	version = strings.TrimPrefix(m[0], "LLVM version ")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "nvptx64" {
			nvptx = true
		}
	}
	return major, version, nvptx, nil
}

// Probe runs `path --version` and returns the Tool if it is an llc with
// the NVPTX target and LLVM >= MinMajor.
func Probe(path string) (*Tool, error) {
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("cannot run: %v", err)
	}
	major, version, nvptx, err := ParseVersion(string(out))
	if err != nil {
		return nil, err
	}
	t := &Tool{Path: path, Major: major, Version: version}
	if major < MinMajor {
		return t, fmt.Errorf("LLVM %d: too old", major)
	}
	if !nvptx {
		return t, fmt.Errorf("LLVM %d: no nvptx64 target", major)
	}
	return t, nil
}

// candidates lists the paths to probe, in preference order for equal
// versions, without duplicates (resolving symlinks such as
// /usr/bin/llc-22 -> /usr/lib/llvm-22/bin/llc).
func candidates() []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return
		}
		if st, err := os.Stat(real); err != nil || st.IsDir() {
			return
		}
		if !seen[real] {
			seen[real] = true
			out = append(out, p)
		}
	}
	if p, err := exec.LookPath("llc"); err == nil {
		add(p)
	}
	for v := maxMajor; v >= MinMajor; v-- {
		if p, err := exec.LookPath(fmt.Sprintf("llc-%d", v)); err == nil {
			add(p)
		}
	}
	for v := maxMajor; v >= MinMajor; v-- {
		add(fmt.Sprintf(libPattern, v))
	}
	return out
}

// Find locates an llc usable for NVPTX. If FAC_LLC is set, only that path
// is considered (an explicit choice must not be silently replaced);
// otherwise `llc` and `llc-NN` on PATH and /usr/lib/llvm-NN/bin/llc are
// probed and the highest LLVM version wins (earlier candidates win ties).
func Find() (*Tool, error) {
	if p := os.Getenv(EnvLLC); p != "" {
		t, err := Probe(p)
		if err != nil {
			return nil, fmt.Errorf("%s=%s is not a usable llc: %v (need LLVM >= %d with the NVPTX target)", EnvLLC, p, err, MinMajor)
		}
		return t, nil
	}
	var best *Tool
	var tried []string
	for _, p := range candidates() {
		t, err := Probe(p)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", p, err))
			continue
		}
		if best == nil || t.Major > best.Major {
			best = t
		}
	}
	if best != nil {
		return best, nil
	}
	what := "no llc, llc-NN on PATH, no " + strings.Replace(libPattern, "%d", "NN", 1)
	if len(tried) > 0 {
		what = strings.Join(tried, ", ")
	}
	return nil, fmt.Errorf("no llc >= %d with the NVPTX target found (tried: %s); install one with: apt-get install -y llvm-22  (or set %s=/path/to/llc)", MinMajor, what, EnvLLC)
}

var archRE = regexp.MustCompile(`^sm_\d+[af]?$`)

// ptxFeature is the PTX ISA version requested per target. Targets not
// listed get llc's default for that CPU.
var ptxFeature = map[string]string{
	"sm_80":  "+ptx78",
	"sm_86":  "+ptx78",
	"sm_87":  "+ptx78",
	"sm_89":  "+ptx78",
	"sm_90":  "+ptx80",
	"sm_90a": "+ptx80",
}

// Args returns the llc command-line arguments Compile uses for arch.
// extraArgs come last, so a later -mattr (e.g. -mattr=+ptx86) overrides the
// default PTX version.
func Args(arch string, extraArgs ...string) []string {
	args := []string{"-O3", "-mtriple=nvptx64-nvidia-cuda", "-mcpu=" + arch}
	if f, ok := ptxFeature[arch]; ok {
		args = append(args, "-mattr="+f)
	}
	args = append(args, extraArgs...)
	return append(args, "-", "-o", "-")
}

// Compile runs llc on the LLVM IR text ll for the target arch (sm_80,
// sm_90, sm_90a, ...) and returns the PTX. llc's diagnostics are included
// in the error. The PTX is also checked with CheckPTX.
func (t *Tool) Compile(ctx context.Context, ll []byte, arch string, extraArgs ...string) ([]byte, error) {
	if !archRE.MatchString(arch) {
		return nil, fmt.Errorf("llc: invalid GPU arch %q (want e.g. sm_80, sm_90a)", arch)
	}
	cmd := exec.CommandContext(ctx, t.Path, Args(arch, extraArgs...)...)
	cmd.Stdin = bytes.NewReader(ll)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	msg := strings.TrimSpace(stderr.String())
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("llc: %w", ctx.Err())
		}
		return nil, fmt.Errorf("llc %s failed: %v\n%s", arch, err, msg)
	}
	// llc only warns about an unknown -mcpu or -mattr value and then
	// produces PTX for a default target; that would fail much later.
	if strings.Contains(msg, "is not a recognized") {
		return nil, fmt.Errorf("llc %s: %s", arch, firstLine(msg))
	}
	if err := CheckPTX(stdout.Bytes()); err != nil {
		return nil, err
	}
	return stdout.Bytes(), nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// CheckPTX reports PTX that declares external functions. llc turns a call
// to an unknown (e.g. misspelled) llvm.nvvm.* intrinsic into a call to an
// `.extern .func`, which only fails much later in ptxas or the driver JIT.
func CheckPTX(ptx []byte) error {
	var names []string
	for _, line := range strings.Split(string(ptx), "\n") {
		i := strings.Index(line, ".extern .func")
		if i < 0 {
			continue
		}
		names = append(names, externName(line[i+len(".extern .func"):]))
	}
	switch len(names) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("compiler error: PTX calls undefined function %s (misspelled intrinsic?)", names[0])
	default:
		return fmt.Errorf("compiler error: PTX calls undefined functions %s (misspelled intrinsics?)", strings.Join(names, ", "))
	}
}

// externName extracts the function name from the rest of an
// `.extern .func` line: an optional "(return params)" then the name.
func externName(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "(") {
		if j := strings.IndexByte(s, ')'); j >= 0 {
			s = strings.TrimSpace(s[j+1:])
		}
	}
	if j := strings.IndexAny(s, " \t(;"); j >= 0 {
		s = s[:j]
	}
	if s == "" {
		return "<unnamed>"
	}
	return s
}
