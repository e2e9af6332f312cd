package main

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/reference"
)

// TestRunDimVFromFiles: V's head dim comes from --v (and --do) when it
// differs from q's and k's: the forward and the backward run, check and
// write O [B, H, Sq, Dv], dQ [.., D], dK [.., D], dV [.., Dv], whose values
// match float64 gradients computed here.
func TestRunDimVFromFiles(t *testing.T) {
	dir := t.TempDir()
	const b, h, sq, dv = 1, 4, 37, 24
	sh := reference.Shape{B: b, H: h, HKV: 2, Sq: sq, Sk: 53, D: 40, DV: dv}
	q, k, v, do := writeQKVDO(t, dir, rand.New(rand.NewPCG(5, 6)), sh)
	r := runFac(t, dir, "run", "--mask", "causal", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "-o", "o.npy")
	wantOK(t, r)
	if !strings.Contains(r.stdout, "D=40 Dv=24") || !strings.Contains(r.stdout, "check passed") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	if a := readTensor(t, filepath.Join(dir, "o.npy")); !slices.Equal(a.Shape, []int{b, h, sq, dv}) {
		t.Errorf("o.npy: shape %v, want [%d %d %d %d]", a.Shape, b, h, sq, dv)
	}
	r = runFac(t, dir, "run", "--backward", "--mask", "causal", "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--do", "do.npy",
		"--dq-out", "dq.npy", "--dk-out", "dk.npy", "--dv-out", "dv.npy")
	wantOK(t, r)
	wantCausalGrads(t, dir, sh, q, k, v, do)
}

// TestRunDimVFlag: --dim-v (or --const HEAD_DIM_V) gives V's head dim to
// random inputs, DeepSeek's (192, 128) included, forward, backward,
// split-KV and a sampled check; given twice, the two must agree.
func TestRunDimVFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--dim", "40", "--dim-v", "24", "--mask", "causal", "--seqlen-q", "33", "--seqlen-k", "47"},
		{"--dim", "40", "--const", "HEAD_DIM_V=24", "--mask", "causal", "--seqlen-q", "33", "--seqlen-k", "47"},
		{"--dim", "192", "--dim-v", "128", "--mask", "causal", "--backward", "--seqlen-q", "33", "--seqlen-k", "47"},
		{"--dim", "32", "--dim-v", "64", "--seqlen-q", "1", "--seqlen-k", "300", "--heads", "8", "--kv-heads", "2", "--num-splits", "3"},
		// Over fullCheckPairs: the sampled check takes O's rows Dv wide.
		{"--mask", "sliding_window(60, 0)", "--batch", "1", "--heads", "1", "--seqlen-q", "8200", "--seqlen-k", "8200", "--dim", "8", "--dim-v", "4"},
	} {
		r := runFac(t, "", append([]string{"run"}, args...)...)
		wantOK(t, r)
		for _, want := range []string{"Dv=", "check passed"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("fac run %s: stdout lacks %q:\n%s", strings.Join(args, " "), want, r.stdout)
			}
		}
		if slices.Contains(args, "--num-splits") && !strings.Contains(r.stdout, "decoding: flash_fwd_splitkv") {
			t.Errorf("fac run %s: no split-KV:\n%s", strings.Join(args, " "), r.stdout)
		}
		if slices.Contains(args, "8200") && !strings.Contains(r.stdout, "check sampled") {
			t.Errorf("fac run %s: not a sampled check:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
	wantFail(t, runFac(t, "", "run", "--dim", "40", "--dim-v", "24", "--const", "HEAD_DIM_V=16"), "--const HEAD_DIM_V=16 contradicts --dim-v 24")
	wantFail(t, runFac(t, "", "run", "--dim", "40", "--dim-v", "-3"), "value head dim must be positive, got -3")
}

// TestRunDimVDisagree: sizes that disagree are an error naming the file
// and the value (exit 1): --dim-v against --v, --v against --do, --k's
// head dim against --q's, and the varlen run's --v against --dim-v.
func TestRunDimVDisagree(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 8))
	writeTensor(t, dir, "q.npy", rng, 1, 2, 9, 40)
	writeTensor(t, dir, "k.npy", rng, 1, 2, 11, 40)
	writeTensor(t, dir, "k24.npy", rng, 1, 2, 11, 24)
	writeTensor(t, dir, "v.npy", rng, 1, 2, 11, 24)
	writeTensor(t, dir, "do32.npy", rng, 1, 2, 9, 32)
	run := func(args ...string) cliResult { return runFac(t, dir, append([]string{"run"}, args...)...) }
	wantFail(t, run("--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--dim-v", "16"), "--dim-v is 16", "v.npy has shape [1 2 11 24]", "dim-v 24")
	wantFail(t, run("--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--backward", "--do", "do32.npy"), "v.npy has shape [1 2 11 24]", "do32.npy has shape [1 2 9 32]", "dim-v 32")
	wantFail(t, run("--q", "q.npy", "--k", "k24.npy", "--v", "v.npy"), "q.npy has shape [1 2 9 40]", "k24.npy has shape [1 2 11 24]", "dim 24")
	wantFail(t, run("--q", "q.npy", "--const", "HEAD_DIM_V=16", "--v", "v.npy"), "--const HEAD_DIM_V=16", "v.npy has shape [1 2 11 24]")

	cq, ck := filepath.Join(dir, "cq.npy"), filepath.Join(dir, "ck.npy")
	writeI32s(t, cq, []int{3}, []int32{0, 5, 9})
	writeI32s(t, ck, []int{3}, []int32{0, 7, 11})
	writeTensor(t, dir, "vq.npy", rng, 9, 4, 16)
	writeTensor(t, dir, "vk.npy", rng, 11, 2, 16)
	writeTensor(t, dir, "vv.npy", rng, 11, 2, 8)
	r := runFac(t, dir, "run", "--cu-seqlens-q", "cq.npy", "--cu-seqlens-k", "ck.npy", "--q", "vq.npy", "--k", "vk.npy", "--v", "vv.npy", "-o", "vo.npy")
	wantOK(t, r)
	if !strings.Contains(r.stdout, "D=16 Dv=8") {
		t.Errorf("varlen stdout:\n%s", r.stdout)
	}
	if a := readTensor(t, filepath.Join(dir, "vo.npy")); !slices.Equal(a.Shape, []int{9, 4, 8}) {
		t.Errorf("varlen O: shape %v, want [9 4 8]", a.Shape)
	}
	wantFail(t, runFac(t, dir, "run", "--cu-seqlens-q", "cq.npy", "--cu-seqlens-k", "ck.npy", "--q", "vq.npy", "--k", "vk.npy", "--v", "vv.npy", "--dim-v", "4"),
		"--dim-v is 4", "vv.npy has shape [11 2 8]")
}

// TestCompileDimV: fac compile and fac ir take --dim-v as HEAD_DIM_V (a
// kernel without it refuses it); GPU code takes any pair, a dim that is not
// a power of two computed in the next one (pad-dims).
func TestCompileDimV(t *testing.T) {
	r := runFac(t, "", "ir", "--dim", "64", "--dim-v", "32")
	if r.code != 0 || !strings.Contains(r.stdout, "HEAD_DIM = 64, HEAD_DIM_V = 32") {
		t.Fatalf("fac ir --dim-v 32: exit %d\n%.2000s\n%s", r.code, r.stdout, r.stderr)
	}
	r = runFac(t, "", "compile", "--emit", "tir", "--kernel", "flash_bwd", "--dim", "128", "--const", "HEAD_DIM_V=64", "-o", "-")
	if r.code != 0 || !strings.Contains(r.stdout, "HEAD_DIM = 128, HEAD_DIM_V = 64") {
		t.Fatalf("fac compile --const HEAD_DIM_V=64: exit %d\n%s", r.code, r.stderr)
	}
	wantFail(t, runFac(t, "", "compile", "--emit", "tir", "--kernel", "flash_bwd_postprocess", "--dim-v", "64", "-o", "-"),
		"kernel flash_bwd_postprocess has no compile-time parameter HEAD_DIM_V")
	wantFail(t, runFac(t, "", "compile", "--emit", "tir", "--dim-v", "64", "--const", "HEAD_DIM_V=32", "-o", "-"),
		"--const HEAD_DIM_V=32 contradicts --dim-v 64")
	for _, arch := range []string{"sm_80", "sm_90a"} {
		r = runFac(t, "", "compile", "--emit", "llvm", "--arch", arch, "--mask", "causal", "--dim", "128", "--dim-v", "64", "-o", "-")
		if r.code != 0 || !strings.Contains(r.stdout, "define") {
			t.Fatalf("fac compile --emit llvm --arch %s --dim 128 --dim-v 64: exit %d\n%s", arch, r.code, r.stderr)
		}
	}
	for _, c := range [][]string{{"sm_90a", "192", "128"}, {"sm_80", "128", "96"}, {"sm_90a", "80", "80"}} {
		r = runFac(t, "", "compile", "--emit", "llvm", "--arch", c[0], "--mask", "causal", "--dim", c[1], "--dim-v", c[2], "-o", "-")
		if r.code != 0 || !strings.Contains(r.stdout, "define") {
			t.Fatalf("fac compile --emit llvm --arch %s --dim %s --dim-v %s: exit %d\n%s", c[0], c[1], c[2], r.code, r.stderr)
		}
	}
}

// TestBuildDimV: fac build --dim-v bundles kernels named by their
// HEAD_DIM_V (the bundle's identities keep pairs apart), and the
// preprocess, which reads O and dO, once per pair; the postprocess, which
// sees dQ only, has no HEAD_DIM_V and is shared with the equal pair's.
func TestBuildDimV(t *testing.T) {
	if _, err := llc.Find(); err != nil {
		t.Skipf("no llc: %v", err)
	}
	dir := t.TempDir()
	r := runFac(t, dir, "build", "--backward", "--mask", "causal", "--dim", "64", "--dim-v", "32", "--num-splits", "1", "--pack-gqa", "off",
		"--arch", "sm_80", "--cache-dir", filepath.Join(dir, "cache"), "-o", "b.bundle")
	wantOK(t, r)
	bu, err := bundle.Read(filepath.Join(dir, "b.bundle"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range bu.Kernels {
		dv, ok := k.Ident.Consts["HEAD_DIM_V"]
		switch k.Ident.Kernel {
		case "flash_fwd", "flash_bwd", "flash_bwd_preprocess":
			if dv != "32" || k.Ident.Consts["HEAD_DIM"] != "64" {
				t.Errorf("%s: HEAD_DIM %s, HEAD_DIM_V %s; want 64 and 32", k.Ident.Kernel, k.Ident.Consts["HEAD_DIM"], dv)
			}
		default:
			if ok {
				t.Errorf("%s has HEAD_DIM_V %s", k.Ident.Kernel, dv)
			}
		}
	}
	wantFail(t, runFac(t, dir, "build", "--dim", "64", "--dim-v", "32", "--const", "HEAD_DIM_V=16", "-o", "x.bundle"), "--const HEAD_DIM_V=16 contradicts --dim-v 32")
}

// TestRunDimVBlockMask: a saved block mask serves a run whose V has its own
// head dim (block masks know no head dim), forward and backward.
func TestRunDimVBlockMask(t *testing.T) {
	dir := t.TempDir()
	wantOK(t, runFac(t, dir, "blockmask", "--mask", "causal", "--seqlen-q", "100", "--seqlen-k", "130", "--out", "bm"))
	r := runFac(t, dir, "run", "--blockmask", "bm", "--dim", "32", "--dim-v", "16", "--backward")
	wantOK(t, r)
	for _, want := range []string{"block mask bm: mask causal", "D=32 Dv=16", "check passed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
}
