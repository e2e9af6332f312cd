// Package npy reads and writes NumPy .npy files (format 1.0–3.0), enough for
// tensors exchanged with PyTorch and NumPy: little-endian f4, f8, f2, i8,
// i4, i2, i1, u4, u2, u1 and bool, C order, any rank. Headers are read as
// NumPy reads them (see parseHeader), and a read takes no more data than
// its header declares (at most MaxBytes).
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

// MaxBytes bounds the data of one array (16 GiB: a [1, 32, 2^20, 128]
// float32 tensor, the longest context fac runs): a header declaring more
// is refused before anything is allocated. maxHeader bounds the header
// text (NumPy's own reader stops at 10000 bytes).
const (
	MaxBytes  = 1 << 34
	maxHeader = 1 << 16
)

// ReadFile reads a .npy file; errors name the file. It reads the header
// first and then exactly the data the header declares: a regular file
// whose size disagrees is refused before its data is read, and a stream
// (a FIFO, /dev/zero) is read no further than the declared size, plus one
// byte to see that nothing follows.
func ReadFile(path string) (*Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := int64(-1)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	a, err := read(f, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// Read reads one .npy array from r, as ReadFile does: the header first,
// then the data it declares and no more; r must end there.
func Read(r io.Reader) (*Array, error) { return read(r, -1) }

// Decode parses .npy bytes.
func Decode(b []byte) (*Array, error) { return read(bytes.NewReader(b), int64(len(b))) }

// read reads an array from r, whose total size is size when known (else
// -1).
func read(r io.Reader, size int64) (*Array, error) {
	var pre [12]byte
	if n, _ := io.ReadFull(r, pre[:10]); n < 10 || !bytes.Equal(pre[:6], magic) {
		return nil, fmt.Errorf("not a .npy file (bad magic)")
	}
	major := pre[6]
	var hlen, off int
	switch major {
	case 1:
		hlen, off = int(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		if _, err := io.ReadFull(r, pre[10:12]); err != nil {
			return nil, fmt.Errorf("truncated header")
		}
		hlen, off = int(binary.LittleEndian.Uint32(pre[8:12])), 12
	default:
		return nil, fmt.Errorf("unsupported .npy version %d", major)
	}
	if size >= 0 && int64(off)+int64(hlen) > size {
		return nil, fmt.Errorf("truncated header")
	}
	if hlen > maxHeader {
		return nil, fmt.Errorf("header is %d bytes, more than %d", hlen, maxHeader)
	}
	hb := make([]byte, hlen)
	if _, err := io.ReadFull(r, hb); err != nil {
		return nil, fmt.Errorf("truncated header")
	}
	h, err := parseHeader(string(hb))
	if err != nil {
		return nil, err
	}
	if h.fortran {
		return nil, fmt.Errorf("fortran-order arrays are not supported; save with np.ascontiguousarray")
	}
	a := &Array{Dtype: h.descr, Shape: h.shape}
	n, err := elems(a.Shape)
	if err != nil {
		return nil, err
	}
	esize := map[string]int{"<f4": 4, "<f8": 8, "<f2": 2, "<i4": 4, "<i8": 8, "|b1": 1, "|u1": 1, "|i1": 1, "<i2": 2, "<u2": 2, "<u4": 4}[a.Dtype]
	if esize == 0 {
		return nil, fmt.Errorf("unsupported dtype %s (want <f4, <f8, <f2, <i8, <i4, <i2, |i1, <u4, <u2, |u1 or |b1)", a.Dtype)
	}
	need := int64(n) * int64(esize) // n ≤ MaxElems: no overflow
	if need > MaxBytes {
		return nil, fmt.Errorf("shape %v of %s declares %d bytes of data, more than the %d (16 GiB) fac reads", a.Shape, a.Dtype, need, int64(MaxBytes))
	}
	if size >= 0 {
		if have := size - int64(off+hlen); have != need {
			return nil, fmt.Errorf("data has %d bytes, shape %v of %s needs %d", have, a.Shape, a.Dtype, need)
		}
	}
	data, err := readData(r, need, size >= 0)
	if err != nil {
		return nil, fmt.Errorf("%w, shape %v of %s needs %d", err, a.Shape, a.Dtype, need)
	}
	a.Vals = make([]float64, n)
	a.data = decodeTyped(a.Dtype, data, n, a.Vals)
	return a, nil
}

// readData reads exactly need bytes from r and checks that r ends there.
// Unless the caller has checked r's size (sized), memory grows with what
// arrives, not with need, so that a short stream cannot make it allocate
// what its header declares.
func readData(r io.Reader, need int64, sized bool) ([]byte, error) {
	var data []byte
	if sized {
		data = make([]byte, need)
		if got, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("data has %d bytes", got)
		}
	} else {
		var buf bytes.Buffer
		buf.Grow(int(min(need, 1<<26)))
		got, err := io.Copy(&buf, io.LimitReader(r, need))
		if err != nil {
			return nil, fmt.Errorf("reading data after %d bytes: %w", got, err)
		}
		if got != need {
			return nil, fmt.Errorf("data has %d bytes", got)
		}
		data = buf.Bytes()
	}
	var one [1]byte
	if k, _ := io.ReadFull(r, one[:]); k > 0 {
		return nil, fmt.Errorf("data has more than %d bytes", need)
	}
	return data, nil
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
