package cuda

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestOpenMissingSymbols(t *testing.T) {
	// libc exists everywhere but has none of the driver's symbols.
	_, err := open("libc.so.6")
	if err == nil {
		t.Fatal("open(libc.so.6) succeeded")
	}
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "missing symbols") || !strings.Contains(err.Error(), "cuInit") {
		t.Errorf("open(libc.so.6) = %v", err)
	}
	if strings.Contains(err.Error(), "cuTensorMapEncodeTiled") {
		t.Errorf("optional symbol reported as missing: %v", err)
	}
}

func TestOpenMissingLibrary(t *testing.T) {
	_, err := open("libcuda-fac-test-missing.so.1")
	if err == nil || !errors.Is(err, ErrNoDriver) ||
		!strings.HasPrefix(err.Error(), "cuda: driver not available: libcuda-fac-test-missing.so.1: ") {
		t.Errorf("open(missing) = %v", err)
	}
}

// TestOpenMissingLibraryNamedOnce is issue 46 item 20: the error said
// "libcuda.so.1: libcuda.so.1: cannot open shared object file", the
// library's name from fac and again from dlerror.
func TestOpenMissingLibraryNamedOnce(t *testing.T) {
	const lib = "libcuda-fac-test-missing.so.1"
	_, err := open(lib)
	if err == nil {
		t.Fatal("no error")
	}
	if n := strings.Count(err.Error(), lib); n != 1 {
		t.Errorf("issue 46 item 20: the error names %s %d times: %v", lib, n, err)
	}
}

func TestErrorString(t *testing.T) {
	e := &Error{Func: "cuModuleLoadDataEx", Code: ErrorInvalidPTX, Name: "CUDA_ERROR_INVALID_PTX", Desc: "a PTX JIT compilation failed"}
	want := "cuda: cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)"
	if e.Error() != want {
		t.Errorf("got %q, want %q", e.Error(), want)
	}
	e.Log = "ptxas fatal : Unresolved extern function 'foo'"
	if !strings.HasSuffix(e.Error(), "\n"+e.Log) {
		t.Errorf("log missing from %q", e.Error())
	}
}

func TestKernelArgs(t *testing.T) {
	var tm TensorMap
	tm[0], tm[15] = 7, 9
	args := []any{DevicePtr(0x1000), int32(-1), uint32(5), float32(1.5), int64(-2), uint64(3), float64(0.25), uintptr(4), tm, &tm}
	words := 0
	for _, a := range args {
		n, err := argWords(a)
		if err != nil {
			t.Fatal(err)
		}
		words += n
	}
	if words != 8+2*16 {
		t.Fatalf("words = %d", words)
	}
	store := make([]uint64, words)
	w := 0
	for _, a := range args {
		w += putArg(store[w:], a)
	}
	want := []uint64{0x1000, 0xffffffff, 5, uint64(math.Float32bits(1.5)), uint64(math.MaxUint64 - 1), 3, math.Float64bits(0.25), 4}
	for i, v := range want {
		if store[i] != v {
			t.Errorf("word %d = %#x, want %#x", i, store[i], v)
		}
	}
	if store[8] != 7 || store[23] != 9 || store[24] != 7 || store[39] != 9 {
		t.Errorf("tensor map not copied: %v", store[8:])
	}
	for _, bad := range []any{1, uint(1), "x", []float32{1}, int16(1)} {
		if _, err := argWords(bad); err == nil {
			t.Errorf("argWords(%T) accepted", bad)
		}
	}
}

func TestTensorMapValidation(t *testing.T) {
	_, err := TiledTensorMap{Dims: []uint64{64, 64}, Strides: nil, Box: []uint32{64, 64}}.Encode()
	if err == nil || !strings.Contains(err.Error(), "rank 2 needs 1 strides") {
		t.Errorf("Encode with missing strides: %v", err)
	}
}

// The driver's JIT log as the H200 printed it for a kernel whose wgmma were
// serialized: only the C75xx line is a performance warning.
func TestPerformanceWarnings(t *testing.T) {
	log := `ptxas info    : (C7509) Potential Performance Loss: wgmma.mma_async instructions are serialized due to the presence of Extern calls in the function 'flash_fwd'
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'flash_fwd' for 'sm_90a'
ptxas info    : Used 206 registers, used 1 barriers`
	w := PerformanceWarnings(log)
	if len(w) != 1 || !strings.HasPrefix(w[0], "ptxas info    : (C7509)") {
		t.Fatalf("PerformanceWarnings = %q, want the C7509 line", w)
	}
	if w := PerformanceWarnings("ptxas info    : Used 234 registers, used 1 barriers"); len(w) != 0 {
		t.Fatalf("PerformanceWarnings of a clean log = %q", w)
	}
}
