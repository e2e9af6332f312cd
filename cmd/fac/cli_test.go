package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/internal/npy"
	"github.com/fac-compiler/fac/internal/version"
)

// facBin is the fac binary built once for all tests.
var facBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fac-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	facBin = filepath.Join(dir, "fac")
	if runtime.GOOS == "windows" {
		facBin += ".exe"
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	build := exec.Command(goTool, "build", "-o", facBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building fac:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// runFac runs the binary in dir ("" = this package's folder).
func runFac(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(facBin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		t.Fatalf("fac %s: %v", strings.Join(args, " "), err)
	}
	// Whatever happens, fac must not crash.
	for _, bad := range []string{"panic", "goroutine ", "runtime error", "internal compiler error"} {
		if strings.Contains(r.stderr, bad) || strings.Contains(r.stdout, bad) {
			t.Fatalf("fac %s printed %q:\n%s%s", strings.Join(args, " "), bad, r.stdout, r.stderr)
		}
	}
	return r
}

// wantFail checks exit status 1 and a one-line "fac: ..." error containing
// each of frags.
func wantFail(t *testing.T, r cliResult, frags ...string) {
	t.Helper()
	if r.code != 1 {
		t.Fatalf("exit status %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "fac: ") {
		t.Errorf("stderr does not start with \"fac: \":\n%s", r.stderr)
	}
	for _, f := range frags {
		if !strings.Contains(r.stderr, f) {
			t.Errorf("stderr does not contain %q:\n%s", f, r.stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	r := runFac(t, "", "version")
	if r.code != 0 || r.stdout != "fac "+version.Version+"\n" {
		t.Fatalf("fac version: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestCheckGood(t *testing.T) {
	r := runFac(t, "", "check", "testdata/good.fa")
	if r.code != 0 || r.stdout != "ok: 3 declarations in 1 files\n" || r.stderr != "" {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	examples, _ := filepath.Glob("../../examples/masks/*.fa")
	if len(examples) == 0 {
		t.Fatal("no examples/masks/*.fa")
	}
	r = runFac(t, "", append([]string{"check"}, examples...)...)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "ok: ") {
		t.Fatalf("fac check examples: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestCheckBad runs fac check on each testdata/bad_*.fa. The first line of
// each file says where the error is: `// error: LINE:COL: message`.
func TestCheckBad(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad_*.fa")
	if len(files) < 5 {
		t.Fatalf("found %d testdata/bad_*.fa files", len(files))
	}
	header := regexp.MustCompile(`^// error: (\d+):(\d+): (.*)\n`)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".fa"), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m := header.FindStringSubmatch(string(src))
			if m == nil {
				t.Fatalf("%s does not start with `// error: LINE:COL: message`", f)
			}
			line, _ := strconv.Atoi(m[1])
			col, _ := strconv.Atoi(m[2])
			r := runFac(t, "", "check", f)
			want := fmt.Sprintf("fac: %s:%d:%d: %s\n", f, line, col, m[3])
			wantFail(t, r)
			if !strings.HasPrefix(r.stderr, want) {
				t.Fatalf("stderr:\n%s\nwant it to start with\n%s", r.stderr, want)
			}
			// Then the source line and a caret under the column.
			lines := strings.Split(r.stderr, "\n")
			srcLine := strings.Split(string(src), "\n")[line-1]
			if len(lines) < 3 || lines[1] != "    "+srcLine {
				t.Fatalf("no source excerpt:\n%s", r.stderr)
			}
			pad := []rune(srcLine)[:col-1]
			for i, c := range pad {
				if c != '\t' {
					pad[i] = ' '
				}
			}
			if lines[2] != "    "+string(pad)+"^" {
				t.Errorf("caret line %q, want %q", lines[2], "    "+string(pad)+"^")
			}
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
		})
	}
}

func TestCheckMissingFile(t *testing.T) {
	wantFail(t, runFac(t, "", "check", "testdata/nosuch.fa"), "testdata/nosuch.fa", "no such file")
}

func TestRunUnknownMask(t *testing.T) {
	r := runFac(t, "", "run", "--mask", "nosuch", "--seqlen-q", "8", "--seqlen-k", "8")
	wantFail(t, r, "unknown mask mod nosuch", "causal", "sliding_window")
	r = runFac(t, "", "run", "--score", "causal", "--seqlen-q", "8", "--seqlen-k", "8")
	wantFail(t, r, "causal is not a score mod", "softcap")
	r = runFac(t, "", "run", "--mask", "sliding_window(1,", "--seqlen-q", "8", "--seqlen-k", "8")
	wantFail(t, r, "<mask>:1:18: syntax error", "^")
}

func TestRunBadShape(t *testing.T) {
	wantFail(t, runFac(t, "", "run", "--seqlen-q", "0"), "seqlen_q must be positive, got 0")
	wantFail(t, runFac(t, "", "run", "--heads", "3", "--kv-heads", "2"), "heads (3) must be a multiple of kv heads (2)")
}

func TestDisableUnknownPass(t *testing.T) {
	r := runFac(t, "", "ir", "--disable-pass", "nosuch")
	wantFail(t, r, `unknown pass "nosuch"`, "inline")
	if r.stdout != "" {
		t.Errorf("printed IR although the pass name is wrong:\n%.200s", r.stdout)
	}
	wantFail(t, runFac(t, "", "ir", "--print-ir-after", "nosuch"), `unknown pass "nosuch"`)
}

func TestBadConst(t *testing.T) {
	wantFail(t, runFac(t, "", "ir", "--const", "NOPE=1"), "kernel flash_fwd has no compile-time parameter NOPE")
	wantFail(t, runFac(t, "", "ir", "--const", "BLOCK_M"), "want NAME=VALUE")
	wantFail(t, runFac(t, "", "ir", "--const", "BLOCK_M=1.5"), "parameter BLOCK_M is i32, got float constant 1.5")
}

// TestRunOutMissingDir: writing O into a folder that does not exist fails,
// and leaves nothing behind.
func TestRunOutMissingDir(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "missing", "o.npy")
	r := runFac(t, dir, "run", "--mask", "causal", "--seqlen-q", "16", "--seqlen-k", "16", "--dim", "16", "--out", out)
	wantFail(t, r, filepath.Join(dir, "missing"))
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Errorf("left behind in %s: %v", dir, left)
	}
}

// TestRunWritesNpy runs causal attention with awkward sizes and reads O and
// LSE back.
func TestRunWritesNpy(t *testing.T) {
	dir := t.TempDir()
	r := runFac(t, dir, "run", "--mask", "causal", "--seqlen-q", "33", "--seqlen-k", "17", "--out", "o.npy", "--lse-out", "l.npy")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	checkAccuracy(t, r.stdout)
	o, err := npy.ReadFile(filepath.Join(dir, "o.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(o.Shape) != "[2 2 33 64]" || o.Dtype != "<f4" {
		t.Errorf("o.npy: shape %v dtype %s, want [2 2 33 64] <f4", o.Shape, o.Dtype)
	}
	l, err := npy.ReadFile(filepath.Join(dir, "l.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(l.Shape) != "[2 2 33]" || l.Dtype != "<f4" {
		t.Errorf("l.npy: shape %v dtype %s, want [2 2 33] <f4", l.Shape, l.Dtype)
	}
	// Causal, top-left aligned: every query sees key 0, so no row is empty.
	for i, v := range l.Vals {
		if v != v || v < -1e30 || v > 1e30 {
			t.Fatalf("lse[%d] = %v", i, v)
		}
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 2 {
		t.Errorf("files in the output folder: %v, want o.npy and l.npy only", left)
	}
}

// checkAccuracy reads fac run's report: O close to the reference and no NaN.
func checkAccuracy(t *testing.T, stdout string) {
	t.Helper()
	m := regexp.MustCompile(`relative error (\S+); LSE: max \|LSE - ref\| = (\S+); NaN: (\d+)`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no accuracy report in:\n%s", stdout)
	}
	rel, _ := strconv.ParseFloat(m[1], 64)
	lse, _ := strconv.ParseFloat(m[2], 64)
	if rel > 1e-4 || lse > 1e-4 || m[3] != "0" {
		t.Errorf("inaccurate:\n%s", stdout)
	}
}

var scalarFlag = regexp.MustCompile(`--scalar (\w+=\S+)`)

// TestRunUserMods runs the tour's file and every example mod on the CPU
// and checks them against the reference.
func TestRunUserMods(t *testing.T) {
	small := []string{"--seqlen-q", "70", "--seqlen-k", "90", "--dim", "16", "--heads", "2", "--batch", "1",
		"--const", "BLOCK_M=32", "--const", "BLOCK_N=32", "--random-aux", "--doc-len", "20"}
	type job struct {
		file, flag, mod string
		extra           []string // the file's own --scalar values, from its usage line
	}
	jobs := []job{
		{"testdata/good.fa", "--mask", "strided_window", nil},
		{"testdata/good.fa", "--mask", "strided_window(near=8, stride=3)", nil},
		{"testdata/good.fa", "--mask", "WIDE", nil},
		{"testdata/good.fa", "--score", "capped(5.0)", nil},
	}
	decl := regexp.MustCompile(`(?m)^(mask|score) (\w+)`)
	examples, _ := filepath.Glob("../../examples/masks/*.fa")
	for _, f := range examples {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var extra []string
		for _, m := range scalarFlag.FindAllStringSubmatch(string(src), -1) {
			extra = append(extra, "--scalar", m[1])
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			jobs = append(jobs, job{f, "--" + m[1], m[2], extra})
		}
	}
	for _, j := range jobs {
		t.Run(filepath.Base(j.file)+"/"+j.mod, func(t *testing.T) {
			args := append(append([]string{"run", "-f", j.file, j.flag, j.mod}, small...), j.extra...)
			r := runFac(t, "", args...)
			if r.code != 0 {
				t.Fatalf("fac %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			}
			checkAccuracy(t, r.stdout)
		})
	}
}
