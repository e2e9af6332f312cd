// Package outfile writes the files fac's commands produce, by one policy:
// a file the user names is theirs, so fac writes into it and never swaps
// it for another file.
//
//   - An existing file is opened through any symlinks and written in
//     place: a regular file is truncated, written and synced, keeping its
//     inode, mode, owner and hard links; a device, FIFO or terminal
//     (/dev/null, /dev/stdout, a named pipe) is only written to.
//   - A regular file with no write permission bit is refused, even for
//     root, and left untouched: fac never chmods or replaces it.
//   - A new file is created with mode 0666 less the umask, as a shell
//     redirect would; if writing it fails, it is removed.
//   - Write, for command-line flags, takes "-" to mean standard output.
//
// Files fac owns (kernel-cache entries) are not written here: those are
// made with a temp file and a rename, so readers never see half an entry.
package outfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Stdout is where Write sends the output named "-".
var Stdout io.Writer = os.Stdout

// ErrReadOnly is the cause of the error WriteFile returns for an existing
// regular file that has no write permission bit; it is a permission error
// (errors.Is(err, fs.ErrPermission) holds).
var ErrReadOnly = fmt.Errorf("%w: the file is read-only (fac writes into it and never replaces or chmods it)", fs.ErrPermission)

// Write writes data to the output a flag names: "-" is standard output,
// any other name a path written as by WriteFile.
func Write(name string, data []byte) error {
	if name == "-" {
		_, err := Stdout.Write(data)
		return err
	}
	return WriteFile(name, data)
}

// WriteFile writes data to path by the package's policy. Errors name path.
func WriteFile(path string, data []byte) error {
	f, created, err := open(path)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	if !fi.Mode().IsRegular() {
		// Nothing to truncate or sync on a device or pipe: just write,
		// as `cmd > /dev/null` does.
		_, err = f.Write(data)
		return closeErr(f, err)
	}
	if !created && fi.Mode().Perm()&0o222 == 0 {
		// Root could open it; the mode still says the owner wants it kept.
		f.Close()
		return &fs.PathError{Op: "write", Path: path, Err: ErrReadOnly}
	}
	if !created {
		// A path that is our stdout or stderr (/dev/stdout with stdout
		// redirected to a file, maybe with >>): write through that
		// descriptor so its offset and O_APPEND hold and earlier output
		// is not truncated away.
		for _, std := range []*os.File{os.Stdout, os.Stderr} {
			if si, err := std.Stat(); err == nil && os.SameFile(fi, si) {
				f.Close()
				_, err := std.Write(data)
				return err
			}
		}
	}
	err = writeRegular(f, data)
	if err != nil {
		if created {
			os.Remove(path) // ours, and only half written
		} else {
			err = fmt.Errorf("%w (%s may now be incomplete)", err, path)
		}
	}
	return err
}

// open opens path for writing without truncating it, following symlinks;
// created reports that this call made the file.
func open(path string) (f *os.File, created bool, err error) {
	f, err = os.OpenFile(path, os.O_WRONLY, 0)
	if !errors.Is(err, fs.ErrNotExist) {
		return f, false, err
	}
	// O_EXCL so that only a file this call made is ever removed on failure.
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if !errors.Is(err, fs.ErrExist) {
		return f, err == nil, err
	}
	// A dangling symlink (O_EXCL refuses every symlink) or a file made
	// meanwhile: open or create what the path leads to.
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o666)
	return f, false, err
}

// writeRegular replaces a regular file's content with data, in place. The
// data is complete in memory before the file is touched, and it is synced
// before WriteFile reports success.
func writeRegular(f *os.File, data []byte) error {
	err := f.Truncate(0)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
		if errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.EINVAL) {
			err = nil // a file system without fsync: the write itself succeeded
		}
	}
	return closeErr(f, err)
}

func closeErr(f *os.File, err error) error {
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
