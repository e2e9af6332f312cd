// Package npy reads and writes NumPy .npy files (format 1.0–3.0), enough for
// tensors exchanged with PyTorch and NumPy: little-endian f4, f8, f2, i8,
// i4, i2, i1, u4, u2, u1 and bool, C order, any rank.
//
// fac keeps its own small reader/writer because the maintained Go library
// (sbinet/npyio) writes flat slices only as 1-D arrays and pulls in gonum;
// see docs/decisions.md.
package npy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/internal/outfile"
)

var magic = []byte("\x93NUMPY")

// Limits on a shape, checked before any size arithmetic so a hostile
// header cannot overflow it: MaxElems bounds the element count (and so
// every product of dims: 2^36 elements is 256 GiB of float32, beyond any
// tensor fac exchanges, yet 8·MaxElems still fits an int), MaxRank the
// number of dims (NumPy's own limit is 64).
const (
	MaxElems = min(1<<36, math.MaxInt/8)
	MaxRank  = 64
)

// elems returns the element count of shape, refusing negative dims, more
// than MaxRank dims, and counts beyond MaxElems. Zero dims are left out of
// the bound, so a product of any of the dims stays within it: callers may
// multiply dims of an accepted shape without overflow.
func elems(shape []int) (int, error) {
	if len(shape) > MaxRank {
		return 0, fmt.Errorf("shape has %d dims, more than %d", len(shape), MaxRank)
	}
	n, nz := 1, 1 // nz: the product of the non-zero dims
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("shape %v has a negative dim %d", shape, d)
		}
		if d == 0 {
			n = 0
			continue
		}
		if nz > MaxElems/d {
			return 0, fmt.Errorf("shape %v has more than %d elements", shape, MaxElems)
		}
		nz *= d
	}
	return n * nz, nil
}

// Array is a decoded array: its shape and its values as float64 (exact for
// every supported dtype except i8 beyond 2^53); Data has them in their own
// type.
type Array struct {
	Shape []int
	Dtype string // as in the file, e.g. "<f4"
	Vals  []float64
	data  any
}

// Data returns the values in a Go type that holds the file's dtype
// exactly: []bool (|b1), []int8 (|i1), []uint8 (|u1), []int16 (<i2),
// []int32 (<i4, and <u2 widened), []int64 (<i8, and <u4 widened),
// []float32 (<f4, and <f2 widened) or []float64 (<f8). These are what aux
// tensors take (launch.HostData), which convert them to the declared type.
func (a *Array) Data() any { return a.data }

// Len is the element count of the shape.
func (a *Array) Len() int {
	n := 1
	for _, d := range a.Shape {
		n *= d
	}
	return n
}

// F32 returns the values as float32.
func (a *Array) F32() []float32 {
	out := make([]float32, len(a.Vals))
	for i, v := range a.Vals {
		out[i] = float32(v)
	}
	return out
}

// I32 returns the values as int32, refusing non-integers.
func (a *Array) I32() ([]int32, error) {
	out := make([]int32, len(a.Vals))
	for i, v := range a.Vals {
		if v != math.Trunc(v) || v > math.MaxInt32 || v < math.MinInt32 {
			return nil, fmt.Errorf("element %d is %v, not an int32", i, v)
		}
		out[i] = int32(v)
	}
	return out, nil
}

var (
	descrRe = regexp.MustCompile(`'descr'\s*:\s*'([^']*)'`)
	fortRe  = regexp.MustCompile(`'fortran_order'\s*:\s*(True|False)`)
	shapeRe = regexp.MustCompile(`'shape'\s*:\s*\(([^)]*)\)`)
)

// ReadFile reads a .npy file; errors name the file.
func ReadFile(path string) (*Array, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	a, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// Decode parses .npy bytes.
func Decode(b []byte) (*Array, error) {
	if len(b) < 10 || !bytes.Equal(b[:6], magic) {
		return nil, fmt.Errorf("not a .npy file (bad magic)")
	}
	major := b[6]
	var hlen, off int
	switch major {
	case 1:
		hlen, off = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return nil, fmt.Errorf("truncated header")
		}
		hlen, off = int(binary.LittleEndian.Uint32(b[8:12])), 12
	default:
		return nil, fmt.Errorf("unsupported .npy version %d", major)
	}
	if off+hlen > len(b) {
		return nil, fmt.Errorf("truncated header")
	}
	hdr := string(b[off : off+hlen])
	data := b[off+hlen:]
	m := descrRe.FindStringSubmatch(hdr)
	if m == nil {
		return nil, fmt.Errorf("header has no descr: %q", hdr)
	}
	a := &Array{Dtype: m[1]}
	if f := fortRe.FindStringSubmatch(hdr); f != nil && f[1] == "True" {
		return nil, fmt.Errorf("fortran-order arrays are not supported; save with np.ascontiguousarray")
	}
	s := shapeRe.FindStringSubmatch(hdr)
	if s == nil {
		return nil, fmt.Errorf("header has no shape: %q", hdr)
	}
	for _, p := range strings.Split(s[1], ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > MaxElems {
			return nil, fmt.Errorf("bad shape (%s): dim %q is not a count from 0 to %d", s[1], p, MaxElems)
		}
		a.Shape = append(a.Shape, n)
	}
	n, err := elems(a.Shape)
	if err != nil {
		return nil, err
	}
	size := map[string]int{"<f4": 4, "<f8": 8, "<f2": 2, "<i4": 4, "<i8": 8, "|b1": 1, "|u1": 1, "|i1": 1, "<i2": 2, "<u2": 2, "<u4": 4}[a.Dtype]
	if size == 0 {
		return nil, fmt.Errorf("unsupported dtype %s (want <f4, <f8, <f2, <i8, <i4, <i2, |i1, <u4, <u2, |u1 or |b1)", a.Dtype)
	}
	if len(data) != n*size {
		return nil, fmt.Errorf("data has %d bytes, shape %v of %s needs %d", len(data), a.Shape, a.Dtype, n*size)
	}
	a.Vals = make([]float64, n)
	a.data = decodeTyped(a.Dtype, data, n, a.Vals)
	return a, nil
}

// decodeTyped decodes n elements of dtype from data into their Go type
// (see Array.Data) and, as float64, into vals.
func decodeTyped(dtype string, data []byte, n int, vals []float64) any {
	le := binary.LittleEndian
	switch dtype {
	case "<f4", "<f2":
		out := make([]float32, n)
		for i := range out {
			if dtype == "<f4" {
				out[i] = math.Float32frombits(le.Uint32(data[4*i:]))
			} else {
				out[i] = half.F16ToF32(le.Uint16(data[2*i:]))
			}
			vals[i] = float64(out[i])
		}
		return out
	case "<f8":
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(data[8*i:]))
			vals[i] = out[i]
		}
		return out
	case "<i8", "<u4":
		out := make([]int64, n)
		for i := range out {
			if dtype == "<i8" {
				out[i] = int64(le.Uint64(data[8*i:]))
			} else {
				out[i] = int64(le.Uint32(data[4*i:]))
			}
			vals[i] = float64(out[i])
		}
		return out
	case "<i4", "<u2":
		out := make([]int32, n)
		for i := range out {
			if dtype == "<i4" {
				out[i] = int32(le.Uint32(data[4*i:]))
			} else {
				out[i] = int32(le.Uint16(data[2*i:]))
			}
			vals[i] = float64(out[i])
		}
		return out
	case "<i2":
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(le.Uint16(data[2*i:]))
			vals[i] = float64(out[i])
		}
		return out
	case "|i1":
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(data[i])
			vals[i] = float64(out[i])
		}
		return out
	case "|b1":
		out := make([]bool, n)
		for i := range out {
			out[i] = data[i] != 0
			vals[i] = float64(data[i])
		}
		return out
	}
	out := make([]uint8, n) // |u1
	for i := range out {
		out[i] = data[i]
		vals[i] = float64(out[i])
	}
	return out
}

// EncodeF32 encodes float32 values with a shape as a version 1.0 .npy file.
func EncodeF32(shape []int, vals []float32) ([]byte, error) {
	return encode("<f4", shape, len(vals), func(w io.Writer) error { return binary.Write(w, binary.LittleEndian, vals) })
}

// EncodeI32 encodes int32 values with a shape.
func EncodeI32(shape []int, vals []int32) ([]byte, error) {
	return encode("<i4", shape, len(vals), func(w io.Writer) error { return binary.Write(w, binary.LittleEndian, vals) })
}

func encode(descr string, shape []int, n int, data func(io.Writer) error) ([]byte, error) {
	want, err := elems(shape)
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	if want != n {
		return nil, fmt.Errorf("npy: shape %v holds %d elements, got %d", shape, want, n)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, tuple)
	// Pad so the data starts on a 64-byte boundary, ending in a newline.
	total := len(magic) + 4 + len(hdr) + 1
	hdr += strings.Repeat(" ", (64-total%64)%64) + "\n"
	var buf bytes.Buffer
	buf.Write(magic)
	buf.Write([]byte{1, 0})
	binary.Write(&buf, binary.LittleEndian, uint16(len(hdr)))
	buf.WriteString(hdr)
	if err := data(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteFile writes bytes to path by fac's output policy (see
// internal/outfile): into an existing file, through symlinks, keeping its
// mode and links; a new file gets 0666 less the umask.
func WriteFile(path string, b []byte) error {
	return outfile.WriteFile(path, b)
}
