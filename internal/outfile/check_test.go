//go:build unix

package outfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckIssue46Item14: Check finds, without writing, what a write would
// meet: a folder, a missing folder, a read-only file; a new file in a
// writable folder, an existing writable file and "-" are fine.
func TestCheckIssue46Item14(t *testing.T) {
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro")
	if err := os.WriteFile(ro, []byte("x"), 0o444); err != nil {
		t.Fatal(err)
	}
	rw := filepath.Join(dir, "rw")
	if err := os.WriteFile(rw, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "nodir", "x"), filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		dir:                               "is a directory",
		filepath.Join(dir, "no", "o.npy"): "does not exist",
		filepath.Join(rw, "o.npy"):        "is not a folder",
		filepath.Join(dir, "dangling"):    "does not exist",
		ro:                                "read-only",
	} {
		if err := Check(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%s) = %v, want %q", path, err, want)
		}
	}
	if err := Check(ro); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("read-only: %v is not a permission error", err)
	}
	for _, path := range []string{"-", rw, filepath.Join(dir, "new.npy"), os.DevNull} {
		if err := Check(path); err != nil {
			t.Errorf("Check(%s) = %v", path, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new.npy")); err == nil {
		t.Error("Check created a file")
	}
}

// TestDistinctIssue46Item7: outputs that lead to one file are refused.
func TestDistinctIssue46Item7(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	if err := os.WriteFile(a, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(a, filepath.Join(dir, "hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("future", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(dir, "self")); err != nil {
		t.Fatal(err)
	}
	same := [][2]string{
		{a, a}, {a, filepath.Join(dir, "hard")}, {filepath.Join(dir, "link"), filepath.Join(dir, "future")},
		{filepath.Join(dir, "self", "x"), filepath.Join(dir, "x")}, {"-", "-"},
	}
	for _, p := range same {
		if err := Distinct(map[string]string{"--out": p[0], "--lse-out": p[1]}); err == nil {
			t.Errorf("Distinct(%s, %s) accepted", p[0], p[1])
		}
	}
	for _, p := range [][2]string{{a, filepath.Join(dir, "b")}, {os.DevNull, os.DevNull}, {"-", a}, {a, ""}} {
		if err := Distinct(map[string]string{"--out": p[0], "--lse-out": p[1]}); err != nil {
			t.Errorf("Distinct(%s, %s) = %v", p[0], p[1], err)
		}
	}
}
