package passes

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestPipelines checks every named pipeline against Table and Order, and
// that the kernel pipeline is the Table in its order.
func TestPipelines(t *testing.T) {
	if err := checkOrder(Names()); err != nil {
		t.Errorf("Table: %v", err)
	}
	if !slices.Equal(KernelPipeline.Passes, Names()) {
		t.Errorf("kernel pipeline %v, want the Table %v", KernelPipeline.Passes, Names())
	}
	seen := map[string]bool{}
	for _, p := range Pipelines {
		if err := p.Check(); err != nil {
			t.Error(err)
		}
		if p.Doc == "" || seen[p.Name] {
			t.Errorf("pipeline %s: no Doc, or a second pipeline of that name", p.Name)
		}
		seen[p.Name] = true
		if q, ok := LookupPipeline(p.Name); !ok || q != p {
			t.Errorf("LookupPipeline(%q) failed", p.Name)
		}
		if !slices.Contains(slices.Collect(maps.Values(pipelineDirs)), p) {
			t.Errorf("pipeline %s has no golden directory in pipelineDirs", p.Name)
		}
	}
	if _, ok := LookupPipeline("nope"); ok {
		t.Error("LookupPipeline(nope) succeeded")
	}
	if slices.Contains(MaskAnalysisPipeline.Passes, "specialize-mask") {
		t.Error("the mask-analysis pipeline specializes kernels")
	}
}

// TestOrder checks that Order names passes of Table and gives reasons.
func TestOrder(t *testing.T) {
	for _, c := range Order {
		_, okB := Lookup(c.Before)
		_, okA := Lookup(c.After)
		if !okB || !okA || c.Why == "" || c.Before == c.After {
			t.Errorf("bad constraint %+v", c)
		}
	}
}

func TestPipelineCheck(t *testing.T) {
	for _, c := range []struct {
		p    Pipeline
		want string
	}{
		{Pipeline{Name: "x"}, "needs a name and passes"},
		{Pipeline{Name: "x", Passes: []string{"inline", "cs"}}, `pipeline x: unknown pass "cs"`},
		{Pipeline{Name: "x", Passes: []string{"inline", "dce", "dce"}}, "pass dce is listed twice"},
		{Pipeline{Name: "x", Passes: []string{"canonicalize", "dce"}}, "lacks the required pass inline"},
		{Pipeline{Name: "x", Passes: []string{"inline", "specialize-mask"}}, "specialize-mask must run before inline: "},
		{Pipeline{Name: "x", Passes: []string{"inline", "dce", "canonicalize"}}, "canonicalize must run before dce: "},
	} {
		err := c.p.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.p.Passes, err, c.want)
		}
		// A bad pipeline fails before any pass runs.
		m := parseFile(t, maskedKernel)
		before := m.String()
		if err := RunPipeline(m, &c.p, Options{}); err == nil || m.String() != before {
			t.Errorf("%v: RunPipeline: err = %v, module changed: %v", c.p.Passes, err, m.String() != before)
		}
	}
}

// TestRunPipelineOptions checks the options against a pipeline that lacks
// some passes of the Table: disabling one of those does nothing, printing
// after one is an error.
func TestRunPipelineOptions(t *testing.T) {
	m := parseFile(t, maskedKernel)
	if err := RunPipeline(m, MaskAnalysisPipeline, Options{Disable: map[string]bool{"specialize-mask": true}, VerifyEach: true}); err != nil {
		t.Fatal(err)
	}
	ref := parseFile(t, maskedKernel)
	if err := RunPipeline(ref, MaskAnalysisPipeline, Options{}); err != nil {
		t.Fatal(err)
	}
	if m.String() != ref.String() || strings.Contains(m.String(), ".full") {
		t.Errorf("mask-analysis with specialize-mask disabled: got\n%s\nwant\n%s", m, ref)
	}
	err := RunPipeline(parseFile(t, maskedKernel), MaskAnalysisPipeline, Options{PrintAfter: "specialize-mask"})
	if err == nil || !strings.Contains(err.Error(), "--print-ir-after: pass specialize-mask is not in the mask-analysis pipeline (inline, canonicalize, cse, dce)") {
		t.Errorf("print after a pass not in the pipeline: err = %v", err)
	}
	err = RunPipeline(parseFile(t, maskedKernel), MaskAnalysisPipeline, Options{Disable: map[string]bool{"inlin": true}})
	if err == nil || !strings.Contains(err.Error(), `unknown pass "inlin"`) {
		t.Errorf("unknown pass: err = %v", err)
	}
	var buf bytes.Buffer
	if err := RunPipeline(parseFile(t, maskedKernel), MaskAnalysisPipeline, Options{PrintAfter: "all", Out: &buf}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), "// -----// IR after "); n != len(MaskAnalysisPipeline.Passes) {
		t.Errorf("print after all printed %d headers, want %d", n, len(MaskAnalysisPipeline.Passes))
	}
}
