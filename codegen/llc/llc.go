// Package llc finds LLVM's llc with the NVPTX back end and uses it to turn
// LLVM IR text into PTX.
//
// fac emits textual LLVM IR and relies on an external llc (LLVM 19 or newer,
// for sm_90a and the intrinsics the kernels use) instead of linking LLVM, so
// the compiler stays pure Go. Find locates a suitable llc; Tool.Compile runs
// it under a timeout, ValidatePTX rejects output that is not PTX for the
// requested target and kernel, and CheckPTX rejects PTX that llc produced
// from a misspelled intrinsic.
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
	"time"
)

// MinMajor is the oldest LLVM major version accepted.
const MinMajor = 19

// maxMajor is the newest llc-NN / llvm-NN probed for.
const maxMajor = 30

// EnvLLC names the environment variable users set Config.Path with (read
// at the API boundary, not here).
const EnvLLC = "FAC_LLC"

// libPattern is where Debian/Ubuntu apt.llvm.org packages put llc; a
// variable so tests can point it at a temporary directory.
var libPattern = "/usr/lib/llvm-%d/bin/llc"

// EnvTimeout names the environment variable users set Config.Timeout with
// (ParseTimeout's form; read at the API boundary, not here).
const EnvTimeout = "FAC_LLC_TIMEOUT"

// DefaultTimeout bounds one llc run when Tool.Timeout is not set.
// flash_fwd takes about a second; a minute leaves room for a loaded
// machine while a hung llc still fails.
const DefaultTimeout = 60 * time.Second

// probeTimeout bounds `llc --version`, which is instant for a real llc; a
// variable so tests can shorten it.
var probeTimeout = 10 * time.Second

// Output limits: a misbehaving llc must not exhaust memory. flash_fwd's PTX
// is well under a megabyte.
const (
	maxPTX    = 256 << 20
	maxStderr = 1 << 20
)

// Tool is an llc binary known to support NVPTX.
type Tool struct {
	Path    string // absolute or PATH-resolved path of the binary
	Major   int    // LLVM major version, e.g. 22
	Version string // full version, e.g. "22.1.8"

	// Timeout bounds each Compile; llc (and anything it started) is killed
	// at the deadline. Zero means DefaultTimeout.
	Timeout time.Duration
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
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	out, _, err := run(ctx, path, nil, maxStderr, "--version")
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("--version did not finish within %v", probeTimeout)
		}
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

// Config says which llc to use and how long it may run; its zero value
// searches (Find) with DefaultTimeout. The API boundary fills it from the
// user's settings (FAC_LLC, FAC_LLC_TIMEOUT).
type Config struct {
	// Path, when set, is the only llc considered: an explicit choice must
	// not be silently replaced.
	Path string
	// Timeout, when positive, bounds each run of the tool (Tool.Timeout).
	Timeout time.Duration
}

// Find locates the llc c names, or searches for one as Find does, and
// gives it c's timeout.
func (c Config) Find() (*Tool, error) {
	var t *Tool
	if c.Path != "" {
		var err error
		if t, err = Probe(c.Path); err != nil {
			return nil, fmt.Errorf("%s is not a usable llc: %v (need LLVM >= %d with the NVPTX target; it was named, so no other is tried)", c.Path, err, MinMajor)
		}
	} else {
		var err error
		if t, err = search(); err != nil {
			return nil, err
		}
	}
	if c.Timeout > 0 {
		t.Timeout = c.Timeout
	}
	return t, nil
}

// Find locates an llc usable for NVPTX: `llc` and `llc-NN` on PATH and
// /usr/lib/llvm-NN/bin/llc are probed and the highest LLVM version wins
// (earlier candidates win ties). Config.Find takes an explicit path.
func Find() (*Tool, error) { return Config{}.Find() }

// search is Find's search.
func search() (*Tool, error) {
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
// listed get llc's default for that CPU. sm_90's is 8.1 (CUDA 12.1
// drivers and later), the first with vector reductions
// (red.global.add.v2/v4.f32, core.VectorReduceTarget).
var ptxFeature = map[string]string{
	"sm_80":  "+ptx78",
	"sm_86":  "+ptx78",
	"sm_87":  "+ptx78",
	"sm_89":  "+ptx78",
	"sm_90":  "+ptx81",
	"sm_90a": "+ptx81",
}

// Args returns the llc command-line arguments Compile uses for arch.
// extraArgs come last, so a later -mattr (e.g. -mattr=+ptx86) overrides the
// default PTX version.
func Args(arch string, extraArgs ...string) []string {
	// -fp-contract=fast: a multiply feeding one add becomes an FMA (as
	// Triton's enable_fp_fusion default and nvcc's -fmad=true); without it
	// NVPTX writes .rn on every mul and add, which forbids ptxas to fuse.
	// -nvptx-prec-divf32=1, -nvptx-prec-sqrtf32=0: f32 division is
	// div.full.f32 (2 ulp) and square root sqrt.approx.f32, Triton's
	// defaults. IEEE div.rn.f32 has an out-of-line slow path, and the
	// driver's JIT (which compiles through cuLink, as relocatable code)
	// then serializes every wgmma of the kernel (ptxas C7509, "due to the
	// presence of Extern calls"): the forward's final O / l alone cost it
	// its wgmma overlap.
	args := []string{"-O3", "-mtriple=nvptx64-nvidia-cuda", "-mcpu=" + arch, "-fp-contract=fast",
		"-nvptx-prec-divf32=1", "-nvptx-prec-sqrtf32=0"}
	if f, ok := ptxFeature[arch]; ok {
		args = append(args, "-mattr="+f)
	}
	args = append(args, extraArgs...)
	return append(args, "-", "-o", "-")
}

// Compile runs llc on the LLVM IR text ll for the target arch (sm_80,
// sm_90, sm_90a, ...) and returns the PTX. llc's diagnostics are included
// in the error. The output must be PTX for arch with at least one kernel
// (ValidatePTX) and is checked with CheckPTX. CompileEntry also checks the
// kernel's name.
func (t *Tool) Compile(ctx context.Context, ll []byte, arch string, extraArgs ...string) ([]byte, error) {
	return t.CompileEntry(ctx, ll, arch, "", extraArgs...)
}

// CompileEntry is Compile for a module whose PTX must define the kernel
// entry (the PTX .entry name, e.g. codegen's Result.Name); "" accepts any
// kernel. llc runs under the Tool's timeout and ctx, whichever ends first.
func (t *Tool) CompileEntry(ctx context.Context, ll []byte, arch, entry string, extraArgs ...string) ([]byte, error) {
	if !archRE.MatchString(arch) {
		return nil, fmt.Errorf("llc: invalid GPU arch %q (want e.g. sm_80, sm_90a)", arch)
	}
	timeout := t.timeout()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stdout, stderr, err := run(rctx, t.Path, ll, maxPTX, Args(arch, extraArgs...)...)
	msg := strings.TrimSpace(string(stderr))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("llc %s: %w", arch, ctx.Err())
		}
		if rctx.Err() != nil {
			return nil, fmt.Errorf("llc %s (%s) did not finish within %v and was killed; set %s to allow longer", arch, t.Path, timeout, EnvTimeout)
		}
		return nil, fmt.Errorf("llc %s failed: %v\n%s", arch, err, msg)
	}
	// llc only warns about an unknown -mcpu or -mattr value and then
	// produces PTX for a default target; that would fail much later.
	if strings.Contains(msg, "is not a recognized") {
		return nil, fmt.Errorf("llc %s: %s", arch, firstLine(msg))
	}
	if err := ValidatePTX(stdout, arch, entry); err != nil {
		return nil, err
	}
	if err := CheckPTX(stdout); err != nil {
		return nil, err
	}
	return stdout, nil
}

// timeout is the limit for one llc run: Tool.Timeout, else
// DefaultTimeout.
func (t *Tool) timeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return DefaultTimeout
}

// ParseTimeout reads a timeout as users write one (FAC_LLC_TIMEOUT): a Go
// duration ("90s", "5m") or a number of seconds ("120", "0.5"); it must
// be positive.
func ParseTimeout(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	d, err := time.ParseDuration(v)
	if err != nil {
		// A bare number is seconds, the unit people expect for a timeout.
		if secs, ferr := strconv.ParseFloat(v, 64); ferr == nil && secs < 1e9 {
			d, err = time.Duration(secs*float64(time.Second)), nil
		}
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a positive duration such as 60s, 5m or 120", v)
	}
	return d, nil
}

// run runs path with args and stdin, returning stdout (at most maxOut
// bytes, else an error) and the start of stderr. When ctx ends the process
// and everything it started are killed, and run returns soon after even if
// a leftover process still holds the output pipes.
func run(ctx context.Context, path string, stdin []byte, maxOut int, args ...string) (stdout, stderr []byte, err error) {
	cmd := exec.CommandContext(ctx, path, args...)
	killGroup(cmd)
	cmd.WaitDelay = time.Second
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, errOut := &capped{max: maxOut}, &capped{max: maxStderr}
	cmd.Stdout, cmd.Stderr = out, errOut
	err = cmd.Run()
	if err == nil && out.over {
		err = fmt.Errorf("output exceeds %d bytes", maxOut)
	}
	return out.buf.Bytes(), errOut.buf.Bytes(), err
}

// capped keeps the first max bytes written and drops the rest, still
// reporting success so the writer is not blocked on a full pipe.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:max(room, 0)])
		c.over = true
		return len(p), nil
	}
	return c.buf.Write(p)
}

var (
	versionLineRE = regexp.MustCompile(`^\.version\s+\d+\.\d+$`)
	entryRE       = regexp.MustCompile(`(?m)^[ \t]*(?:\.(?:visible|weak)[ \t]+)*\.entry[ \t]+([^\s(]+)`)
)

// ValidatePTX checks that ptx is what llc emits for arch: the header
// (.version, then .target naming arch, then .address_size 64, with only
// comments and blank lines before them) and a kernel .entry named entry, or
// any kernel if entry is "". It guards against an llc that exits 0 but
// prints something else, before that output is cached or loaded.
func ValidatePTX(ptx []byte, arch, entry string) error {
	if err := validatePTX(ptx, arch, entry); err != nil {
		return fmt.Errorf("llc produced invalid PTX: %v; output starts %q", err, head(ptx, 120))
	}
	return nil
}

func validatePTX(ptx []byte, arch, entry string) error {
	if len(bytes.TrimSpace(ptx)) == 0 {
		return errors.New("empty output")
	}
	var hdr []string
	for line := range strings.Lines(string(ptx)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		if hdr = append(hdr, line); len(hdr) == 3 {
			break
		}
	}
	for len(hdr) < 3 {
		hdr = append(hdr, "end of output")
	}
	if !versionLineRE.MatchString(hdr[0]) {
		return fmt.Errorf("want a .version line first, got %q", head([]byte(hdr[0]), 60))
	}
	if tgt, ok := strings.CutPrefix(hdr[1], ".target"); !ok || strings.TrimSpace(strings.Split(tgt, ",")[0]) != arch {
		return fmt.Errorf("want .target %s after .version, got %q", arch, head([]byte(hdr[1]), 60))
	}
	if f := strings.Fields(hdr[2]); len(f) != 2 || f[0] != ".address_size" || f[1] != "64" {
		return fmt.Errorf("want .address_size 64 after .target, got %q", head([]byte(hdr[2]), 60))
	}
	var names []string
	for _, m := range entryRE.FindAllSubmatch(ptx, -1) {
		name := string(m[1])
		if entry == "" || name == entry {
			return nil
		}
		names = append(names, name)
	}
	if entry == "" {
		return errors.New("no kernel (.entry)")
	}
	if len(names) == 0 {
		return fmt.Errorf("no .entry %s (no kernel at all)", entry)
	}
	return fmt.Errorf("no .entry %s (kernels: %s)", entry, strings.Join(names, ", "))
}

// head is the first n bytes of b, for messages.
func head(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
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
