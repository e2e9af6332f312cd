package npy

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
)

// npyFile builds a .npy file with a hand-written header (format major, 1
// or 2) so tests can state shapes no encoder would write.
func npyFile(major byte, descr, shape string, data []byte) []byte {
	hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }\n", descr, shape)
	b := append([]byte{}, magic...)
	b = append(b, major, 0)
	if major == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(hdr)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(hdr)))
	}
	return append(append(b, hdr...), data...)
}

// TestShapeOverflow: shapes whose element count overflows an int, or is
// beyond MaxElems, are refused with an error naming the shape; before,
// (2^62, 4) wrapped to 0 elements and was accepted with no data.
func TestShapeOverflow(t *testing.T) {
	for _, c := range []struct{ shape, want string }{
		{"4611686018427387904, 4", "4611686018427387904"}, // 2^62·4 wraps to 0
		{"4294967296, 4294967296", "4294967296"},          // 2^64 wraps to 0
		{"3074457345618258603, 3", "3074457345618258603"}, // wraps negative
		{"0, 4611686018427387904, 4", "4611686018427387904"},
		{"65536, 65536, 65536", "more than"}, // no wrap, but 2^48 elements
		{"99999999999999999999", "99999999999999999999"},
		{"-1, 4", "-1"},
		{"2, -2", "-2"},
		{strings.Repeat("1, ", 65), "dims"}, // NumPy allows 64
	} {
		for _, major := range []byte{1, 2} {
			a, err := Decode(npyFile(major, "<f4", c.shape, nil))
			if err == nil {
				t.Errorf("shape (%s): accepted as %v with %d values", c.shape, a.Shape, len(a.Vals))
				continue
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("shape (%s): error %q does not name %q", c.shape, err, c.want)
			}
		}
	}
	for _, shape := range [][]int{{1 << 62, 4}, {1 << 32, 1 << 32}, {-1, -1}} {
		if _, err := EncodeF32(shape, nil); err == nil {
			t.Errorf("EncodeF32 accepted shape %v", shape)
		}
	}
	// Sane shapes still work, empty ones included.
	for _, shape := range []string{"", "0,", "3, 0, 1024", "2, 3"} {
		n, _ := product(parseShape(shape))
		if _, err := Decode(npyFile(1, "<i4", shape, make([]byte, 4*n))); err != nil {
			t.Errorf("shape (%s): %v", shape, err)
		}
	}
}

// product is the element count of shape, false if it overflows; the tests
// keep their own so that they also run against an older reader.
func product(shape []int) (int, bool) {
	n := 1
	for _, d := range shape {
		if d < 0 || d > 0 && n > math.MaxInt/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

func parseShape(s string) []int {
	var out []int
	for _, p := range strings.Split(s, ",") {
		var d int
		if _, err := fmt.Sscan(p, &d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// FuzzRead decodes arbitrary bytes: no panic, no runaway allocation, and
// an accepted array's values match its shape.
func FuzzRead(f *testing.F) {
	f32, _ := EncodeF32([]int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	i32, _ := EncodeI32([]int{4}, []int32{1, -2, 3, 4})
	empty, _ := EncodeF32([]int{0, 5}, nil)
	for _, seed := range [][]byte{
		f32, i32, empty,
		f32[:len(f32)-1],
		npyFile(1, "<f4", "", make([]byte, 4)), // a scalar
		npyFile(2, "<f8", "2,", make([]byte, 16)),
		npyFile(1, "<f2", "1, 2", make([]byte, 4)),
		npyFile(1, "<i8", "1,", make([]byte, 8)),
		npyFile(1, "|b1", "3,", []byte{0, 1, 1}),
		npyFile(1, "|i1", "2,", []byte{0xff, 1}),
		npyFile(1, "<f4", "4611686018427387904, 4", nil),
		npyFile(1, "<f4", "0, 4611686018427387904, 4", nil),
		npyFile(1, "<u2", "1,", make([]byte, 2)),
		[]byte("\x93NUMPY\x01\x00\xff\xff{'descr': '<f4'"),
		[]byte("\x93NUMPY\x03\x00\x10\x00\x00\x00{'descr':'|u1',}"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Decode(b)
		if err != nil {
			return
		}
		n, ok := product(a.Shape)
		if !ok {
			t.Fatalf("accepted shape %v: its element count overflows", a.Shape)
		}
		if n != len(a.Vals) || a.Len() != len(a.Vals) {
			t.Fatalf("shape %v (%d elements) with %d values", a.Shape, n, len(a.Vals))
		}
	})
}
