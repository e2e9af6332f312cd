package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/internal/npy"
)

// Regression tests for fac's own checks: a result, an input or a flag that
// does not hold up is an error (exit 1) naming the value, never a printout.

func writeI32s(t *testing.T, path string, shape []int, vals []int32) {
	t.Helper()
	b, err := npy.EncodeI32(shape, vals)
	if err != nil {
		t.Fatal(err)
	}
	if err := npy.WriteFile(path, b); err != nil {
		t.Fatal(err)
	}
}

func writeF32s(t *testing.T, path string, shape []int) {
	t.Helper()
	n := 1
	for _, d := range shape {
		n *= d
	}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(i%7) - 3
	}
	b, err := npy.EncodeF32(shape, vals)
	if err != nil {
		t.Fatal(err)
	}
	if err := npy.WriteFile(path, b); err != nil {
		t.Fatal(err)
	}
}

func wantOK(t *testing.T, r cliResult) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestRunAux: --aux names and files are checked. Before, an unknown name
// (dco=) was ignored and document ids made up, an aux the mask does not
// read was accepted, a repeated one kept the last, a 2-D file was
// flattened and a short one read zeros past its end; a missing doc was
// made up silently.
func TestRunAux(t *testing.T) {
	dir := t.TempDir()
	doc := make([]int32, 64)
	for i := range doc {
		doc[i] = int32(i / 16)
	}
	writeI32s(t, filepath.Join(dir, "doc.npy"), []int{64}, doc)
	writeI32s(t, filepath.Join(dir, "doc2.npy"), []int{64}, doc)
	writeI32s(t, filepath.Join(dir, "doc2d.npy"), []int{8, 8}, doc)
	writeI32s(t, filepath.Join(dir, "short.npy"), []int{10}, doc[:10])
	writeF32s(t, filepath.Join(dir, "slopes1.npy"), []int{1})
	run := func(args ...string) cliResult {
		t.Helper()
		return runFac(t, dir, append([]string{"run", "--seqlen-q", "64", "--seqlen-k", "64", "--dim", "16"}, args...)...)
	}
	wantFail(t, run("--mask", "document", "--aux", "dco=doc.npy"), `--aux dco=doc.npy: the kernel's mods read no aux tensor "dco"`, "doc (mask document)")
	wantFail(t, run("--mask", "causal", "--aux", "doc=doc.npy"), `no aux tensor "doc" (they read: none)`)
	wantFail(t, run("--mask", "document", "--aux", "doc=doc.npy", "--aux", "doc=doc2.npy"), "--aux doc=doc2.npy: aux tensor doc is already given by --aux doc=doc.npy")
	wantFail(t, run("--mask", "document", "--aux", "doc=doc.npy", "--aux", "mask.doc=doc2.npy"), "already given by --aux doc=doc.npy")
	wantFail(t, run("--mask", "document", "--aux", "doc=doc2d.npy"), "--aux doc=doc2d.npy: shape [8 8]; doc is declared without a shape (tensor[i32]), so it must be 1-D")
	wantFail(t, run("--mask", "document", "--aux", "doc=short.npy"), "--aux doc=short.npy: 10 elements", "max(seqlen-q, seqlen-k)", "64 elements")
	wantFail(t, run("--mask", "document", "--aux", "doc=doc.npy", "--seqlen-k", "65"), "--aux doc=doc.npy: 64 elements", "65 elements")
	wantFail(t, run("--score", "alibi", "--aux", "slopes=slopes1.npy"), "--aux slopes=slopes1.npy: 1 elements, but score alibi reads slopes", "heads")
	wantFail(t, run("--mask", "document"), `mask document reads aux tensor "doc" (i32): give --aux doc=FILE.npy (64 elements), or --random-aux`)
	wantFail(t, run("--score", "alibi"), `score alibi reads aux tensor "slopes"`, "--random-aux")
	wantFail(t, run("--mask", "document", "--aux", "doc"), `--aux "doc": want NAME=FILE.npy`)

	r := run("--mask", "document", "--aux", "doc=doc.npy")
	wantOK(t, r)
	checkAccuracy(t, r.stdout)
	r = run("--mask", "document", "--score", "alibi", "--random-aux", "--doc-len", "20", "--heads", "4")
	wantOK(t, r)
	for _, want := range []string{"aux doc made up (--random-aux): 64 positions in 4 document(s) of 20 tokens", "aux slopes made up (--random-aux): ALiBi slopes", "for 4 heads"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	// fac blockmask takes the same flags.
	wantFail(t, runFac(t, dir, "blockmask", "--mask", "document", "--seqlen-q", "64", "--seqlen-k", "64"), `mask document reads aux tensor "doc"`, "--random-aux")
	wantFail(t, runFac(t, dir, "blockmask", "--mask", "document", "--seqlen-q", "64", "--seqlen-k", "64", "--aux", "dco=doc.npy"), `no aux tensor "dco"`)
	wantOK(t, runFac(t, dir, "blockmask", "--mask", "document", "--seqlen-q", "64", "--seqlen-k", "64", "--block", "16", "--aux", "doc=doc.npy"))
}

// TestRunCheck: fac run exits 1 when its result fails its own comparison
// (or holds NaN), prints the figures and "check FAILED", and writes no
// output. Before, a block mask made for "none" used with a causal mask
// printed a relative error of 1.01 and exited 0.
func TestRunCheck(t *testing.T) {
	dir := t.TempDir()
	wantOK(t, runFac(t, dir, "blockmask", "--mask", "none", "--block", "64", "--out", "bm", "--seqlen-q", "256", "--seqlen-k", "256", "--batch", "1"))
	small := []string{"--seqlen-q", "256", "--seqlen-k", "256", "--dim", "16", "--batch", "1"}
	// A block mask that records its mask: another mask is refused up front.
	r := runFac(t, dir, append([]string{"run", "--mask", "causal", "--blockmask", "bm"}, small...)...)
	wantFail(t, r, "--blockmask bm was built for mask none, but the kernel's mask is causal")
	// One that records none (format 1, or from PyTorch) must be vouched
	// for; vouched for wrongly, the check catches it.
	meta := `{"format": "fac-blockmask/1", "seq_lengths": [256, 256], "block_size": [64, 64]}`
	if err := os.WriteFile(filepath.Join(dir, "bm", "block_mask.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runFac(t, dir, append([]string{"run", "--mask", "causal", "--blockmask", "bm"}, small...)...)
	wantFail(t, r, "--blockmask bm does not record the mask it was made for", "--blockmask-mask")
	r = runFac(t, dir, append([]string{"run", "--mask", "causal", "--blockmask", "bm", "--blockmask-mask", "causal", "-o", "o.npy"}, small...)...)
	wantFail(t, r, "check FAILED", "O's relative error")
	if !strings.Contains(r.stdout, "max |ref| = ") || !strings.Contains(r.stdout, "relative error") {
		t.Errorf("no figures printed:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "o.npy")); err == nil {
		t.Error("o.npy written although the check failed")
	}
	// NaN anywhere fails.
	nan := filepath.Join(dir, "nan.fa")
	if err := os.WriteFile(nan, []byte("score nanscore(s, b, h, q_idx, kv_idx) {\n    return (s - s) / 0.0\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runFac(t, dir, "run", nan, "--score", "nanscore", "--seqlen-q", "16", "--seqlen-k", "16", "--dim", "16")
	wantFail(t, r, "check FAILED", "NaN in the output")
	// --no-check skips the reference and says so.
	r = runFac(t, dir, append([]string{"run", "--mask", "causal", "--no-check"}, small...)...)
	wantOK(t, r)
	if !strings.Contains(r.stdout, "check skipped (--no-check)") || strings.Contains(r.stdout, "max |O - ref|") {
		t.Errorf("--no-check:\n%s", r.stdout)
	}
	// A passing run says so, with the tolerance; --tol tightens it.
	r = runFac(t, dir, append([]string{"run", "--mask", "causal"}, small...)...)
	wantOK(t, r)
	if !strings.Contains(r.stdout, "check passed (tolerance for f32: 0.0001") {
		t.Errorf("no verdict:\n%s", r.stdout)
	}
	wantFail(t, runFac(t, dir, append([]string{"run", "--mask", "causal", "--tol", "1e-30"}, small...)...), "check FAILED")
	wantFail(t, runFac(t, dir, "run", "--dtype", "f64"), `--dtype "f64": want f32, bf16 or f16`)
}

// TestRunBlockMaskProvenance: fac blockmask records the mask in the folder
// and fac run uses it: as the default mask, and to infer the sequence
// lengths and block size; a flag that contradicts the folder is an error
// naming both.
func TestRunBlockMaskProvenance(t *testing.T) {
	dir := t.TempDir()
	wantOK(t, runFac(t, dir, "blockmask", "--mask", "sliding_window(40, 0)", "--seqlen-q", "300", "--seqlen-k", "200", "--block", "64", "--out", "bm"))
	js, _ := os.ReadFile(filepath.Join(dir, "bm", "block_mask.json"))
	var meta struct {
		Format     string `json:"format"`
		Mask       string `json:"mask"`
		BatchHeads []int  `json:"batch_heads"`
	}
	if err := json.Unmarshal(js, &meta); err != nil || meta.Format != "fac-blockmask/2" || meta.Mask != "sliding_window(40, 0)" || len(meta.BatchHeads) != 2 {
		t.Fatalf("block_mask.json: %v\n%s", err, js)
	}
	r := runFac(t, dir, "run", "--blockmask", "bm", "--dim", "16")
	wantOK(t, r)
	checkAccuracy(t, r.stdout)
	if !strings.Contains(r.stdout, "mask=sliding_window(40, 0)") || !strings.Contains(r.stdout, "Sq=300 Sk=200") {
		t.Errorf("mask and sizes not taken from the folder:\n%s", r.stdout)
	}
	// Spelled differently, the same mask.
	wantOK(t, runFac(t, dir, "run", "--blockmask", "bm", "--dim", "16", "--mask", "sliding_window(left=40, right=0)"))
	wantFail(t, runFac(t, dir, "run", "--blockmask", "bm", "--mask", "sliding_window(41, 0)"), "was built for mask sliding_window(40, 0), but the kernel's mask is sliding_window(41, 0)")
	wantFail(t, runFac(t, dir, "run", "--blockmask", "bm", "--seqlen-q", "128"), "--seqlen-q is 128, but --blockmask bm is for sequence lengths 300×200")
	wantFail(t, runFac(t, dir, "run", "--blockmask", "bm", "--block", "128"), "--block is 128, but --blockmask bm has blocks of 64×64")
	wantFail(t, runFac(t, dir, "run", "--blockmask", "bm", "--const", "SPARSE_K=128"), "--blockmask bm (blocks of 64×64) contradicts --const SPARSE_K=128")
	// The old flag name still works.
	wantOK(t, runFac(t, dir, "run", "--blockmask", "bm", "--dim", "16", "--blockmask-block", "64"))
}

// TestRunShapeFromFiles: sizes come from --q/--k/--v when no flag gives
// them; a flag or file that contradicts another is an error naming both.
// Before, the flags' defaults were used and the files refused.
func TestRunShapeFromFiles(t *testing.T) {
	dir := t.TempDir()
	writeF32s(t, filepath.Join(dir, "q.npy"), []int{1, 4, 40, 16})
	writeF32s(t, filepath.Join(dir, "k.npy"), []int{1, 2, 24, 16})
	writeF32s(t, filepath.Join(dir, "v.npy"), []int{1, 2, 24, 16})
	writeF32s(t, filepath.Join(dir, "v3.npy"), []int{1, 2, 24})
	qkv := []string{"run", "--mask", "causal", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy"}
	r := runFac(t, dir, qkv...)
	wantOK(t, r)
	checkAccuracy(t, r.stdout)
	if !strings.Contains(r.stdout, "shape B=1 H=4 Hkv=2 Sq=40 Sk=24 D=16") {
		t.Errorf("sizes not from the files:\n%s", r.stdout)
	}
	wantOK(t, runFac(t, dir, append(qkv, "--heads", "4", "--seqlen-k", "24")...))
	wantFail(t, runFac(t, dir, append(qkv, "--seqlen-q", "100")...), "--seqlen-q is 100, but --q q.npy has shape [1 4 40 16] (seqlen-q 40)")
	wantFail(t, runFac(t, dir, append(qkv, "--dim", "32")...), "--dim is 32, but --q q.npy has shape [1 4 40 16] (dim 16)")
	wantFail(t, runFac(t, dir, append(qkv, "--kv-heads", "4")...), "--kv-heads is 4, but --k k.npy has shape [1 2 24 16] (kv-heads 2)")
	wantFail(t, runFac(t, dir, "run", "--k", "k.npy", "--v", "q.npy"), "--k k.npy has shape [1 2 24 16], but --v q.npy has shape [1 4 40 16] (kv-heads 4)")
	wantFail(t, runFac(t, dir, "run", "--v", "v3.npy"), "--v v3.npy: shape [1 2 24], want 4 dims [B, Hkv, Sk, Dv]")
}

// TestSharedFlags: positional source files, --device checks, - for
// stdout with the report on stderr, and old flag names, the same in every
// command.
func TestSharedFlags(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "m.fa")
	if err := os.WriteFile(src, []byte("mask band(b, h, q_idx, kv_idx) {\n    return kv_idx <= q_idx && q_idx - kv_idx < 20\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	small := []string{"--seqlen-q", "64", "--seqlen-k", "64", "--dim", "16"}
	for _, args := range [][]string{
		append([]string{"run", src, "--mask", "band"}, small...),
		append([]string{"run", "-f", src, "--mask", "band"}, small...),
		{"blockmask", src, "--mask", "band", "--seqlen-q", "256", "--seqlen-k", "256"},
	} {
		wantOK(t, runFac(t, dir, args...))
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--device", "gpu"}, `--device "gpu": want cpu or cuda`},
		{[]string{"blockmask", "--mask", "causal", "--device", "gpu"}, `--device "gpu": want cpu or cuda`},
		{[]string{"bench", "--device", "cpu"}, `--device "cpu": want cuda`},
		{[]string{"blockmask"}, "--mask is required"},
		{[]string{"blockmask", "--mask", "causal", "--out", "-"}, "--out -: a block mask is a folder"},
		{[]string{"run", "--out", "-", "--lse-out", "-"}, "--lse-out and --out both name standard output"},
		{[]string{"run", "--block", "0"}, "--block 0: block sizes must be positive"},
	} {
		wantFail(t, runFac(t, dir, c.args...), c.want)
	}
	// Data on stdout, the report on stderr.
	r := runFac(t, dir, append([]string{"run", "--mask", "causal", "-o", "-"}, small...)...)
	wantOK(t, r)
	if a, err := npy.Decode([]byte(r.stdout)); err != nil || len(a.Shape) != 4 || a.Shape[2] != 64 {
		t.Errorf("stdout is not O as .npy: %v", err)
	}
	if !strings.Contains(r.stderr, "check passed") {
		t.Errorf("the report is not on stderr:\n%s", r.stderr)
	}
	r = runFac(t, dir, "blockmask", "--mask", "causal", "--seqlen-q", "256", "--seqlen-k", "256", "--png", "-")
	wantOK(t, r)
	if !strings.HasPrefix(r.stdout, "\x89PNG") || !strings.Contains(r.stderr, "density") {
		t.Errorf("--png -: stdout %.8q, stderr %q", r.stdout, r.stderr)
	}
	// --output is the old name of -o on ir and compile.
	r = runFac(t, dir, "ir", "--mask", "causal", "--output", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "flash_fwd") {
		t.Errorf("ir --output -: exit %d\n%s", r.code, r.stderr)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("files made: %v (want m.fa only: - is stdout, not a file)", left)
	}
}

// TestBuildToStdout: build -o - writes the bundle to stdout and the
// "wrote" line to stderr. Before, it made a file named "-".
func TestBuildToStdout(t *testing.T) {
	if _, err := llc.Find(); err != nil {
		t.Skipf("no llc: %v", err)
	}
	dir := t.TempDir()
	r := runFac(t, dir, "build", "--mask", "causal", "--dim", "64", "--arch", "sm_90a", "--cache-dir", filepath.Join(dir, "cache"), "-o", "-")
	wantOK(t, r)
	if !bytes.HasPrefix(bytes.TrimSpace([]byte(r.stdout)), []byte("{")) || !strings.Contains(r.stdout, `"format"`) {
		t.Errorf("stdout is not a bundle: %.60q", r.stdout)
	}
	if !strings.Contains(r.stderr, "wrote stdout: ") {
		t.Errorf("stderr: %q", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); err == nil {
		t.Error(`build -o - made a file named "-"`)
	}
}

// TestConsumerGroupsRefused: consumer groups need sm_90a's producer
// warpgroup and go with neither pingpong nor a persistent loop; each
// refusal says why, and a launch checks that the groups share mask rows.
func TestConsumerGroupsRefused(t *testing.T) {
	dir := t.TempDir()
	g := []string{"--mask", "causal", "--const", "DTYPE=bf16", "--const", "HEAD_DIM=64", "--const", "BLOCK_M=64", "--const", "num_warps=4",
		"--const", "consumer_groups=3", "--const", "SPARSE_Q=192", "--const", "warp_specialize=true", "--cache-dir", "-", "-o", "k.ptx"}
	wantFail(t, runFac(t, dir, append([]string{"compile", "--arch", "sm_80"}, g...)...), "consumer_groups = 3: the groups need a producer warpgroup")
	wantFail(t, runFac(t, dir, append([]string{"compile", "--arch", "sm_90a", "--const", "pingpong=true"}, g...)...), "pingpong's named barriers are the groups'")
	wantFail(t, runFac(t, dir, append([]string{"compile", "--arch", "sm_90a", "--const", "persistent=true"}, g...)...),
		"consumer_groups = 3 needs a producer warpgroup, and warp_specialize is off: consumer groups with a loop around the pipelined one")
	wantFail(t, runFac(t, dir, "run", "--device", "cpu", "--mask", "causal", "--const", "consumer_groups=3", "--const", "BLOCK_M=64",
		"--seqlen-q", "100", "--seqlen-k", "100", "--dim", "16"), "must be multiples of the groups' 3×64 rows (--const SPARSE_Q=192)")
}
