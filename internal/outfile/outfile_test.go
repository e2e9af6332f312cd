//go:build unix

package outfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeString(t *testing.T, path, s string, mode fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // os.WriteFile's mode goes through the umask
		t.Fatal(err)
	}
}

// setUmask sets the process umask for one test; tests using it are not
// parallel.
func setUmask(t *testing.T, mask int) {
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

func TestNewFileHonoursUmask(t *testing.T) {
	for _, c := range []struct {
		umask int
		want  fs.FileMode
	}{{0o022, 0o644}, {0o027, 0o640}, {0o077, 0o600}} {
		setUmask(t, c.umask)
		p := filepath.Join(t.TempDir(), "new.npy")
		if err := WriteFile(p, []byte("data")); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.want || readString(t, p) != "data" {
			t.Errorf("umask %03o: mode %v, content %q; want %v, \"data\"", c.umask, fi.Mode(), readString(t, p), c.want)
		}
	}
}

func TestSymlinkTargetWritten(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.txt")
	link := filepath.Join(dir, "link.txt")
	writeString(t, target, "old content, longer than the new", 0o644)
	if err := os.Symlink("target.txt", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if dest, err := os.Readlink(link); err != nil || dest != "target.txt" {
		t.Fatalf("link replaced: Readlink = %q, %v", dest, err)
	}
	if got := readString(t, target); got != "new" {
		t.Errorf("target holds %q, want \"new\"", got)
	}
	// A dangling link: its target is created, the link stays.
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink("made.txt", dangling); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dangling, []byte("made")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(dangling); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("dangling link replaced: %v", err)
	}
	if got := readString(t, filepath.Join(dir, "made.txt")); got != "made" {
		t.Errorf("link target holds %q", got)
	}
}

func TestHardLinkShared(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeString(t, a, "old", 0o644)
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(a, []byte("shared")); err != nil {
		t.Fatal(err)
	}
	ai, _ := os.Stat(a)
	bi, _ := os.Stat(b)
	if !os.SameFile(ai, bi) {
		t.Fatal("a and b are no longer one file")
	}
	if got := readString(t, b); got != "shared" {
		t.Errorf("the other link holds %q, want \"shared\"", got)
	}
}

func TestModeKept(t *testing.T) {
	setUmask(t, 0o022) // would give 0644 to a file made anew
	for _, mode := range []fs.FileMode{0o640, 0o600, 0o755} {
		p := filepath.Join(t.TempDir(), "f")
		writeString(t, p, "old", mode)
		if err := WriteFile(p, []byte("new")); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(p)
		if fi.Mode() != mode || readString(t, p) != "new" {
			t.Errorf("mode %v: now %v with %q", mode, fi.Mode(), readString(t, p))
		}
	}
}

// TestReadOnlyRefused runs as root too: root may open a 0444 file for
// writing, and WriteFile must still refuse it.
func TestReadOnlyRefused(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ro.npy")
	writeString(t, p, "keep me", 0o444)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{p, link} {
		err := WriteFile(name, []byte("clobbered"))
		if err == nil {
			t.Fatalf("%s: read-only file written", name)
		}
		if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("error %q: want a permission error naming %s", err, name)
		}
	}
	fi, _ := os.Stat(p)
	if got := readString(t, p); got != "keep me" || fi.Mode() != 0o444 {
		t.Errorf("read-only file changed: %q, mode %v", got, fi.Mode())
	}
	if left, _ := os.ReadDir(dir); len(left) != 2 {
		t.Errorf("files in %s: %v", dir, left)
	}
}

func TestFIFOWrittenNotReplaced(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(p) // blocks until WriteFile opens the other end
		if err != nil {
			got <- "open: " + err.Error()
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- string(b)
	}()
	data := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // more than a pipe buffer
	if err := WriteFile(p, data); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Fatalf("FIFO replaced: %v", err)
	}
	select {
	case s := <-got:
		if s != string(data) {
			t.Errorf("reader got %d bytes, want %d", len(s), len(data))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing came through the FIFO")
	}
}

func TestShorterContentTruncates(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	writeString(t, p, strings.Repeat("x", 1000), 0o644)
	if err := WriteFile(p, []byte("short")); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, p); got != "short" {
		t.Errorf("got %q", got)
	}
}

func TestDashIsStdout(t *testing.T) {
	t.Chdir(t.TempDir())
	var buf bytes.Buffer
	old := Stdout
	Stdout = &buf
	defer func() { Stdout = old }()
	if err := Write("-", []byte("to stdout")); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "to stdout" {
		t.Errorf("stdout got %q", buf.String())
	}
	if _, err := os.Lstat("-"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file named - was made: %v", err)
	}
	// WriteFile takes paths literally.
	if err := WriteFile("-", []byte("file")); err != nil || readString(t, "-") != "file" {
		t.Errorf("WriteFile(\"-\"): %v", err)
	}
}

// TestOwnStdoutAppended: a path that is the process's own stdout, opened
// for appending (`fac ... -o /dev/stdout >> log`), keeps what was there.
func TestOwnStdoutAppended(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	writeString(t, p, "earlier\n", 0o644)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := os.Stdout
	os.Stdout = f
	defer func() { os.Stdout = old }()
	if err := WriteFile(p, []byte("output\n")); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, p); got != "earlier\noutput\n" {
		t.Errorf("log holds %q", got)
	}
}

func TestBadTargets(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing", "o.npy")
	if err := WriteFile(missing, nil); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing folder: %v", err)
	}
	if err := WriteFile(dir, []byte("x")); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("a directory: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}
