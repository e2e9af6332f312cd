package npy

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// rawNpy builds a version 1.0 file with the header text as given.
func rawNpy(hdr string, data []byte) []byte {
	b := append([]byte{}, magic...)
	b = append(b, 1, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(hdr)+1))
	return append(append(append(b, hdr...), '\n'), data...)
}

// TestHeaderLikeNumPy is issue 46 item 9: the header is read as NumPy
// reads it. A key given twice takes its last value (before, the first
// won), fortran_order must be True or False (before, 1 read as C order),
// and the keys are exactly descr, fortran_order and shape.
func TestHeaderLikeNumPy(t *testing.T) {
	f4 := func(vals ...float32) []byte {
		var b bytes.Buffer
		binary.Write(&b, binary.LittleEndian, vals)
		return b.Bytes()
	}
	for _, c := range []struct {
		hdr   string
		data  []byte
		shape []int
		dtype string
	}{
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (3,), }", f4(1, 2, 3), []int{3}, "<f4"},
		{"{'descr': '<i4', 'fortran_order': False, 'shape': (3,), 'descr': '<f4'}", f4(1, 2, 3), []int{3}, "<f4"},
		{"{'descr': '<f4', 'fortran_order': True, 'shape': (1, 3), 'fortran_order': False}", f4(1, 2, 3), []int{1, 3}, "<f4"},
		{`{"descr": "<f4", "fortran_order": False, "shape": (3,)}`, f4(1, 2, 3), []int{3}, "<f4"},
		{"{'shape':(),'fortran_order':False,'descr':'<f4'}", f4(7), nil, "<f4"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (3L,), }", f4(1, 2, 3), []int{3}, "<f4"}, // Python 2
	} {
		a, err := Decode(rawNpy(c.hdr, c.data))
		if err != nil {
			t.Errorf("%s: %v", c.hdr, err)
			continue
		}
		if !reflect.DeepEqual(a.Shape, c.shape) || a.Dtype != c.dtype {
			t.Errorf("%s: read as %s %v, want %s %v", c.hdr, a.Dtype, a.Shape, c.dtype, c.shape)
		}
	}
	for _, c := range []struct{ hdr, want string }{
		{"{'descr': '<f4', 'fortran_order': 1, 'shape': (3,)}", "fortran_order is 1, want True or False"},
		{"{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}", "fortran_order is 0"},
		{"{'descr': '<f4', 'fortran_order': 'False', 'shape': (3,)}", `fortran_order is "False"`},
		{"{'descr': '<f4', 'fortran_order': None, 'shape': (3,)}", "fortran_order is None"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'fortran_order': True}", "fortran-order arrays are not supported"},
		{"{'descr': '<f4', 'shape': (3,)}", "no fortran_order"},
		{"{'descr': '<f4', 'fortran_order': False}", "no shape"},
		{"{'fortran_order': False, 'shape': (3,)}", "no descr"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1}", `the key "extra"`},
		{"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,)}", "structured dtypes are not supported"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", "shape is 3, want a tuple"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': [3]}", "shape is [3], want a tuple"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 'x')}", `dim "x"`},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} junk", "text after the dict"},
		{"{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}", "want ',' or '}'"},
		{"'descr': '<f4'", "want '{'"},
	} {
		_, err := Decode(rawNpy(c.hdr, f4(1, 2, 3)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.hdr, err, c.want)
		}
	}
}

// zeros is an endless stream of zero bytes that counts what it gives.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

// TestReadBounded is issue 46 item 8: a reader of .npy data reads the
// header first and then no more than the data it declares, so an endless
// stream after a valid header (or a header declaring more than MaxBytes)
// is an error, not a process that reads until memory runs out.
func TestReadBounded(t *testing.T) {
	hdr := rawNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (1024,), }", nil)
	z := &zeros{}
	_, err := Read(io.MultiReader(bytes.NewReader(hdr), z))
	if err == nil || !strings.Contains(err.Error(), "more than 4096 bytes") {
		t.Errorf("a header and endless data: %v", err)
	}
	if z.n > 1<<20 {
		t.Errorf("read %d bytes past a header declaring 4096", z.n)
	}
	for _, shape := range []string{"(4294967296,)", "(65536, 65536, 2)"} { // 32 and 64 GiB of f8
		z := &zeros{}
		big := rawNpy("{'descr': '<f8', 'fortran_order': False, 'shape': "+shape+", }", nil)
		_, err := Read(io.MultiReader(bytes.NewReader(big), z))
		if err == nil || !strings.Contains(err.Error(), "more than the 17179869184 (16 GiB) fac reads") || z.n != 0 {
			t.Errorf("shape %s: %v after %d bytes of data", shape, err, z.n)
		}
	}
	// A short stream declaring a lot allocates with what arrives.
	short := rawNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000,), }", make([]byte, 40))
	if _, err := Read(bytes.NewReader(short)); err == nil || !strings.Contains(err.Error(), "data has 40 bytes") {
		t.Errorf("short stream: %v", err)
	}
	// /dev/zero is no .npy file, and says so at once.
	if _, err := os.Stat("/dev/zero"); err == nil {
		done := make(chan error, 1)
		go func() { _, err := ReadFile("/dev/zero"); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "bad magic") {
				t.Errorf("/dev/zero: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("ReadFile(/dev/zero) did not return")
		}
	}
}
