//go:build unix

package npy

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadFileFIFOBounded is issue 46 item 8 through ReadFile: a named
// pipe that gives a valid header and then zeros without end is read no
// further than the header declares. Before, ReadFile read the whole stream
// into memory (here capped at 128 MiB) before looking at the header.
func TestReadFileFIFOBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "q.npy")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	hdr := rawNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1024), }", nil)
	written := make(chan int64, 1)
	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			written <- -1
			return
		}
		defer f.Close()
		f.Write(hdr)
		chunk := make([]byte, 1<<20)
		var n int64
		for n < 128<<20 {
			k, err := f.Write(chunk)
			n += int64(k)
			if err != nil {
				break // the reader closed the pipe
			}
		}
		written <- n
	}()
	_, err := ReadFile(p)
	if err == nil || !strings.Contains(err.Error(), "more than 8192 bytes") {
		t.Errorf("endless FIFO: %v", err)
	}
	if n := <-written; n < 0 || n >= 128<<20 {
		t.Errorf("the reader took %d bytes from a pipe after a header declaring 8192", n)
	}
	if errors.Is(err, io.EOF) {
		t.Error(err)
	}
}
