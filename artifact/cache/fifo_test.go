//go:build unix

package cache

import (
	"path/filepath"
	"syscall"
	"testing"
)

// A FIFO under an entry's name would block a plain read forever.
func TestFIFOEntry(t *testing.T) {
	c := open(t)
	k := NewKey("fifo")
	if err := syscall.Mkfifo(filepath.Join(c.Dir(), string(k)+ext), 0o644); err != nil {
		t.Skip(err)
	}
	data, st, err := c.GetOrBuild(k, "", func() ([]byte, error) { return []byte("x"), nil })
	if string(data) != "x" || st != Corrupt || err != nil {
		t.Errorf("GetOrBuild over a FIFO = %q, %v, %v; want a rebuild", data, st, err)
	}
}
