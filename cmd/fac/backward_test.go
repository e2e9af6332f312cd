package main

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/internal/npy"
	"github.com/fac-compiler/fac/reference"
)

// writeTensor writes N(0, 1) values of shape to dir/name as f32 .npy.
func writeTensor(t *testing.T, dir, name string, rng *rand.Rand, shape ...int) []float32 {
	t.Helper()
	n := 1
	for _, d := range shape {
		n *= d
	}
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	b, err := npy.EncodeF32(shape, xs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return xs
}

func readTensor(t *testing.T, path string) *npy.Array {
	t.Helper()
	a, err := npy.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// writeQKVDO writes N(0, 1) inputs of shape sh to dir as f32 .npy files,
// in this order: q.npy [B, H, Sq, D], k.npy [B, HKV, Sk, D], v.npy
// [B, HKV, Sk, VD] and do.npy [B, H, Sq, VD].
func writeQKVDO(t *testing.T, dir string, rng *rand.Rand, sh reference.Shape) (q, k, v, do []float32) {
	t.Helper()
	q = writeTensor(t, dir, "q.npy", rng, sh.B, sh.H, sh.Sq, sh.D)
	k = writeTensor(t, dir, "k.npy", rng, sh.B, sh.HKV, sh.Sk, sh.D)
	v = writeTensor(t, dir, "v.npy", rng, sh.B, sh.HKV, sh.Sk, sh.VD())
	do = writeTensor(t, dir, "do.npy", rng, sh.B, sh.H, sh.Sq, sh.VD())
	return q, k, v, do
}

// f64s widens xs to float64, the reference's values.
func f64s(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// gradFile is a gradient fac wrote to file: the shape it must have and
// the float64 values it must match.
type gradFile struct {
	file  string
	shape []int
	want  []float64
}

// wantGradFiles reads each file from dir and wants its shape, and its
// largest error within rtol of the largest |want| (which must not be 0).
func wantGradFiles(t *testing.T, dir string, rtol float64, files ...gradFile) {
	t.Helper()
	for _, o := range files {
		a := readTensor(t, filepath.Join(dir, o.file))
		if !slices.Equal(a.Shape, o.shape) {
			t.Fatalf("%s: shape %v, want %v", o.file, a.Shape, o.shape)
		}
		maxErr, maxRef := 0.0, 0.0
		for i, x := range a.F32() {
			maxErr = math.Max(maxErr, math.Abs(float64(x)-o.want[i]))
			maxRef = math.Max(maxRef, math.Abs(o.want[i]))
		}
		if maxRef == 0 || maxErr > rtol*maxRef {
			t.Errorf("%s: max error %.3g relative to %.3g", o.file, maxErr, maxRef)
		}
	}
}

// wantCausalGrads wants dq.npy, dk.npy and dv.npy in dir to be the causal
// attention's gradients for the inputs writeQKVDO wrote (shape sh, the
// default scale) within 1e-5 of each one's largest value.
func wantCausalGrads(t *testing.T, dir string, sh reference.Shape, q, k, v, do []float32) {
	t.Helper()
	ref := reference.AttentionGrad(f64s(q), f64s(k), f64s(v), f64s(do), sh, float64(float32(1/math.Sqrt(float64(sh.D)))),
		func(b, h, i, j int) bool { return i >= j }, nil, nil, nil)
	wantGradFiles(t, dir, 1e-5,
		gradFile{"dq.npy", []int{sh.B, sh.H, sh.Sq, sh.D}, ref.DQ},
		gradFile{"dk.npy", []int{sh.B, sh.HKV, sh.Sk, sh.D}, ref.DK},
		gradFile{"dv.npy", []int{sh.B, sh.HKV, sh.Sk, sh.VD()}, ref.DV})
}

// TestRunBackward is the backward issue's CLI acceptance: fac run
// --backward --device cpu with q, k, v, do files (GQA, Sq ≠ Sk) checks
// its gradients and writes dQ, dK, dV of the right shapes, which match
// float64 gradients computed here.
func TestRunBackward(t *testing.T) {
	dir := t.TempDir()
	sh := reference.Shape{B: 1, H: 4, HKV: 2, Sq: 37, Sk: 53, D: 16}
	q, k, v, do := writeQKVDO(t, dir, rand.New(rand.NewPCG(1, 2)), sh)
	r := runFac(t, dir, "run", "--backward", "--device", "cpu", "--mask", "causal", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy",
		"--do", "do.npy", "--dq-out", "dq.npy", "--dk-out", "dk.npy", "--dv-out", "dv.npy")
	wantOK(t, r)
	for _, want := range []string{"backward: flash_bwd_preprocess, flash_bwd, flash_bwd_postprocess", "dO: do.npy", "dQ ", "dK ", "dV ",
		"check passed (tolerance for f32: 0.0001"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	wantCausalGrads(t, dir, sh, q, k, v, do)
	// A random dO, bf16, a score with an aux gradient, the deterministic
	// mode (a backward-only compile-time argument) and stdout.
	r = runFac(t, dir, "run", "--backward", "--score", "alibi", "--random-aux", "--dtype", "bf16", "--seqlen-q", "40", "--seqlen-k", "40",
		"--dim", "16", "--const", "DETERMINISTIC=true", "--const", "AUX_GRAD=false", "--dv-out", "-")
	wantOK(t, r)
	if !strings.Contains(r.stderr, "dO: random") || !strings.Contains(r.stderr, "flash_bwd_dq") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if !bytes.HasPrefix([]byte(r.stdout), []byte("\x93NUMPY")) {
		t.Errorf("stdout is not an .npy: %.20q", r.stdout)
	}
	r = runFac(t, dir, "run", "--backward", "--score", "alibi", "--random-aux", "--seqlen-q", "40", "--seqlen-k", "40", "--dim", "16")
	wantOK(t, r)
	if !strings.Contains(r.stdout, "dslopes ") {
		t.Errorf("no aux gradient figures:\n%s", r.stdout)
	}
}

// TestRunBackwardChecks: a failed check exits 1 and writes no gradient;
// --no-check says the gradients are unchecked; the backward's flags are
// refused where they make no sense.
func TestRunBackwardChecks(t *testing.T) {
	dir := t.TempDir()
	small := []string{"--seqlen-q", "24", "--seqlen-k", "24", "--dim", "16", "--batch", "1"}
	run := func(args ...string) cliResult {
		return runFac(t, dir, append(append([]string{"run"}, args...), small...)...)
	}
	r := run("--backward", "--mask", "causal", "--dtype", "bf16", "--tol", "1e-9", "--dq-out", "dq.npy")
	wantFail(t, r, "check FAILED against float64 gradients", "dQ's relative error")
	if _, err := os.Stat(filepath.Join(dir, "dq.npy")); err == nil {
		t.Error("dq.npy written although the check failed")
	}
	r = run("--backward", "--mask", "causal", "--no-check", "--dk-out", "dk.npy")
	wantOK(t, r)
	if !strings.Contains(r.stdout, "check skipped (--no-check)") || strings.Contains(r.stdout, "max |err|") {
		t.Errorf("--no-check:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "dk.npy")); err != nil {
		t.Error(err)
	}
	wantFail(t, run("--dq-out", "dq.npy"), "--dq-out needs --backward")
	wantFail(t, run("--do", "do.npy"), "--do needs --backward")
	wantFail(t, run("--backward", "-o", "o.npy"), "--out and --lse-out write the forward's O and LSE")
	wantFail(t, run("--backward", "--dq-out", "-", "--dk-out", "-"), "--dk-out and --dq-out both name standard output")
	wantFail(t, run("--backward", "--const", "NOPE=1"), "neither flash_fwd nor the backward kernels have a compile-time parameter NOPE")
	wantFail(t, run("--const", "DETERMINISTIC=true"), "has no compile-time parameter DETERMINISTIC")
	// --do must have q's shape.
	rng := rand.New(rand.NewPCG(3, 4))
	writeTensor(t, dir, "do.npy", rng, 1, 2, 25, 16)
	wantFail(t, run("--backward", "--do", "do.npy"), "--seqlen-q is 24, but --do do.npy has shape [1 2 25 16]")
}

// TestBenchBackwardFlags: fac bench --backward and --step are GPU
// commands, on Sq = Sk shapes (checked before anything runs).
func TestBenchBackwardFlags(t *testing.T) {
	wantFail(t, runFac(t, "", "bench", "--backward", "--device", "cpu"), `--device "cpu": want cuda`)
	wantFail(t, runFac(t, "", "bench", "--step", "--device", "cpu"), `--device "cpu": want cuda`)
	wantFail(t, runFac(t, "", "bench", "--step", "--backward"), "give one of --backward and --step")
	wantFail(t, runFac(t, "", "bench", "--step", "--seqlen-q", "16"), "--backward and --step time Sq = Sk")
	for _, f := range [][]string{{"--backward"}, {"--ragged"}, {"--decode", "--page-size", "16"}, {"--varlen-len", "100"}} {
		wantFail(t, runFac(t, "", append([]string{"bench", "--sinks"}, f...)...), "--sinks times the forward and decoding rows")
	}
}

// TestBuildBackward: fac build --backward bundles the backward's kernels
// next to the forward's, the pre- and postprocess once per dtype and dim.
func TestBuildBackward(t *testing.T) {
	if _, err := llc.Find(); err != nil {
		t.Skipf("no llc: %v", err)
	}
	dir := t.TempDir()
	r := runFac(t, dir, "build", "--backward", "--mask", "causal", "--score", "identity", "--score", "softcap(2.5)", "--dim", "64",
		"--const", "num_warps=8", "--arch", "sm_90a", "--cache-dir", filepath.Join(dir, "cache"), "-o", "b.bundle")
	wantOK(t, r)
	bu, err := bundle.Read(filepath.Join(dir, "b.bundle"))
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, k := range bu.Kernels {
		count[k.Ident.Kernel]++
		if k.Ident.Kernel == "flash_bwd" && k.Threads != 256 {
			t.Errorf("flash_bwd has %d threads, want 256 (num_warps=8)", k.Threads)
		}
	}
	want := map[string]int{"flash_fwd": 2, "block_classify": 1, "flash_bwd_preprocess": 1, "flash_bwd": 2, "flash_bwd_postprocess": 1}
	js, _ := json.Marshal(count)
	for k, n := range want {
		if count[k] != n {
			t.Errorf("bundle kernels %s, want %d %s", js, n, k)
		}
	}
}

// TestBenchInputsScores: fac bench makes up ALiBi's slopes (the usual
// 2^(-8(h+1)/H)) and labels a row with its score; an aux tensor it cannot
// make up is an error naming it.
func TestBenchInputsScores(t *testing.T) {
	sh := fac.Shape{Batch: 1, Heads: 4, SeqQ: 8, SeqK: 8, Dim: 16}
	fwd, err := fac.CompileForward(fac.Options{Mask: "causal", Score: "alibi"}, 16)
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := benchInputs(fwd, "causal", sh, 1000)
	if err != nil {
		t.Fatal(err)
	}
	slopes, ok := in.Aux["slopes"].([]float32)
	if !ok || len(slopes) != 4 || slopes[0] != 0.25 || slopes[3] != 1.0/256 {
		t.Errorf("slopes %v, want [1/4 1/16 1/64 1/256]", in.Aux["slopes"])
	}
	r := benchResult{Mask: "causal", Score: "alibi"}
	if got := r.label(); got != "causal alibi" {
		t.Errorf("label %q, want %q", got, "causal alibi")
	}
	src := "score shift(s, b, h, q_idx, kv_idx, bias: tensor[f32]) {\n    return s + bias[h]\n}\n"
	fwd, err = fac.CompileForward(fac.Options{Mask: "none", Score: "shift", Sources: map[string]string{"shift.fa": src}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := benchInputs(fwd, "none", sh, 1000); err == nil || !strings.Contains(err.Error(), `aux tensor "bias"`) {
		t.Errorf("err %v, want one naming aux tensor \"bias\"", err)
	}
}
