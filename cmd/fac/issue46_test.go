package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Regression tests for issue 46 ("Trust, second pass"), one per item:
// each failed on the code before its fix.

// TestVarlenBadLengthsIssue46Item2: varlen checks its lengths before it
// allocates: cu_seqlens [0, -5, -9] and --heads -1 panicked in makeslice
// (tensorArg), [0, 2147483647] ran out of memory.
func TestVarlenBadLengthsIssue46Item2(t *testing.T) {
	dir := t.TempDir()
	writeI32s(t, filepath.Join(dir, "neg.npy"), []int{3}, []int32{0, -5, -9})
	writeI32s(t, filepath.Join(dir, "ok.npy"), []int{3}, []int32{0, 5, 9})
	writeI32s(t, filepath.Join(dir, "big.npy"), []int{2}, []int32{0, 2147483647})
	writeI32s(t, filepath.Join(dir, "big1.npy"), []int{2}, []int32{0, 1})
	run := func(args ...string) cliResult {
		t.Helper()
		return runFac(t, dir, append([]string{"run", "--dim", "16"}, args...)...)
	}
	wantFail(t, run("--cu-seqlens-q", "neg.npy", "--cu-seqlens-k", "ok.npy"), "--cu-seqlens-q neg.npy", "cu_seqlens_q decreases at 1 (-5 after 0)")
	wantFail(t, run("--cu-seqlens-q", "ok.npy", "--cu-seqlens-k", "ok.npy", "--heads", "-1"), "varlen: heads must be positive, got -1")
	wantFail(t, run("--cu-seqlens-q", "ok.npy", "--cu-seqlens-k", "ok.npy", "--kv-heads", "-2"), "varlen: kv heads must be positive, got -2")
	wantFail(t, run("--cu-seqlens-q", "ok.npy", "--cu-seqlens-k", "ok.npy", "--dim", "-16"), "varlen: head dim must be positive, got -16")
	wantFail(t, run("--cu-seqlens-q", "big.npy", "--cu-seqlens-k", "big1.npy"), "varlen: q has 2147483647×2×16 elements", "more than 32-bit offsets address")
	wantOK(t, run("--cu-seqlens-q", "ok.npy", "--cu-seqlens-k", "ok.npy"))
}

// TestSameOutputFileIssue46Item7: two outputs that lead to one file (the
// same name, a symlink, a hard link) are refused, as is an output that is
// the stdout the report goes to; nothing is computed or written.
func TestSameOutputFileIssue46Item7(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("target.npy", filepath.Join(dir, "link.npy")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.npy"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "a.npy"), filepath.Join(dir, "hard.npy")); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) cliResult {
		t.Helper()
		r := runFac(t, dir, append([]string{"run", "--seqlen-q", "16", "--seqlen-k", "16", "--dim", "16"}, args...)...)
		if strings.Contains(r.stdout, "kernel ") {
			t.Errorf("fac run %v computed before it refused its outputs:\n%s", args, r.stdout)
		}
		return r
	}
	wantFail(t, run("-o", "same.npy", "--lse-out", "same.npy"), "--lse-out same.npy and --out same.npy name the same file")
	wantFail(t, run("-o", "./same.npy", "--lse-out", "same.npy"), "lead to the same file")
	wantFail(t, run("-o", "link.npy", "--lse-out", "target.npy"), "--lse-out target.npy and --out link.npy lead to the same file")
	wantFail(t, run("-o", "a.npy", "--lse-out", "hard.npy"), "lead to the same file")
	wantFail(t, run("-o", "/dev/stdout"), "--out /dev/stdout is standard output, where the report goes", "write --out -")
	wantFail(t, run("-o", "-", "--lse-out", "/dev/stdout"), "lead to the same file")
	wantFail(t, run("--backward", "--dq-out", "g.npy", "--dk-out", "g.npy"), "--dk-out g.npy and --dq-out g.npy name the same file")
	wantFail(t, runFac(t, dir, "build", "-o", "/dev/stdout"), "--out /dev/stdout is standard output")
	if _, err := os.Stat(filepath.Join(dir, "same.npy")); err == nil {
		t.Error("same.npy written")
	}
	// The null device takes any number of outputs; -o - puts the report on stderr.
	wantOK(t, runFac(t, dir, "run", "--seqlen-q", "16", "--seqlen-k", "16", "--dim", "16", "-o", os.DevNull, "--lse-out", os.DevNull))
	wantOK(t, runFac(t, dir, "run", "--seqlen-q", "16", "--seqlen-k", "16", "--dim", "16", "-o", "-", "--lse-out", "l.npy"))
}

// TestOutputsCheckedFirstIssue46Item14: an output that cannot be written
// fails before the computation (it failed at the end, losing the run).
func TestOutputsCheckedFirstIssue46Item14(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "outdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(dir, "ro.npy")
	if err := os.WriteFile(ro, []byte("keep"), 0o444); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-o", "outdir"}, "--out: write outdir: is a directory"},
		{[]string{"run", "-o", "/nonexistent/dir/o.npy"}, "--out: write /nonexistent/dir/o.npy: folder /nonexistent/dir does not exist"},
		{[]string{"run", "--lse-out", "ro.npy"}, "--lse-out: write ro.npy: permission denied: the file is read-only"},
		{[]string{"run", "--backward", "--dv-out", "outdir"}, "--dv-out: write outdir: is a directory"},
		{[]string{"compile", "--emit", "tir", "-o", "outdir"}, "--out: write outdir: is a directory"},
		{[]string{"ir", "-o", "no/such/dir/k.tir"}, "folder no/such/dir does not exist"},
		{[]string{"build", "-o", "outdir"}, "--out: write outdir: is a directory"},
		{[]string{"bench", "--json", "outdir"}, "--json: write outdir: is a directory"},
	} {
		args := append(c.args, "--seqlen-q", "64", "--seqlen-k", "64", "--dim", "16")
		switch c.args[0] {
		case "compile", "ir", "build", "bench":
			args = c.args
		}
		r := runFac(t, dir, args...)
		wantFail(t, r, c.want)
		if r.stdout != "" {
			t.Errorf("issue 46 item 14: fac %s printed before it refused its output:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
	if b, _ := os.ReadFile(ro); string(b) != "keep" {
		t.Error("the read-only file changed")
	}
}

// TestArchIssue46Item11: --arch names fac has no target for are refused
// before llc sees them (--arch sm_1000 aborted llc with a stack dump);
// known ones on a fallback path say what they fall back to.
func TestArchIssue46Item11(t *testing.T) {
	dir := t.TempDir()
	wantFail(t, runFac(t, dir, "compile", "--arch", "sm_1000", "-o", "k.ptx"), "--arch: GPU arch sm_1000: no such GPU; known: sm_80")
	wantFail(t, runFac(t, dir, "compile", "--arch", "sm_75", "--emit", "tir"), "fac needs sm_80 or newer")
	wantFail(t, runFac(t, dir, "build", "--arch", "sm_90a,sm_1000", "-o", "x.bundle"), "GPU arch sm_1000")
	wantFail(t, runFac(t, dir, "passes", "--arch", "sm_1000"), "GPU arch sm_1000")
	for arch, want := range map[string]string{
		"sm_89":   "fac: warning: sm_89 has no code path of its own: it runs sm_80's (mma.sync tensor cores, cp.async",
		"sm_100a": "fac: warning: sm_100a has no code path of its own: it runs sm_80's",
		"sm_120":  "fac: warning: sm_120 has no code path of its own",
		"sm_90":   "fac: warning: sm_90 runs without wgmma and TMA, which need sm_90a",
	} {
		r := runFac(t, dir, "compile", "--arch", arch, "--emit", "tir", "-v", "-o", "k.tir")
		wantOK(t, r)
		if !strings.Contains(r.stderr, want) {
			t.Errorf("compile --arch %s: stderr lacks %q:\n%s", arch, want, r.stderr)
		}
	}
	for _, arch := range []string{"sm_80", "sm_90a"} {
		if r := runFac(t, dir, "compile", "--arch", arch, "--emit", "tir", "-o", "k.tir"); r.code != 0 || strings.Contains(r.stderr, "warning") {
			t.Errorf("compile --arch %s: exit %d, %s", arch, r.code, r.stderr)
		}
	}
}

// TestConstsIssue46Item12: compile-time arguments are checked at compile
// time against their parameters' ranges (--const SPARSE_Q=0 compiled and
// divided by zero at run time), and --const DTYPE / HEAD_DIM are --dtype
// and --dim spelled another way (--const DTYPE=i32 was overridden by
// --dtype without a word).
func TestConstsIssue46Item12(t *testing.T) {
	dir := t.TempDir()
	small := []string{"--seqlen-q", "64", "--seqlen-k", "64", "--dim", "16"}
	run := func(args ...string) cliResult {
		t.Helper()
		return runFac(t, dir, append(append([]string{"run"}, small...), args...)...)
	}
	r := run("--const", "SPARSE_Q=0")
	wantFail(t, r, "kernel flash_fwd: SPARSE_Q = 0: want 1 to 1073741824 (query rows of a block-mask block)")
	if strings.Contains(r.stderr, "division by zero") || strings.Contains(r.stdout, "compile ") {
		t.Errorf("SPARSE_Q=0 got past the compile:\n%s%s", r.stdout, r.stderr)
	}
	wantFail(t, run("--const", "num_warps=3"), "num_warps = 3: want a power of two from 1 to 32")
	wantFail(t, run("--const", "num_stages=0"), "num_stages = 0: want 1 to 8")
	wantFail(t, run("--const", "DTYPE=i32"), "--const DTYPE=i32: want f32, bf16 or f16")
	wantFail(t, run("--const", "DTYPE=bf16", "--dtype", "f32"), "--const DTYPE=bf16 contradicts --dtype f32")
	wantFail(t, run("--const", "HEAD_DIM=32"), "--const HEAD_DIM=32 contradicts --dim 16")
	wantFail(t, runFac(t, dir, "compile", "--emit", "tir", "--const", "DTYPE=i32"), "kernel flash_fwd: DTYPE = i32: want f32, bf16 or f16")
	wantFail(t, runFac(t, dir, "compile", "--emit", "tir", "--const", "DTYPE=bf16", "--dtype", "f16"), "--const DTYPE=bf16 contradicts --dtype f16")
	wantFail(t, runFac(t, dir, "ir", "--const", "BLOCK_M=0"), "kernel flash_fwd: BLOCK_M = 0: want 1 to 4096")
	wantFail(t, runFac(t, dir, "build", "--const", "DTYPE=f16", "--dtype", "bf16", "-o", "x.bundle"), "--const DTYPE=f16 contradicts --dtype bf16")
	r = runFac(t, dir, "run", "--seqlen-q", "64", "--seqlen-k", "64", "--const", "DTYPE=bf16", "--const", "HEAD_DIM=32")
	wantOK(t, r)
	if !strings.Contains(r.stdout, "dtype=bf16") || !strings.Contains(r.stdout, "D=32") {
		t.Errorf("--const DTYPE=bf16 HEAD_DIM=32 did not set the dtype and head dim:\n%s", r.stdout)
	}
}

// TestRunFlagsIssue46Item13: --bundle with --device cpu is refused (it was
// ignored), and --blockmask-mask is the default --mask, as a recorded
// mask is.
func TestRunFlagsIssue46Item13(t *testing.T) {
	dir := t.TempDir()
	wantFail(t, runFac(t, dir, "run", "--device", "cpu", "--bundle", "/nonexistent"), "--bundle /nonexistent: bundles hold GPU kernels, which --device cpu does not run")
	wantFail(t, runFac(t, dir, "run", "--blockmask-mask", "causal"), "--blockmask-mask causal says which mask a --blockmask folder was made for; give --blockmask DIR too")
	wantOK(t, runFac(t, dir, "blockmask", "--mask", "causal", "--block", "64", "--out", "bm", "--seqlen-q", "128", "--seqlen-k", "128", "--batch", "1"))
	// A folder that records no mask (from PyTorch, or format 1).
	meta := `{"format": "fac-blockmask/1", "seq_lengths": [128, 128], "block_size": [64, 64]}`
	if err := os.WriteFile(filepath.Join(dir, "bm", "block_mask.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runFac(t, dir, "run", "--blockmask", "bm", "--blockmask-mask", "causal", "--dim", "16", "--batch", "1")
	wantOK(t, r)
	if !strings.Contains(r.stdout, "mask=causal") || !strings.Contains(r.stdout, "check passed") {
		t.Errorf("--blockmask-mask causal did not become the mask:\n%s", r.stdout)
	}
}

// TestNumSplitsZeroIssue46Item15: --num-splits 0 was taken as auto while
// the help says "auto, or 1 (off) to 64".
func TestNumSplitsZeroIssue46Item15(t *testing.T) {
	wantFail(t, runFac(t, "", "run", "--num-splits", "0", "--seqlen-q", "3", "--seqlen-k", "8", "--dim", "16"),
		"--num-splits 0: want auto or 1 (off) to 64")
	if r := runFac(t, "", "run", "--help"); !strings.Contains(r.stdout, "auto, or 1 (off) to 64") {
		t.Errorf("run --help:\n%s", r.stdout)
	}
}

// TestCompileVocabularyIssue46Item16: fac compile takes --dtype and --dim
// as run and build do (unknown flag: --dtype), defaults to bf16 and
// D = 128 as build does, so its help example gets the arch's tuned set
// (it printed "tuned arguments: none": the set was looked up only with an
// explicit HEAD_DIM), and warns when a GPU compile has no tensor-core
// instruction (f32 compiled PTX without any, silently).
func TestCompileVocabularyIssue46Item16(t *testing.T) {
	dir := t.TempDir()
	r := runFac(t, "", "compile", "--help")
	for _, want := range []string{"--dtype string", "--dim int"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("compile --help lacks %q", want)
		}
	}
	// The help example, as tile IR (no llc needed): a tuned set applies.
	r = runFac(t, dir, "compile", "--mask", "causal", "--const", "DTYPE=bf16", "--arch", "sm_90a", "--emit", "tir", "-v", "-o", "k.tir")
	wantOK(t, r)
	if strings.Contains(r.stderr, "tuned arguments: none") || !strings.Contains(r.stderr, "tuned arguments: BLOCK_M=128 BLOCK_N=128") {
		t.Errorf("help example: %s", r.stderr)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "k.tir"))
	if !strings.Contains(string(b), "HEAD_DIM = 128") || !strings.Contains(string(b), "bf16") {
		t.Errorf("compile's defaults are not bf16, D = 128")
	}
	r = runFac(t, dir, "compile", "--mask", "causal", "--dtype", "bf16", "--dim", "64", "--arch", "sm_90a", "--emit", "tir", "-v", "-o", "k.tir")
	if r.code != 0 || !strings.Contains(r.stderr, "consumer_groups=3") {
		t.Errorf("--dtype bf16 --dim 64 did not take D = 64's tuned set: %s", r.stderr)
	}
	// LLVM IR needs no llc: f32 warns, bf16 does not.
	r = runFac(t, dir, "compile", "--mask", "causal", "--dtype", "f32", "--arch", "sm_80", "--emit", "llvm", "-o", "k.ll")
	wantOK(t, r)
	if !strings.Contains(r.stderr, "fac: warning: kernel flash_fwd for sm_80 uses no tensor cores (no mma or wgmma in its code): DTYPE is f32") {
		t.Errorf("f32 GPU compile: no warning:\n%s", r.stderr)
	}
	r = runFac(t, dir, "compile", "--mask", "causal", "--arch", "sm_80", "--emit", "llvm", "-o", "k.ll")
	if r.code != 0 || strings.Contains(r.stderr, "tensor cores") {
		t.Errorf("bf16 GPU compile: exit %d, %s", r.code, r.stderr)
	}
	wantFail(t, runFac(t, dir, "compile", "--kernel", "block_classify", "--dtype", "bf16", "--emit", "tir"), "--dtype bf16: kernel block_classify has no compile-time parameter DTYPE")
	if r := runFac(t, dir, "compile", "--kernel", "block_classify", "--emit", "tir", "-o", "c.tir"); r.code != 0 {
		t.Errorf("block_classify with the defaults: %s", r.stderr)
	}
	r = runFac(t, dir, "ir", "--dtype", "bf16", "--dim", "32")
	if r.code != 0 || !strings.Contains(r.stdout, "HEAD_DIM = 32") || !strings.Contains(r.stdout, "bf16") {
		t.Errorf("ir --dtype bf16 --dim 32: exit %d, %s", r.code, r.stderr)
	}
}

// TestSplitPlanExplainedIssue46Item17: a full-length call that runs
// split-KV (1000 × 1000 at B = H = 2: its 64 q tiles fill a quarter of 132
// multiprocessors) says why under the header "kernel flash_fwd".
func TestSplitPlanExplainedIssue46Item17(t *testing.T) {
	r := runFac(t, "", "run", "--mask", "causal", "--seqlen-q", "1000", "--seqlen-k", "1000", "--dim", "16", "--no-check")
	wantOK(t, r)
	for _, want := range []string{
		"decoding: flash_fwd_splitkv",
		"instead of flash_fwd alone, because of 2 splits: the 64 q tiles of 64 positions would fill 64 of the 264 program slots of 132 multiprocessors (two each)",
		"(--num-splits 1 runs flash_fwd alone)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestReportFiguresIssue46Item20: the report names each figure
// ("relative to max |ref| = 2.6e-07" read as if that were max |ref|).
func TestReportFiguresIssue46Item20(t *testing.T) {
	r := runFac(t, "", "run", "--seqlen-q", "16", "--seqlen-k", "16", "--dim", "16")
	wantOK(t, r)
	if strings.Contains(r.stdout, "relative to max |ref| =") || !strings.Contains(r.stdout, "O: max |O - ref| = ") ||
		!strings.Contains(r.stdout, ", max |ref| = ") || !strings.Contains(r.stdout, ", relative error ") {
		t.Errorf("report:\n%s", r.stdout)
	}
	checkAccuracy(t, r.stdout)
}
