package flash

import (
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen"
)

// TestOptionsCheckIssue46Item11: an arch fac has no target for
// (Options.Target.Arch "sm_1000" reached llc, which aborted with a stack
// dump), a negative multiprocessor count or a split count out of range is
// refused by every Compile function before anything compiles; FAC_ARCH
// likewise. A known arch on a fallback path is accepted and
// ArchFallback says which path it takes.
func TestOptionsCheckIssue46Item11(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Target: codegen.TargetConfig{Arch: "sm_1000"}}, "Options.Target.Arch: GPU arch sm_1000: no such GPU"},
		{Options{Target: codegen.TargetConfig{Arch: "sm_75"}}, "fac needs sm_80 or newer"},
		{Options{Target: codegen.TargetConfig{Arch: "hopper"}}, `GPU arch "hopper": want sm_NN`},
		{Options{SMs: -1}, "Options.SMs -1: want a positive multiprocessor count"},
		{Options{NumSplits: 65}, "Options.NumSplits 65"},
		{Options{NumSplits: -1}, "Options.NumSplits -1"},
		{Options{PackGQA: PackGQA(7)}, "Options.PackGQA 7"},
	} {
		for name, compile := range map[string]func() error{
			"CompileForward":        func() error { _, err := CompileForward(c.opts, 16); return err },
			"CompileForwardVarlen":  func() error { _, err := CompileForwardVarlen(c.opts, 16); return err },
			"CompileBackward":       func() error { _, err := CompileBackward(c.opts, 16); return err },
			"CompileBackwardVarlen": func() error { _, err := CompileBackwardVarlen(c.opts, 16); return err },
		} {
			if err := compile(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("issue 46 item 11: %s(%+v) = %v, want an error with %q", name, c.opts, err, c.want)
			}
		}
	}
	for _, arch := range []string{"sm_80", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120"} {
		if _, err := CompileForward(Options{Target: codegen.TargetConfig{Arch: arch}, DType: "bf16"}, 16); err != nil {
			t.Errorf("%s: %v", arch, err)
		}
	}
	for arch, want := range map[string]string{"sm_80": "", "sm_90a": "", "sm_89": "runs sm_80's", "sm_100a": "runs sm_80's",
		"sm_120": "runs sm_80's", "sm_90": "without wgmma and TMA", "sm_1000": ""} {
		if got := ArchFallback(arch); want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("ArchFallback(%s) = %q, want %q", arch, got, want)
		}
	}
	e, err := readEnvironment(func(k string) string { return map[string]string{EnvArch: "sm_1000"}[k] })
	if err == nil || !strings.Contains(err.Error(), "FAC_ARCH=sm_1000") || e.GPU.Arch != "" {
		t.Errorf("FAC_ARCH=sm_1000: %+v, %v", e.GPU, err)
	}
}

// TestConstsAgreeIssue46Item12: Consts DTYPE or HEAD_DIM that contradict
// DType or the head dim are errors (Consts DTYPE=i32 was overridden by
// DType without a word); agreeing ones are fine; a compile-time argument
// out of its parameter's range fails at compile time.
func TestConstsAgreeIssue46Item12(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Consts: map[string]string{"DTYPE": "i32"}}, "Options.Consts DTYPE=i32 contradicts the element type f32"},
		{Options{Consts: map[string]string{"DTYPE": "f16"}, DType: "bf16"}, "contradicts the element type bf16"},
		{Options{Consts: map[string]string{"HEAD_DIM": "32"}}, "Options.Consts HEAD_DIM=32 contradicts the head dim 16"},
		{Options{Consts: map[string]string{"SPARSE_Q": "0"}}, "SPARSE_Q = 0: want 1 to"},
		{Options{Consts: map[string]string{"num_warps": "3"}}, "num_warps = 3: want a power of two from 1 to 32"},
	} {
		for name, compile := range map[string]func() error{
			"CompileForward":  func() error { _, err := CompileForward(c.opts, 16); return err },
			"CompileBackward": func() error { _, err := CompileBackward(c.opts, 16); return err },
		} {
			if err := compile(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("issue 46 item 12: %s(Consts %v, DType %q) = %v, want an error with %q", name, c.opts.Consts, c.opts.DType, err, c.want)
			}
		}
	}
	if _, err := CompileForward(Options{Consts: map[string]string{"DTYPE": "bf16", "HEAD_DIM": "16"}, DType: "bf16"}, 16); err != nil {
		t.Errorf("agreeing consts: %v", err)
	}
}
