package npy

import (
	"bytes"
	"encoding/binary"
	"io"
	"reflect"
	"testing"
)

// TestTypedData reads each dtype aux tensors may come in and checks Data
// gives the values exactly, in a Go type of the dtype's width.
func TestTypedData(t *testing.T) {
	le := binary.LittleEndian
	cases := []struct {
		descr string
		raw   any // written little-endian
		want  any
	}{
		{"|b1", []uint8{1, 0, 1}, []bool{true, false, true}},
		{"|i1", []int8{-128, 0, 127}, []int8{-128, 0, 127}},
		{"|u1", []uint8{0, 1, 255}, []uint8{0, 1, 255}},
		{"<i2", []int16{-32768, 7, 32767}, []int16{-32768, 7, 32767}},
		{"<u2", []uint16{0, 7, 65535}, []int32{0, 7, 65535}},
		{"<i4", []int32{-1 << 31, 7, 1<<31 - 1}, []int32{-1 << 31, 7, 1<<31 - 1}},
		{"<u4", []uint32{0, 7, 1<<32 - 1}, []int64{0, 7, 1<<32 - 1}},
		{"<i8", []int64{-1 << 62, 1<<53 + 1, 1<<63 - 1}, []int64{-1 << 62, 1<<53 + 1, 1<<63 - 1}},
		{"<f2", []uint16{0x3c00, 0xc000, 0x7bff}, []float32{1, -2, 65504}},
		{"<f4", []float32{1.5, -0.25, 3e38}, []float32{1.5, -0.25, 3e38}},
		{"<f8", []float64{1e-300, 0.1, -7}, []float64{1e-300, 0.1, -7}},
	}
	for _, c := range cases {
		b, err := encode(c.descr, []int{1, 3}, 3, func(w io.Writer) error { return binary.Write(w, le, c.raw) })
		if err != nil {
			t.Fatal(err)
		}
		a, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", c.descr, err)
		}
		if !reflect.DeepEqual(a.Data(), c.want) {
			t.Errorf("%s: Data() = %#v, want %#v", c.descr, a.Data(), c.want)
		}
		if !reflect.DeepEqual(a.Shape, []int{1, 3}) || len(a.Vals) != 3 {
			t.Errorf("%s: shape %v, %d values", c.descr, a.Shape, len(a.Vals))
		}
	}
	// A big-endian file is not read as little-endian.
	b, _ := encode(">i4", []int{1}, 1, func(w io.Writer) error { return binary.Write(w, binary.BigEndian, int32(1)) })
	if _, err := Decode(b); err == nil || !bytes.Contains([]byte(err.Error()), []byte("unsupported dtype >i4")) {
		t.Errorf("big-endian: %v", err)
	}
}
