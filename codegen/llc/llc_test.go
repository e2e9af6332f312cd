package llc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const debian22 = `Debian LLVM version 22.1.8
  Optimized build.
  Default target: x86_64-pc-linux-gnu
  Host CPU: znver5

  Registered Targets:
    amdgcn      - AMD GCN GPUs
    nvptx       - NVIDIA PTX 32-bit
    nvptx64     - NVIDIA PTX 64-bit
    x86-64      - 64-bit X86: EM64T and AMD64
`

const upstream19 = `LLVM (http://llvm.org/):
  LLVM version 19.1.7
  Optimized build.
  Default target: x86_64-unknown-linux-gnu

  Registered Targets:
    nvptx64    - NVIDIA PTX 64-bit
`

const noNVPTX = `Ubuntu LLVM version 21.0.0git
  Registered Targets:
    x86-64      - 64-bit X86: EM64T and AMD64
`

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		out     string
		major   int
		version string
		nvptx   bool
	}{
		{debian22, 22, "22.1.8", true},
		{upstream19, 19, "19.1.7", true},
		{noNVPTX, 21, "21.0.0git", false},
	} {
		major, version, nvptx, err := ParseVersion(tc.out)
		if err != nil || major != tc.major || version != tc.version || nvptx != tc.nvptx {
			t.Errorf("ParseVersion(%.20q) = %d, %q, %v, %v; want %d, %q, %v", tc.out, major, version, nvptx, err, tc.major, tc.version, tc.nvptx)
		}
	}
	if _, _, _, err := ParseVersion("clang version 3"); err == nil {
		t.Error("ParseVersion accepted output without a version line")
	}
}

// fakeLLC writes an executable script printing a --version text. It uses
// only shell builtins because tests run with PATH limited to a temp dir.
func fakeLLC(t *testing.T, path string, major int, nvptx bool) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	targets := "    x86-64 - 64-bit X86"
	if nvptx {
		targets += "\n    nvptx64 - NVIDIA PTX 64-bit"
	}
	script := fmt.Sprintf("#!/bin/sh\necho 'Debian LLVM version %d.1.0'\necho '  Registered Targets:'\necho '%s'\n", major, targets)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// fakeEnv points PATH and libPattern at fresh temp dirs.
func fakeEnv(t *testing.T) (bin, lib string) {
	t.Helper()
	bin, lib = t.TempDir(), t.TempDir()
	t.Setenv("PATH", bin)
	old := libPattern
	libPattern = filepath.Join(lib, "llvm-%d", "bin", "llc")
	t.Cleanup(func() { libPattern = old })
	return bin, lib
}

func TestFindPrefersHighest(t *testing.T) {
	bin, lib := fakeEnv(t)
	fakeLLC(t, filepath.Join(bin, "llc"), 14, true)
	fakeLLC(t, filepath.Join(bin, "llc-19"), 19, true)
	fakeLLC(t, filepath.Join(bin, "llc-21"), 21, false)
	fakeLLC(t, filepath.Join(lib, "llvm-22", "bin", "llc"), 22, true)
	// A symlink to an already-seen binary must not be probed twice.
	if err := os.Symlink(filepath.Join(lib, "llvm-22", "bin", "llc"), filepath.Join(bin, "llc-22")); err != nil {
		t.Fatal(err)
	}

	got := candidates()
	want := []string{
		filepath.Join(bin, "llc"),
		filepath.Join(bin, "llc-22"),
		filepath.Join(bin, "llc-21"),
		filepath.Join(bin, "llc-19"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("candidates() = %q\nwant %q", got, want)
	}

	tool, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	if tool.Major != 22 || tool.Path != filepath.Join(bin, "llc-22") || tool.Version != "22.1.0" {
		t.Errorf("Find() = %+v, want LLVM 22 at %s/llc-22", tool, bin)
	}

	os.Remove(filepath.Join(bin, "llc-22"))
	os.RemoveAll(filepath.Join(lib, "llvm-22"))
	if tool, err = Find(); err != nil || tool.Major != 19 {
		t.Errorf("without 22: Find() = %+v, %v; want LLVM 19", tool, err)
	}
}

func TestFindPath(t *testing.T) {
	bin, lib := fakeEnv(t)
	fakeLLC(t, filepath.Join(lib, "llvm-22", "bin", "llc"), 22, true)
	fakeLLC(t, filepath.Join(bin, "my-llc"), 20, true)
	tool, err := Config{Path: filepath.Join(bin, "my-llc"), Timeout: time.Second}.Find()
	if err != nil || tool.Major != 20 || tool.Timeout != time.Second {
		t.Fatalf("Config.Find with a path = %+v, %v; want the LLVM 20 override with its timeout", tool, err)
	}

	fakeLLC(t, filepath.Join(bin, "old-llc"), 18, true)
	if _, err := (Config{Path: filepath.Join(bin, "old-llc")}).Find(); err == nil || !strings.Contains(err.Error(), "too old") {
		t.Errorf("Config.Find with an old llc named: err = %v, want 'too old'", err)
	}
}

func TestFindNone(t *testing.T) {
	bin, _ := fakeEnv(t)
	_, err := Find()
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y llvm-22") {
		t.Errorf("Find() with nothing installed: err = %v", err)
	}

	fakeLLC(t, filepath.Join(bin, "llc"), 14, true)
	fakeLLC(t, filepath.Join(bin, "llc-20"), 20, false)
	_, err = Find()
	for _, want := range []string{"llc (LLVM 14: too old)", "llc-20 (LLVM 20: no nvptx64 target)", "FAC_LLC="} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Find() err = %v, want it to mention %q", err, want)
		}
	}
}

func TestArgs(t *testing.T) {
	got := strings.Join(Args("sm_90a", "-mattr=+ptx86"), " ")
	want := "-O3 -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90a -fp-contract=fast -nvptx-prec-divf32=1 -nvptx-prec-sqrtf32=0 -mattr=+ptx81 -mattr=+ptx86 - -o -"
	if got != want {
		t.Errorf("Args = %q, want %q", got, want)
	}
	if got := strings.Join(Args("sm_80"), " "); !strings.Contains(got, "-mattr=+ptx78") {
		t.Errorf("Args(sm_80) = %q, want +ptx78", got)
	}
}

func TestCheckPTX(t *testing.T) {
	good := ".version 8.0\n.target sm_90a\n.visible .entry k(\n)\n{\n\tret;\n}\n"
	if err := CheckPTX([]byte(good)); err != nil {
		t.Errorf("CheckPTX(good) = %v", err)
	}
	bad := `.version 8.0
.target sm_90a
.extern .func  (.param .b32 func_retval0) llvm.nvvm.ex2.aprox.f
(
	.param .b32 llvm.nvvm.ex2.aprox.f_param_0
)
;
`
	err := CheckPTX([]byte(bad))
	want := "compiler error: PTX calls undefined function llvm.nvvm.ex2.aprox.f (misspelled intrinsic?)"
	if err == nil || err.Error() != want {
		t.Errorf("CheckPTX(bad) = %v, want %q", err, want)
	}
	two := bad + ".extern .func llvm.nvvm.foo\n()\n;\n"
	if err := CheckPTX([]byte(two)); err == nil || !strings.Contains(err.Error(), "llvm.nvvm.ex2.aprox.f, llvm.nvvm.foo") {
		t.Errorf("CheckPTX(two) = %v", err)
	}
}

// addOne is a tiny kernel: p[i] += 1 for i < n. It uses LLVM 14 typed
// pointers, which is what github.com/llir/llvm prints.
const addOne = `
define void @add_one(float addrspace(1)* %p, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %b = mul i32 %ctaid, %ntid
  %i = add i32 %b, %tid
  %c = icmp slt i32 %i, %n
  br i1 %c, label %body, label %exit
body:
  %ix = sext i32 %i to i64
  %q = getelementptr float, float addrspace(1)* %p, i64 %ix
  %v = load float, float addrspace(1)* %q
  %w = fadd float %v, 1.0
  store float %w, float addrspace(1)* %q
  br label %exit
exit:
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*, i32)* @add_one, !"kernel", i32 1}
`

const misspelled = `
define void @k(float addrspace(1)* %p) {
  %v = call float @llvm.nvvm.ex2.aprox.f(float 1.0)
  store float %v, float addrspace(1)* %p
  ret void
}
declare float @llvm.nvvm.ex2.aprox.f(float)
!nvvm.annotations = !{!0}
!0 = !{void (float addrspace(1)*)* @k, !"kernel", i32 1}
`

func realTool(t *testing.T) *Tool {
	t.Helper()
	tool, err := Find()
	if err != nil {
		t.Skip(err)
	}
	t.Logf("using %s", tool)
	return tool
}

func TestCompile(t *testing.T) {
	tool := realTool(t)
	ctx := context.Background()
	for arch, version := range map[string]string{"sm_80": ".version 7.8", "sm_90": ".version 8.1", "sm_90a": ".version 8.1"} {
		ptx, err := tool.Compile(ctx, []byte(addOne), arch)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		s := string(ptx)
		for _, want := range []string{version, ".target " + arch, ".entry add_one", "add.f32"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s: PTX lacks %q:\n%s", arch, want, s)
			}
		}
	}

	if _, err := tool.CompileEntry(ctx, []byte(addOne), "sm_90a", "add_one"); err != nil {
		t.Errorf("CompileEntry(add_one): %v", err)
	}
	if _, err := tool.CompileEntry(ctx, []byte(addOne), "sm_90a", "flash_fwd"); err == nil || !strings.Contains(err.Error(), "no .entry flash_fwd (kernels: add_one)") {
		t.Errorf("CompileEntry(flash_fwd) of add_one: err = %v", err)
	}

	ptx, err := tool.Compile(ctx, []byte(addOne), "sm_90a", "-mattr=+ptx86")
	if err != nil || !strings.Contains(string(ptx), ".version 8.6") {
		t.Errorf("-mattr=+ptx86 override: err %v, PTX:\n%s", err, ptx)
	}

	_, err = tool.Compile(ctx, []byte(misspelled), "sm_90a")
	if err == nil || !strings.Contains(err.Error(), "undefined function llvm.nvvm.ex2.aprox.f") {
		t.Errorf("misspelled intrinsic: err = %v", err)
	}

	_, err = tool.Compile(ctx, []byte("garbage"), "sm_90a")
	if err == nil || !strings.Contains(err.Error(), "expected top-level entity") {
		t.Errorf("bad IR: err = %v, want llc's diagnostic", err)
	}

	_, err = tool.Compile(ctx, []byte(addOne), "sm_99")
	if err == nil || !strings.Contains(err.Error(), "not a recognized processor") {
		t.Errorf("unknown arch: err = %v", err)
	}
	if _, err := tool.Compile(ctx, []byte(addOne), "sm_90; rm"); err == nil {
		t.Error("malformed arch accepted")
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := tool.Compile(cctx, []byte(addOne), "sm_90a"); err == nil {
		t.Error("Compile with a cancelled context succeeded")
	}
}

// fakeCompiler writes an llc that passes Probe (LLVM 22 with NVPTX) and
// runs the shell body for any other invocation, and returns its Tool.
func fakeCompiler(t *testing.T, body string) *Tool {
	t.Helper()
	path := filepath.Join(t.TempDir(), "llc")
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then\n  echo 'Debian LLVM version 22.1.0'\n  echo '  Registered Targets:'\n  echo '    nvptx64 - NVIDIA PTX 64-bit'\n  exit 0\nfi\n" + body + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	tool, err := Probe(path)
	if err != nil {
		t.Fatalf("fake llc fails the version check: %v", err)
	}
	return tool
}

// printPTX is a fake llc body printing ptx.
func printPTX(ptx string) string {
	return "cat <<'EOF'\n" + ptx + "EOF"
}

const fakeHeader = "//\n// Generated by LLVM NVPTX Back-End\n//\n\n.version 8.0\n.target sm_90a\n.address_size 64\n\n"

func TestCompileRejectsGarbage(t *testing.T) {
	tool := fakeCompiler(t, "echo 'Segmentation fault (core dumped), sorry'")
	_, err := tool.Compile(context.Background(), []byte(addOne), "sm_90a")
	if err == nil || !strings.Contains(err.Error(), "llc produced invalid PTX") || !strings.Contains(err.Error(), "Segmentation fault") {
		t.Errorf("garbage from llc: err = %v, want invalid PTX with the first bytes", err)
	}
	tool = fakeCompiler(t, "exit 0")
	if _, err := tool.Compile(context.Background(), []byte(addOne), "sm_90a"); err == nil || !strings.Contains(err.Error(), "empty output") {
		t.Errorf("empty output from llc: err = %v", err)
	}
}

func TestCompileEntryChecksKernel(t *testing.T) {
	ctx := context.Background()
	tool := fakeCompiler(t, printPTX(fakeHeader+".visible .entry other(\n)\n{\n\tret;\n}\n"))
	_, err := tool.CompileEntry(ctx, []byte(addOne), "sm_90a", "flash_fwd")
	if err == nil || !strings.Contains(err.Error(), "llc produced invalid PTX: no .entry flash_fwd (kernels: other)") {
		t.Errorf("PTX without the entry: err = %v", err)
	}
	if ptx, err := tool.CompileEntry(ctx, []byte(addOne), "sm_90a", "other"); err != nil || !strings.Contains(string(ptx), ".entry other") {
		t.Errorf("PTX with the entry: %v", err)
	}
	if _, err := tool.Compile(ctx, []byte(addOne), "sm_90a"); err != nil {
		t.Errorf("Compile (any entry): %v", err)
	}
	if _, err := tool.Compile(ctx, []byte(addOne), "sm_80"); err == nil || !strings.Contains(err.Error(), "want .target sm_80") {
		t.Errorf("PTX for another target: err = %v", err)
	}

	tool = fakeCompiler(t, printPTX(fakeHeader+".visible .func helper()\n{\n\tret;\n}\n"))
	if _, err := tool.Compile(ctx, []byte(addOne), "sm_90a"); err == nil || !strings.Contains(err.Error(), "no kernel") {
		t.Errorf("PTX without any kernel: err = %v", err)
	}
}

func TestValidatePTX(t *testing.T) {
	body := ".visible .entry flash_fwd(\n\t.param .u64 p\n)\n{\n\tret;\n}\n"
	good := fakeHeader + body
	if err := ValidatePTX([]byte(good), "sm_90a", "flash_fwd"); err != nil {
		t.Errorf("good PTX: %v", err)
	}
	if err := ValidatePTX([]byte(".version 8.6\n.target sm_90a, debug\n.address_size 64\n.entry flash_fwd()\n{\n}\n"), "sm_90a", "flash_fwd"); err != nil {
		t.Errorf("good PTX with a target option: %v", err)
	}
	for name, tc := range map[string]struct{ ptx, want string }{
		"empty":          {"", "empty output"},
		"no version":     {".target sm_90a\n.address_size 64\n" + body, "want a .version line first"},
		"bad version":    {".version eight\n.target sm_90a\n.address_size 64\n" + body, "want a .version line first"},
		"other target":   {".version 8.0\n.target sm_90\n.address_size 64\n" + body, "want .target sm_90a"},
		"32-bit":         {".version 8.0\n.target sm_90a\n.address_size 32\n" + body, "want .address_size 64"},
		"header only":    {".version 8.0\n.target sm_90a\n", "got \"end of output\""},
		"wrong entry":    {fakeHeader + ".entry flash_fwd_full(\n)\n", "no .entry flash_fwd (kernels: flash_fwd_full)"},
		"entry in prose": {fakeHeader + "// .entry flash_fwd(\n", "no .entry flash_fwd (no kernel at all)"},
		"binary":         {"\x7fELF\x02\x01\x01\x00", "want a .version line first"},
	} {
		err := ValidatePTX([]byte(tc.ptx), "sm_90a", "flash_fwd")
		if err == nil || !strings.HasPrefix(err.Error(), "llc produced invalid PTX: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}

func TestTimeoutSetting(t *testing.T) {
	if d := (&Tool{}).timeout(); d != DefaultTimeout {
		t.Errorf("default timeout = %v", d)
	}
	if d := (&Tool{Timeout: time.Second}).timeout(); d != time.Second {
		t.Errorf("Tool.Timeout ignored: %v", d)
	}
	for v, want := range map[string]time.Duration{"90s": 90 * time.Second, "2m": 2 * time.Minute, "120": 120 * time.Second, "0.5": 500 * time.Millisecond, " 5s ": 5 * time.Second} {
		if d, err := ParseTimeout(v); d != want || err != nil {
			t.Errorf("ParseTimeout(%q) = %v, %v; want %v", v, d, err, want)
		}
	}
	for _, v := range []string{"soon", "0", "-5s", "1e300", ""} {
		if _, err := ParseTimeout(v); err == nil || !strings.Contains(err.Error(), "want a positive duration") {
			t.Errorf("ParseTimeout(%q): err = %v", v, err)
		}
	}
}

func TestCapped(t *testing.T) {
	c := &capped{max: 5}
	for _, s := range []string{"abc", "defg", "hi"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if c.buf.String() != "abcde" || !c.over {
		t.Errorf("capped kept %q, over %v", c.buf.String(), c.over)
	}
}
