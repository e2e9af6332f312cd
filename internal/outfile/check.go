package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// Check reports, without writing anything, an error that writing path
// (as Write would: "-" is standard output) would surely meet: a
// directory, a folder that does not exist or is not a folder, a read-only
// regular file, one the process may not write. Commands check their
// outputs with it before a long computation, so that a bad path does not
// lose the result at the end. Errors name path.
func Check(name string) error {
	if name == "-" {
		return nil
	}
	if name == "" {
		return fmt.Errorf("an empty file name")
	}
	fi, err := os.Stat(name)
	switch {
	case err == nil:
		if fi.IsDir() {
			return &fs.PathError{Op: "write", Path: name, Err: errors.New("is a directory (name a file in it)")}
		}
		if fi.Mode().IsRegular() && fi.Mode().Perm()&0o222 == 0 {
			return &fs.PathError{Op: "write", Path: name, Err: ErrReadOnly}
		}
		return writable(name)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
	default:
		return err
	}
	// A new file, or a dangling symlink: the folder it goes in must be
	// one, and writable.
	target := name
	if l, err := os.Readlink(name); err == nil {
		if !filepath.IsAbs(l) {
			l = filepath.Join(filepath.Dir(name), l)
		}
		target = l
	}
	dir := filepath.Dir(target)
	di, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &fs.PathError{Op: "write", Path: name, Err: fmt.Errorf("folder %s does not exist", dir)}
		}
		return &fs.PathError{Op: "write", Path: name, Err: err}
	}
	if !di.IsDir() {
		return &fs.PathError{Op: "write", Path: name, Err: fmt.Errorf("%s is not a folder", dir)}
	}
	if err := writable(dir); err != nil {
		return &fs.PathError{Op: "write", Path: name, Err: fmt.Errorf("cannot create a file in %s: %w", dir, errors.Unwrap(err))}
	}
	return nil
}

// SameFile reports whether two output names lead to one file: the same
// path, a symlink to the other (existing or not yet), or a hard link.
// "-" is standard output, the same file as a path that leads there
// (/dev/stdout). The null device is never the same file as anything:
// writing it twice loses nothing.
func SameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if a == "-" && b == "-" {
		return true
	}
	if a == "-" || b == "-" {
		p := a
		if p == "-" {
			p = b
		}
		return IsStdout(p)
	}
	if isNull(a) || isNull(b) {
		return false
	}
	ca, cb := resolve(a), resolve(b)
	if ca == cb {
		return true
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// IsStdout reports whether path names the file standard output writes
// to (/dev/stdout, /proc/self/fd/1, or the file stdout was redirected
// to); the null device does not count.
func IsStdout(path string) bool {
	if path == "-" {
		return true
	}
	if isNull(path) {
		return false
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	si, err := os.Stdout.Stat()
	return err == nil && os.SameFile(fi, si)
}

// isNull reports whether path is the null device.
func isNull(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	ni, err := os.Stat(os.DevNull)
	return err == nil && os.SameFile(fi, ni)
}

// resolve is path, absolute, with symlinks followed as far as they lead
// (a dangling one to where it points).
func resolve(path string) string {
	p, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	for range 40 {
		l, err := os.Readlink(p)
		if err != nil {
			break
		}
		if !filepath.IsAbs(l) {
			l = filepath.Join(filepath.Dir(p), l)
		}
		p = filepath.Clean(l)
	}
	dir, base := filepath.Split(p)
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(d, base)
	}
	return p
}

// Distinct refuses two outputs that lead to one file (SameFile): their
// bytes would overwrite each other. outputs maps a flag to its value; ""
// is no output.
func Distinct(outputs map[string]string) error {
	var flags []string
	for f, v := range outputs {
		if v != "" {
			flags = append(flags, f)
		}
	}
	slices.Sort(flags)
	for i, a := range flags {
		for _, b := range flags[i+1:] {
			if SameFile(outputs[a], outputs[b]) {
				what := "name the same file"
				if outputs[a] != outputs[b] {
					what = "lead to the same file"
				}
				return fmt.Errorf("%s %s and %s %s %s; each output needs a file of its own", a, outputs[a], b, outputs[b], what)
			}
		}
	}
	return nil
}
