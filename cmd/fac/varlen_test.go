package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/internal/npy"
)

// TestRunVarlen: --cu-seqlens-q/-k run packed sequences (lengths 0 and 1
// included) and check them against the per-sequence reference; O and LSE
// come out [total_q, H, D] and [H, total_q].
func TestRunVarlen(t *testing.T) {
	dir := t.TempDir()
	cq, ck := filepath.Join(dir, "cq.npy"), filepath.Join(dir, "ck.npy")
	writeI32s(t, cq, []int{5}, []int32{0, 5, 5, 6, 76})
	writeI32s(t, ck, []int{5}, []int32{0, 7, 9, 9, 42})
	out, lse := filepath.Join(dir, "o.npy"), filepath.Join(dir, "lse.npy")
	r := runFac(t, "", "run", "--mask", "causal_bottom_right", "--cu-seqlens-q", cq, "--cu-seqlens-k", ck,
		"--heads", "4", "--kv-heads", "2", "--dim", "16", "-o", out, "--lse-out", lse)
	wantOK(t, r)
	for _, want := range []string{"kernel flash_fwd_varlen", "4 sequences, 76 query and 42 key tokens", "check passed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	for path, shape := range map[string][]int{out: {76, 4, 16}, lse: {4, 76}} {
		a, err := npy.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Shape, shape) {
			t.Errorf("%s has shape %v, want %v", filepath.Base(path), a.Shape, shape)
		}
	}
	wantFail(t, runFac(t, "", "run", "--cu-seqlens-q", cq), "both --cu-seqlens-q and --cu-seqlens-k")
	wantFail(t, runFac(t, "", "run", "--cu-seqlens-q", cq, "--cu-seqlens-k", ck, "--seqlen-q", "9"), "--seqlen-q does not work")
}

// TestBenchVarlenFlags: --varlen-len refuses what it cannot time, before
// looking for a GPU; with --backward it goes on to look for one.
func TestBenchVarlenFlags(t *testing.T) {
	r := runFac(t, "", "bench", "--varlen-len", "1000", "--backward")
	if r.code == 0 || strings.Contains(r.stderr, "--varlen-len") {
		t.Errorf("--varlen-len with --backward: exit %d, %s", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"--varlen-len", "-5"},
		{"--varlen-len", "1000", "--step"},
		{"--varlen-len", "1000", "--decode"},
		{"--varlen-len", "1000", "--seqlen", "4096"},
		{"--varlen-len", "1000", "--seqlen-k", "4096"},
		{"--varlen-len", "1000", "--num-splits", "4"},
	} {
		wantFail(t, runFac(t, "", append([]string{"bench"}, args...)...), "--varlen-len")
	}
}
