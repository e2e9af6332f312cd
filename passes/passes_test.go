package passes

import (
	"bytes"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

var update = flag.Bool("update", false, "rewrite the expected outputs testdata/*/*.out.tir")

// pipelineDirs maps the golden directories of pipelines to them:
// testdata/pipeline/ is the kernel pipeline's.
var pipelineDirs = map[string]*Pipeline{"pipeline": KernelPipeline, "mask-analysis": MaskAnalysisPipeline}

// goldenDirs lists the directories of golden tests: one per pass, one per
// pipeline.
func goldenDirs() []string { return append(Names(), slices.Sorted(maps.Keys(pipelineDirs))...) }

// TestGolden runs each testdata/<pass>/<case>.tir through that single pass
// (testdata/<pipeline>/ through that pipeline, see pipelineDirs) and
// compares the printed module with <case>.out.tir. When the pass fails, the
// expected output is the line "error: <message>". Inputs and outputs must
// verify.
func TestGolden(t *testing.T) {
	for _, dir := range goldenDirs() {
		inputs := goldenInputs(t, dir)
		if len(inputs) < 3 {
			t.Errorf("testdata/%s: %d cases, want at least 3", dir, len(inputs))
		}
		for _, in := range inputs {
			t.Run(dir+"/"+strings.TrimSuffix(filepath.Base(in), ".tir"), func(t *testing.T) {
				m := parseFile(t, in)
				var err error
				if p, ok := Lookup(dir); ok {
					err = p.Run(m)
				} else {
					err = RunPipeline(m, pipelineDirs[dir], Options{VerifyEach: true})
				}
				got := ""
				if err != nil {
					got = "error: " + err.Error() + "\n"
				} else {
					if err := tir.Verify(m); err != nil {
						t.Fatalf("output does not verify: %v\n%s", err, m)
					}
					got = m.String()
				}
				want := strings.TrimSuffix(in, ".tir") + ".out.tir"
				if *update {
					if err := os.WriteFile(want, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				b, err := os.ReadFile(want)
				if err != nil {
					t.Fatalf("%v (run go test ./passes/ -update)", err)
				}
				if got != string(b) {
					t.Errorf("%s: output differs from %s\ngot:\n%s\nwant:\n%s", in, want, got, b)
				}
			})
		}
	}
}

// goldenInputs lists testdata/<dir>/*.tir, outputs excluded.
func goldenInputs(t *testing.T, dir string) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join("testdata", dir, "*.tir"))
	if err != nil {
		t.Fatal(err)
	}
	var ins []string
	for _, f := range all {
		if !strings.HasSuffix(f, ".out.tir") {
			ins = append(ins, f)
		}
	}
	return ins
}

// parseFile parses and verifies a test input.
func parseFile(t *testing.T, path string) *tir.Module {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tir.Parse(path, string(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := tir.Verify(m); err != nil {
		t.Fatalf("input does not verify: %v", err)
	}
	return m
}

// allInputs is every golden input, plus tir's sample module.
func allInputs(t *testing.T) []string {
	ins := []string{"../tir/testdata/sample.tir"}
	for _, dir := range goldenDirs() {
		ins = append(ins, goldenInputs(t, dir)...)
	}
	return ins
}

// expectsError reports whether a golden input is made to fail its pass.
func expectsError(in string) bool {
	b, _ := os.ReadFile(strings.TrimSuffix(in, ".tir") + ".out.tir")
	return bytes.HasPrefix(b, []byte("error: "))
}

// TestPipelineVerifies runs the whole Table with VerifyEach on every input
// (but those made to fail a pass) and checks that a second run changes
// nothing: the pipeline reaches a fixpoint.
func TestPipelineVerifies(t *testing.T) {
	for _, in := range allInputs(t) {
		if expectsError(in) {
			continue
		}
		m := parseFile(t, in)
		if err := Run(m, Options{VerifyEach: true}); err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		once := m.String()
		if err := Run(m, Options{VerifyEach: true}); err != nil {
			t.Errorf("%s: second run: %v", in, err)
		} else if again := m.String(); again != once {
			t.Errorf("%s: second run changed the IR:\n%s\nthen:\n%s", in, once, again)
		}
	}
}

func TestTable(t *testing.T) {
	want := []string{"specialize-mask", "inline", "pad-dims", "persistent", "canonicalize", "cse", "sink-select", "mask-range", "fold-scale", "fuse-dot-acc", "overlap-softmax", "persistent-prefetch", "dce"}
	if got := strings.Join(Names(), " "); got != strings.Join(want, " ") {
		t.Errorf("Names() = %s, want %s", got, strings.Join(want, " "))
	}
	for _, p := range Table {
		if p.Doc == "" || p.Run == nil {
			t.Errorf("pass %s lacks Doc or Run", p.Name)
		}
		// Codegen and the mask analyzer cannot handle calls; the rest
		// only make the IR smaller or faster.
		if want := p.Name == "inline"; p.Required != want {
			t.Errorf("pass %s: Required = %v, want %v", p.Name, p.Required, want)
		}
		if q, ok := Lookup(p.Name); !ok || q.Name != p.Name {
			t.Errorf("Lookup(%q) failed", p.Name)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup(nope) succeeded")
	}
}

const maskedKernel = "testdata/pipeline/masked_loop.tir"

func TestUnknownPassName(t *testing.T) {
	for _, opts := range []Options{
		{Disable: map[string]bool{"cse": true, "cs": true}},
		{PrintAfter: "inlined"},
	} {
		err := Run(parseFile(t, maskedKernel), opts)
		if err == nil || !strings.Contains(err.Error(), "unknown pass") ||
			!strings.Contains(err.Error(), "specialize-mask, inline, pad-dims, persistent, canonicalize, cse, sink-select, mask-range, fold-scale, fuse-dot-acc, overlap-softmax, persistent-prefetch, dce") {
			t.Errorf("%+v: err = %v, want unknown pass listing the valid names", opts, err)
		}
	}
	if err := RunUntil(parseFile(t, maskedKernel), Options{}, "bogus"); err == nil {
		t.Error("RunUntil(bogus) succeeded")
	}
}

func TestDisable(t *testing.T) {
	// Disabling an optional pass gives what the pipeline without it gives,
	// and the pass's own work visibly does not happen.
	for _, p := range Table {
		if p.Required {
			continue
		}
		m := parseFile(t, maskedKernel)
		if err := Run(m, Options{Disable: map[string]bool{p.Name: true}, VerifyEach: true}); err != nil {
			t.Fatalf("disable %s: %v", p.Name, err)
		}
		ref := parseFile(t, maskedKernel)
		for _, q := range Table {
			if q.Name != p.Name {
				if err := q.Run(ref); err != nil {
					t.Fatal(err)
				}
			}
		}
		if m.String() != ref.String() {
			t.Errorf("disable %s: got\n%s\nwant\n%s", p.Name, m, ref)
		}
	}
	m := parseFile(t, maskedKernel)
	if err := Run(m, Options{Disable: map[string]bool{"specialize-mask": true}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.String(), ".full") {
		t.Error("with specialize-mask disabled, a .full variant exists")
	}
}

// TestDisableRequired checks that a required pass cannot be disabled on
// its own, in any pipeline, and that disabling it with every pass after it
// stops the pipeline before it, as RunUntil does.
func TestDisableRequired(t *testing.T) {
	for _, p := range Pipelines {
		for i, name := range p.Passes {
			pass, _ := Lookup(name)
			if !pass.Required {
				continue
			}
			m := parseFile(t, maskedKernel)
			before := m.String()
			err := RunPipeline(m, p, Options{Disable: map[string]bool{name: true}})
			if err == nil || !strings.Contains(err.Error(), "--disable-pass: "+name+" is a required pass") {
				t.Errorf("%s: disable %s: err = %v, want a required-pass error", p.Name, name, err)
			}
			if m.String() != before {
				t.Errorf("%s: a pass ran before the required-pass error", p.Name)
			}
			tail := map[string]bool{}
			for _, q := range p.Passes[i:] {
				tail[q] = true
			}
			m = parseFile(t, maskedKernel)
			if err := RunPipeline(m, p, Options{Disable: tail, VerifyEach: true}); err != nil {
				t.Errorf("%s: disable %v: %v", p.Name, slices.Sorted(maps.Keys(tail)), err)
			}
			ref := parseFile(t, maskedKernel)
			if i > 0 {
				if err := p.run(ref, Options{}, p.Passes[i-1]); err != nil {
					t.Fatal(err)
				}
			}
			if m.String() != ref.String() || !strings.Contains(m.String(), "call ") {
				t.Errorf("%s: disabling %s and the passes after it: got\n%s\nwant\n%s", p.Name, name, m, ref)
			}
		}
	}
	// Passes past the last one run are not run anyway.
	if err := RunUntil(parseFile(t, maskedKernel), Options{Disable: map[string]bool{"inline": true}}, "specialize-mask"); err != nil {
		t.Errorf("RunUntil(specialize-mask) with inline disabled: %v", err)
	}
}

func TestPrintAfter(t *testing.T) {
	var buf bytes.Buffer
	m := parseFile(t, maskedKernel)
	if err := Run(m, Options{PrintAfter: "cse", Out: &buf}); err != nil {
		t.Fatal(err)
	}
	ref := parseFile(t, maskedKernel)
	if err := RunUntil(ref, Options{}, "cse"); err != nil {
		t.Fatal(err)
	}
	if want := "// -----// IR after cse //----- //\n" + ref.String(); buf.String() != want {
		t.Errorf("print after cse:\n%s\nwant:\n%s", buf.String(), want)
	}

	buf.Reset()
	if err := Run(parseFile(t, maskedKernel), Options{PrintAfter: "all", Out: &buf, Disable: map[string]bool{"cse": true}}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "// -----// IR after "); n != len(Table)-1 {
		t.Errorf("print after all with cse disabled printed %d headers, want %d", n, len(Table)-1)
	}
	if strings.Contains(buf.String(), "IR after cse") {
		t.Error("printed IR after a disabled pass")
	}
}

// TestICE checks that a pass breaking the IR is reported as an internal
// compiler error naming the pass and the kernel.
func TestICE(t *testing.T) {
	breakIt := Pass{Name: "break", Run: func(m *tir.Module) error {
		for _, f := range m.Funcs {
			if f.Kernel {
				f.Body.Ops = f.Body.Ops[:len(f.Body.Ops)-1] // drop the return
			}
		}
		return nil
	}}
	m := parseFile(t, "../tir/testdata/sample.tir")
	err := runPass(m, breakIt, true)
	if err == nil || !strings.HasPrefix(err.Error(), "internal compiler error: pass break broke the IR of kernel sample: verify: ") {
		t.Errorf("err = %v", err)
	}
	if err := runPass(parseFile(t, "../tir/testdata/sample.tir"), breakIt, false); err != nil {
		t.Errorf("without VerifyEach: %v", err)
	}
}
