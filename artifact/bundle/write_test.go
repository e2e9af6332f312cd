//go:build unix

package bundle

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteInPlace: Write names a user's file, so it writes through a
// symlink into the existing file, keeping the link and the file's mode,
// instead of renaming a temp file over the path.
func TestWriteInPlace(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "real.bundle"), filepath.Join(dir, "attn.bundle")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.bundle", link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, &Bundle{FacVersion: "test"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("symlink replaced: %v", err)
	}
	fi, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != 0o640 {
		t.Errorf("target mode %v, want 0640", fi.Mode())
	}
	if _, err := Read(target); err != nil {
		t.Errorf("target is not the bundle: %v", err)
	}
}
