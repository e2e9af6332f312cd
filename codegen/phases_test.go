package codegen

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTargets checks which target each arch gets.
func TestTargets(t *testing.T) {
	for arch, want := range map[string]string{
		"": "sm80", "sm_80": "sm80", "sm_86": "sm80", "sm_89": "sm80",
		"sm_90": "sm90", "sm_90a": "sm90", "sm_100a": "sm80", "sm_120": "sm80",
	} {
		got, err := Target(arch)
		if err != nil || got != want {
			t.Errorf("Target(%q) = %q, %v; want %q", arch, got, err, want)
		}
	}
	for _, arch := range []string{"sm_75", "sm80", "compute_90", "sm_90x"} {
		if _, err := Target(arch); err == nil {
			t.Errorf("Target(%q) accepted", arch)
		}
		if PhaseNames(arch) != nil {
			t.Errorf("PhaseNames(%q) is not nil", arch)
		}
	}
}

// phaseArchs has one arch per target.
var phaseArchs = []string{"sm_80", "sm_90a"}

// TestPhaseOrder checks every target's phase table against phaseOrder and
// its own sanity: unique names with docs, lower-llvm last, the shared
// phases required.
func TestPhaseOrder(t *testing.T) {
	seen := map[string]bool{}
	for _, arch := range phaseArchs {
		ps, err := Phases(arch)
		if err != nil {
			t.Fatal(err)
		}
		idx := map[string]int{}
		for i, p := range ps {
			if _, dup := idx[p.Name]; dup {
				t.Errorf("%s: phase %s listed twice", arch, p.Name)
			}
			if p.Name == "" || p.Doc == "" || p.Run == nil || p.Name == "all" {
				t.Errorf("%s: phase %d (%q) lacks a name, doc or run function", arch, i, p.Name)
			}
			idx[p.Name] = i
			seen[p.Name] = true
		}
		for _, c := range phaseOrder {
			b, okb := idx[c.before]
			a, oka := idx[c.after]
			if okb && oka && b >= a {
				t.Errorf("%s: phase %s must run before %s", arch, c.before, c.after)
			}
		}
		// After lower-llvm only phases that rewrite the LLVM IR run.
		if i, ok := idx["lower-llvm"]; ok {
			for _, p := range ps[i+1:] {
				if p.Required {
					t.Errorf("%s: required phase %s after lower-llvm", arch, p.Name)
				}
			}
		}
		for _, name := range []string{"check-kernel", "assign-layouts", "plan-async", "lower-llvm"} {
			if i, ok := idx[name]; !ok || !ps[i].Required {
				t.Errorf("%s: phase %s missing or not required", arch, name)
			}
		}
		if got := strings.Join(PhaseNames(arch), " "); !strings.HasPrefix(got, "check-kernel ") {
			t.Errorf("%s: PhaseNames = %s", arch, got)
		}
	}
	for _, c := range phaseOrder {
		for _, n := range []string{c.before, c.after} {
			if !seen[n] {
				t.Errorf("phaseOrder names %s, which no target has", n)
			}
		}
	}
}

// TestPhaseOptions checks the errors of PrintAfter and Disable, and that
// disabling the optional select-async removes cp.async.
func TestPhaseOptions(t *testing.T) {
	m, k := loadKernel(t, "tiny_dot")
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Disable: map[string]bool{"assign-layouts": true}}, "cannot disable phase assign-layouts: it is required"},
		{Options{Disable: map[string]bool{"nope": true}}, `cannot disable "nope": no such phase`},
		{Options{PrintAfter: "nope"}, `cannot print after "nope": no such phase`},
		{Options{PrintAfter: "select-async", Disable: map[string]bool{"select-async": true}}, "cannot print after select-async: it is disabled"},
	} {
		if _, err := Lower(m, k, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.opts, err, c.want)
		}
	}
	for _, arch := range phaseArchs {
		res, err := Lower(m, k, Options{Target: testTarget(arch), Disable: map[string]bool{"select-async": true, "plan-async": false}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(res.LL, "cp.async") {
			t.Errorf("%s: cp.async emitted with select-async disabled", arch)
		}
		var out bytes.Buffer
		if _, err := Lower(m, k, Options{Target: testTarget(arch), PrintAfter: "assign-layouts", Out: &out}); err != nil {
			t.Fatal(err)
		}
		if s := out.String(); strings.Count(s, "// ---- ") != 1 || !strings.Contains(s, "#mma{v2") || !strings.Contains(s, "// staged: operand B of %16") {
			t.Errorf("%s: print after assign-layouts:\n%s", arch, s)
		}
	}
}

// TestPrintGolden compares the print after every phase of a small kernel
// with testdata/golden/phases, per target.
func TestPrintGolden(t *testing.T) {
	m, k := loadKernel(t, "tiny_dot")
	for _, arch := range phaseArchs {
		t.Run(arch, func(t *testing.T) {
			var out bytes.Buffer
			if _, err := Lower(m, k, Options{Target: testTarget(arch), PrintAfter: "all", Out: &out}); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "golden", "phases", "tiny_dot."+arch+".txt"), out.Bytes())
		})
	}
}

// checkGolden compares got with the file at path, or rewrites it with
// -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./codegen -run %s -update)", err, strings.Split(t.Name(), "/")[0])
	}
	if !bytes.Equal(want, got) {
		t.Errorf("output differs from %s (rerun with -update if intended):\n%s", path, firstDiff(string(want), string(got)))
	}
}
