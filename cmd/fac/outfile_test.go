//go:build unix

package main

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/internal/npy"
)

// Output flags name the user's files: fac writes into them and never
// swaps them for a new file (internal/outfile). Before, every output was a
// temp file renamed over the path, so `fac ir -o /dev/null` as root
// replaced /dev/null with a regular file.

// irText is what `fac ir --mask causal` prints.
func irText(t *testing.T) string {
	t.Helper()
	r := runFac(t, "", "ir", "--mask", "causal")
	if r.code != 0 || r.stdout == "" {
		t.Fatalf("fac ir: exit %d\n%s", r.code, r.stderr)
	}
	return r.stdout
}

func lstatMode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// TestOutputThroughSymlink: -o through a symlink writes the link's target,
// in place: the link stays, the target keeps its mode 0640 and its hard
// link sees the new content.
func TestOutputThroughSymlink(t *testing.T) {
	want := irText(t)
	dir := t.TempDir()
	target, other, link := filepath.Join(dir, "real.ir"), filepath.Join(dir, "other.ir"), filepath.Join(dir, "link.ir")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(target, other); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.ir", link); err != nil {
		t.Fatal(err)
	}
	if r := runFac(t, dir, "ir", "--mask", "causal", "-o", link); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if m := lstatMode(t, link); m&fs.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced by a %v file", m)
	}
	if m := lstatMode(t, target); m != 0o640 {
		t.Errorf("target mode %v, want 0640", m)
	}
	for _, p := range []string{target, other} {
		if got, _ := os.ReadFile(p); string(got) != want {
			t.Errorf("%s holds %d bytes, not the IR (%d bytes)", filepath.Base(p), len(got), len(want))
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 3 {
		t.Errorf("files in %s: %v, want real.ir, other.ir and link.ir", dir, left)
	}
}

// TestOutputFIFO: -o naming a FIFO (as /dev/null or /dev/stdout would be,
// but safe to test as root) writes into it and leaves it a FIFO.
func TestOutputFIFO(t *testing.T) {
	want := irText(t)
	fifo := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(fifo) // blocks until fac opens the other end
		if err != nil {
			got <- err.Error()
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- string(b)
	}()
	r := runFac(t, "", "ir", "--mask", "causal", "-o", fifo)
	if m := lstatMode(t, fifo); m&fs.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was replaced by a %v file (exit %d)", m, r.code)
	}
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	select {
	case s := <-got:
		if s != want {
			t.Errorf("the FIFO's reader got %d bytes, want the IR (%d bytes)", len(s), len(want))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("nothing came through the FIFO")
	}
}

// TestOutputDash: -o - is standard output, not a file named "-".
func TestOutputDash(t *testing.T) {
	want := irText(t)
	dir := t.TempDir()
	r := runFac(t, dir, "ir", "--mask", "causal", "-o", "-")
	if r.code != 0 || r.stdout != want {
		t.Fatalf("exit %d, %d bytes on stdout, want the IR (%d bytes)\n%s", r.code, len(r.stdout), len(want), r.stderr)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files made: %v", left)
	}
}

// TestOutputReadOnly: --out naming a read-only file fails with exit 1 and
// a permission error naming it, and leaves it as it was (as root too).
func TestOutputReadOnly(t *testing.T) {
	dir := t.TempDir()
	ro := filepath.Join(dir, "o.npy")
	if err := os.WriteFile(ro, []byte("keep me"), 0o444); err != nil {
		t.Fatal(err)
	}
	r := runFac(t, dir, "run", "--mask", "causal", "--seqlen-q", "16", "--seqlen-k", "16", "--dim", "16", "--out", ro)
	wantFail(t, r, ro, "permission denied")
	if got, _ := os.ReadFile(ro); string(got) != "keep me" {
		t.Errorf("read-only file now holds %q", got)
	}
	if m := lstatMode(t, ro); m != 0o444 {
		t.Errorf("mode %v, want 0444", m)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("files in %s: %v, want o.npy only", dir, left)
	}
}

// TestBlockmaskOutputsInPlace: the files inside blockmask --out DIR and
// the --png file are written through their symlinks.
func TestBlockmaskOutputsInPlace(t *testing.T) {
	dir := t.TempDir()
	out, elsewhere := filepath.Join(dir, "bm"), filepath.Join(dir, "elsewhere")
	for _, d := range []string{out, elsewhere} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(name, target string) {
		if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	link(filepath.Join(out, "kv_indices.npy"), filepath.Join(elsewhere, "kv_indices.npy"))
	link(filepath.Join(dir, "bm.png"), filepath.Join(elsewhere, "bm.png"))
	r := runFac(t, dir, "blockmask", "--mask", "causal", "--seqlen-q", "256", "--seqlen-k", "256", "--block", "64",
		"--out", out, "--png", filepath.Join(dir, "bm.png"))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, l := range []string{filepath.Join(out, "kv_indices.npy"), filepath.Join(dir, "bm.png")} {
		if m := lstatMode(t, l); m&fs.ModeSymlink == 0 {
			t.Errorf("%s: symlink replaced by a %v file", l, m)
		}
	}
	if a, err := npy.ReadFile(filepath.Join(elsewhere, "kv_indices.npy")); err != nil || len(a.Shape) != 4 {
		t.Errorf("link target not written as kv_indices: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(elsewhere, "bm.png")); !strings.HasPrefix(string(b), "\x89PNG") {
		t.Errorf("png link target holds %.8q", b)
	}
}

// TestBuildOutputInPlace: build -o writes an existing bundle file in
// place, keeping its mode and hard link.
func TestBuildOutputInPlace(t *testing.T) {
	if _, err := llc.Find(); err != nil {
		t.Skipf("no llc: %v", err)
	}
	dir := t.TempDir()
	out, other := filepath.Join(dir, "attn.bundle"), filepath.Join(dir, "copy.bundle")
	if err := os.WriteFile(out, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(out, other); err != nil {
		t.Fatal(err)
	}
	r := runFac(t, dir, "build", "--mask", "causal", "--dim", "64", "--arch", "sm_90a", "--cache-dir", filepath.Join(dir, "cache"), "-o", out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if m := lstatMode(t, out); m != 0o640 {
		t.Errorf("mode %v, want 0640", m)
	}
	if b, _ := os.ReadFile(other); !strings.Contains(string(b), `"format"`) {
		t.Errorf("the hard link holds %.40q, not the bundle", b)
	}
}
