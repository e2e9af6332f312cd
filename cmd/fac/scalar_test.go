package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/internal/npy"
)

// TestRunScalarsAndNDAux: run-time parameters come from --scalar, typed by
// the declaration; N-D aux tensors from N-D .npy files, checked against the
// declared shape.
func TestRunScalarsAndNDAux(t *testing.T) {
	ex := func(f string) string { return filepath.Join("..", "..", "examples", "masks", f) }
	small := []string{"--seqlen-q", "16", "--seqlen-k", "48", "--dim", "16", "--heads", "2", "--batch", "2"}
	for name, tc := range map[string]struct {
		args []string
		code int
		want string
	}{
		"ok":       {[]string{"--scalar", "offset=32"}, 0, "check passed"},
		"missing":  {nil, 1, `give --scalar offset=VALUE`},
		"unknown":  {[]string{"--scalar", "offset=1", "--scalar", "ofset=2"}, 1, `no run-time parameter "ofset"`},
		"repeated": {[]string{"--scalar", "offset=1", "--scalar", "offset=2"}, 1, "offset is given twice"},
		"typed":    {[]string{"--scalar", "offset=1.5"}, 1, "offset is i32"},
	} {
		args := append(append([]string{"run", ex("decode_offset.fa"), "--mask", "decode_offset"}, small...), tc.args...)
		r := runFac(t, "", args...)
		if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.want) {
			t.Errorf("%s: exit %d, want %d with %q:\n%s%s", name, r.code, tc.code, tc.want, r.stdout, r.stderr)
		}
	}

	// Per-batch documents doc[b, q_idx] from a 2-D file.
	dir := t.TempDir()
	write := func(name string, shape []int) string {
		n := 1
		for _, d := range shape {
			n *= d
		}
		vals := make([]int32, n)
		for i := range vals {
			vals[i] = int32(i % 48 / 10)
		}
		b, _ := npy.EncodeI32(shape, vals)
		path := filepath.Join(dir, name)
		if err := npy.WriteFile(path, b); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good, bad := write("doc.npy", []int{2, 48}), write("doc3.npy", []int{3, 48})
	args := append([]string{"run", ex("document_batched.fa"), "--mask", "document_batched", "--aux", "doc=" + good}, small...)
	if r := runFac(t, "", args...); r.code != 0 || !strings.Contains(r.stdout, "check passed") {
		t.Errorf("2-D doc: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	args = append([]string{"run", ex("document_batched.fa"), "--mask", "document_batched", "--aux", "doc=" + bad}, small...)
	if r := runFac(t, "", args...); r.code != 1 || !strings.Contains(r.stderr, "batch") {
		t.Errorf("3 rows for batch 2: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
