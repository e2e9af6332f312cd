//go:build unix

package outfile

import (
	"io/fs"
	"syscall"
)

// writable reports whether the process may write path (access(2), W_OK).
func writable(path string) error {
	if err := syscall.Access(path, 0x2); err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}
