package main

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/internal/npy"
	"github.com/fac-compiler/fac/reference"
)

// TestRunSinks: --sinks runs flash_fwd_sinks and checks it against the
// reference with sinks; its length gives or must match --heads.
func TestRunSinks(t *testing.T) {
	dir := t.TempDir()
	sinks := filepath.Join(dir, "sinks.npy")
	writeF32s(t, sinks, []int{4})
	r := runFac(t, "", "run", "--mask", "sliding_window(20, 0)", "--sinks", sinks, "--kv-heads", "2",
		"--seqlen-q", "70", "--seqlen-k", "33", "--dim", "16")
	wantOK(t, r)
	for _, want := range []string{"kernel flash_fwd_sinks", "H=4 Hkv=2", "check passed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	// Decoding with sinks: split over the keys, merged by flash_fwd_combine_sinks.
	r = runFac(t, "", "run", "--mask", "causal_bottom_right", "--sinks", sinks, "--kv-heads", "1",
		"--seqlen-q", "1", "--seqlen-k", "300", "--dim", "16", "--num-splits", "3")
	wantOK(t, r)
	for _, want := range []string{"flash_fwd_combine_sinks: 3 splits", "check passed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	// Over a paged cache: a sequence of no keys gets its heads' sinks.
	r = runFac(t, "", "run", "--mask", "causal_bottom_right", "--sinks", sinks, "--kv-heads", "2", "--batch", "3",
		"--seqlen-q", "2", "--dim", "16", "--page-size", "16", "--cache-seqlens", "100,0,33")
	wantOK(t, r)
	for _, want := range []string{"flash_fwd_combine_sinks", "check passed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	wantFail(t, runFac(t, "", "run", "--sinks", sinks, "--heads", "3", "--seqlen-q", "8", "--seqlen-k", "8", "--dim", "16"),
		"--heads is 3", "--sinks")
	wantFail(t, runFac(t, "", "run", "--dsinks-out", "ds.npy", "--seqlen-q", "8", "--seqlen-k", "8", "--dim", "16"),
		"--dsinks-out needs --backward")
	wantFail(t, runFac(t, dir, "run", "--backward", "--dsinks-out", "ds.npy", "--seqlen-q", "8", "--seqlen-k", "8", "--dim", "16"),
		"--dsinks-out needs --sinks")
}

// TestRunBackwardSinks: --backward with --sinks runs the sinks' backward
// (flash_bwd_sinks), checks dsinks with the other gradients, and
// --dsinks-out writes [H] values that match float64 gradients computed
// here (rows past the window's reach keep nothing).
func TestRunBackwardSinks(t *testing.T) {
	dir := t.TempDir()
	const b, h, hkv, sk, d = 2, 4, 1, 21, 16
	sh := reference.Shape{B: b, H: h, HKV: hkv, Sq: 45, Sk: sk, D: d}
	q, k, v, do := writeQKVDO(t, dir, rand.New(rand.NewPCG(5, 6)), sh)
	sinks := []float32{-3, -2, 0.5, 4}
	enc, err := npy.EncodeF32([]int{h}, sinks)
	if err != nil {
		t.Fatal(err)
	}
	if err := npy.WriteFile(filepath.Join(dir, "sinks.npy"), enc); err != nil {
		t.Fatal(err)
	}
	r := runFac(t, dir, "run", "--backward", "--mask", "sliding_window(10, 0)", "--sinks", "sinks.npy", "--q", "q.npy", "--k", "k.npy",
		"--v", "v.npy", "--do", "do.npy", "--dsinks-out", "dsinks.npy", "--dk-out", "dk.npy")
	wantOK(t, r)
	for _, want := range []string{"kernel flash_fwd_sinks", "flash_bwd_sinks", "dsinks ", "check passed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	ref := reference.AttentionGradSinks(f64s(q), f64s(k), f64s(v), f64s(do), sh,
		float64(float32(1/math.Sqrt(d))), func(b, h, i, j int) bool { return j <= i && i-j <= 10 }, nil, nil, nil, f64s(sinks))
	wantGradFiles(t, dir, 1e-4, gradFile{"dsinks.npy", []int{h}, ref.DSinks}, gradFile{"dk.npy", []int{b, hkv, sk, d}, ref.DK})
}

// TestBuildSinksVarlen: fac build --sinks --varlen --backward bundles the
// sinks kernels (forward, its split-KV merge with sinks, backward) and the
// packed-sequence kernels beside the plain ones, and --sinks --paged the
// paged ones with sinks, so that a bundle-only device runs those calls.
func TestBuildSinksVarlen(t *testing.T) {
	if _, err := llc.Find(); err != nil {
		t.Skipf("no llc: %v", err)
	}
	out := filepath.Join(t.TempDir(), "sv.bundle")
	r := runFac(t, "", "build", "--sinks", "--varlen", "--backward", "--mask", "causal", "--dim", "64", "--cache-dir", "-", "-v", "-o", out)
	wantOK(t, r)
	for _, k := range []string{"flash_fwd", "flash_fwd_sinks", "flash_fwd_combine_sinks", "flash_bwd_sinks", "flash_fwd_varlen", "flash_bwd_varlen", "flash_bwd"} {
		if !strings.Contains(r.stderr, "build: "+k+" ") {
			t.Errorf("no %s in the bundle:\n%s", k, r.stderr)
		}
	}
	// With --paged, the sinks forward's paged kernels too (merged with sinks).
	r = runFac(t, "", "build", "--sinks", "--paged", "--mask", "causal_bottom_right", "--dim", "64", "--cache-dir", "-", "-v", "-o", out)
	wantOK(t, r)
	if !strings.Contains(r.stderr, "build: flash_fwd_paged ") || !strings.Contains(r.stderr, "build: flash_fwd_combine_sinks ") {
		t.Errorf("no paged kernels with sinks in the bundle:\n%s", r.stderr)
	}
}
