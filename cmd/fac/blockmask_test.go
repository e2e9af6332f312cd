package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/internal/npy"
)

// TestBlockmaskRoundTrip: fac blockmask writes FlexAttention-named tensors
// and a picture; they load back identically and fac run uses them; a
// hand-damaged file (index out of range, wrong shape) is rejected clearly.
func TestBlockmaskRoundTrip(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "bm")
	r := runFac(t, dir, "blockmask", "--mask", "sliding_window(40, 0)", "--seqlen-q", "300", "--seqlen-k", "200",
		"--block", "64", "--out", out, "--png", filepath.Join(dir, "bm.png"))
	if r.code != 0 || !strings.Contains(r.stdout, "density") {
		t.Fatalf("fac blockmask: %d %s %s", r.code, r.stdout, r.stderr)
	}
	for _, f := range []string{"kv_num_blocks.npy", "kv_indices.npy", "full_kv_num_blocks.npy", "full_kv_indices.npy",
		"q_num_blocks.npy", "q_indices.npy", "full_q_num_blocks.npy", "full_q_indices.npy", "../bm.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	bm, err := blockmask.Load(out, 300, 200, 64, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := bm.Save(filepath.Join(dir, "again")); err != nil {
		t.Fatal(err)
	}
	bm2, err := blockmask.Load(filepath.Join(dir, "again"), 300, 200, 64, 64)
	if err != nil || !bm.Equal(bm2) {
		t.Fatalf("save/load round trip differs: %v", err)
	}
	run := func() cliResult {
		return runFac(t, dir, "run", "--mask", "sliding_window(40, 0)", "--seqlen-q", "300", "--seqlen-k", "200",
			"--const", "SPARSE_Q=64", "--const", "SPARSE_K=64", "--blockmask", out)
	}
	if r := run(); r.code != 0 || !strings.Contains(r.stdout, "NaN: 0") {
		t.Fatalf("fac run --blockmask: %d %s %s", r.code, r.stdout, r.stderr)
	}
	// An index out of range.
	idx := filepath.Join(out, "kv_indices.npy")
	a, err := npy.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	vals, _ := a.I32()
	vals[0] = 99
	b, _ := npy.EncodeI32(a.Shape, vals)
	if err := npy.WriteFile(idx, b); err != nil {
		t.Fatal(err)
	}
	wantFail(t, run(), "kv_indices", "99")
	// A wrong shape.
	b, _ = npy.EncodeI32([]int{len(vals)}, vals)
	if err := npy.WriteFile(idx, b); err != nil {
		t.Fatal(err)
	}
	wantFail(t, run(), "kv_indices", "shape")
}

// TestBlockmaskResaveReadOnlyMeta is issue 46 item 6 from the command
// line: a re-save with another mask into a folder whose block_mask.json is
// read-only fails and leaves every file as it was, so fac run
// --blockmask still gets the causal lists it records (before, the .npy
// files were rewritten with none's lists under a json claiming causal).
func TestBlockmaskResaveReadOnlyMeta(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "bm")
	save := func(mask string) cliResult {
		return runFac(t, dir, "blockmask", "--mask", mask, "--seqlen-q", "256", "--seqlen-k", "256", "--block", "64", "--out", out)
	}
	if r := save("causal"); r.code != 0 {
		t.Fatalf("fac blockmask: %d %s", r.code, r.stderr)
	}
	before := map[string]string{}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(out, e.Name()))
		before[e.Name()] = string(b)
	}
	if err := os.Chmod(filepath.Join(out, blockmask.MetaFile), 0o444); err != nil {
		t.Fatal(err)
	}
	wantFail(t, save("none"), "read-only", blockmask.MetaFile)
	ents, _ = os.ReadDir(out)
	if len(ents) != len(before) {
		t.Errorf("folder now holds %d files, had %d", len(ents), len(before))
	}
	for name, text := range before {
		if b, _ := os.ReadFile(filepath.Join(out, name)); string(b) != text {
			t.Errorf("%s changed by the failed save", name)
		}
	}
	if r := runFac(t, dir, "run", "--blockmask", out, "--dim", "16", "--batch", "1", "--heads", "1"); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "causal") {
		t.Errorf("fac run --blockmask after the failed save: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
