//go:build gpu

package cuda

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// Run on a GPU machine with: go test -tags gpu ./runtime/cuda/
// Set FAC_TEST_LLC_PTX to a PTX file made by llc from a kernel
// add_one(float*, i32) to also check llc's output end to end.

const testPTX = `
.version 7.8
.target sm_80
.address_size 64

.visible .global .align 4 .u32 counter = 42;

.visible .entry add_one(
	.param .u64 add_one_p,
	.param .u32 add_one_n
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<5>;

	ld.param.u64 %rd1, [add_one_p];
	ld.param.u32 %r1, [add_one_n];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r5, %r2, %r3, %r4;
	setp.ge.s32 %p1, %r5, %r1;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd2, %rd1;
	mul.wide.s32 %rd3, %r5, 4;
	add.s64 %rd4, %rd2, %rd3;
	ld.global.f32 %f1, [%rd4];
	add.f32 %f2, %f1, 0f3F800000;
	st.global.f32 [%rd4], %f2;
DONE:
	ret;
}

// mix stores each scalar parameter into an 8-byte slot of out.
.visible .entry mix(
	.param .u64 mix_out,
	.param .u32 mix_a,
	.param .f32 mix_b,
	.param .u64 mix_c,
	.param .f64 mix_d,
	.param .u32 mix_e
)
{
	.reg .b32 %r<3>;
	.reg .f32 %f<2>;
	.reg .f64 %fd<2>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [mix_out];
	cvta.to.global.u64 %rd1, %rd1;
	ld.param.u32 %r1, [mix_a];
	st.global.u32 [%rd1], %r1;
	ld.param.f32 %f1, [mix_b];
	st.global.f32 [%rd1+8], %f1;
	ld.param.u64 %rd2, [mix_c];
	st.global.u64 [%rd1+16], %rd2;
	ld.param.f64 %fd1, [mix_d];
	st.global.f64 [%rd1+24], %fd1;
	ld.param.u32 %r2, [mix_e];
	st.global.u32 [%rd1+32], %r2;
	ret;
}
`

// copyTMPTX copies a 128-byte by-value parameter (a tensor map) to out.
func copyTMPTX() string {
	var b strings.Builder
	b.WriteString(".version 8.0\n.target sm_90a\n.address_size 64\n\n")
	b.WriteString(".visible .entry copy_tm(\n\t.param .align 64 .b8 copy_tm_m[128],\n\t.param .u64 copy_tm_out\n)\n{\n\t.reg .b64 %rd<3>;\n")
	b.WriteString("\tld.param.u64 %rd1, [copy_tm_out];\n\tcvta.to.global.u64 %rd1, %rd1;\n")
	for i := 0; i < 16; i++ {
		fmt.Fprintf(&b, "\tld.param.u64 %%rd2, [copy_tm_m+%d];\n\tst.global.u64 [%%rd1+%d], %%rd2;\n", 8*i, 8*i)
	}
	b.WriteString("\tret;\n}\n")
	return b.String()
}

var (
	setupOnce sync.Once
	setupDev  Device
	setupErr  error
)

func setup(t *testing.T) Device {
	t.Helper()
	setupOnce.Do(func() {
		if setupErr = Init(); setupErr != nil {
			return
		}
		if setupDev, setupErr = GetDevice(0); setupErr != nil {
			return
		}
		ctx, err := PrimaryContext(setupDev)
		if err != nil {
			setupErr = err
			return
		}
		setupErr = ctx.SetCurrent()
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return setupDev
}

func TestGPUDevice(t *testing.T) {
	dev := setup(t)
	n, err := DeviceCount()
	if err != nil || n < 1 {
		t.Fatalf("DeviceCount = %d, %v", n, err)
	}
	name, err := dev.Name()
	if err != nil || name == "" {
		t.Fatalf("Name = %q, %v", name, err)
	}
	major, minor, err := dev.ComputeCapability()
	if err != nil || major < 7 {
		t.Fatalf("ComputeCapability = %d.%d, %v", major, minor, err)
	}
	arch, _ := dev.Arch()
	ver, _ := DriverVersion()
	sms, _ := dev.Attribute(DevAttrMultiprocessorCount)
	smem, _ := dev.Attribute(DevAttrMaxSharedMemoryPerBlockOptin)
	l2, _ := dev.Attribute(DevAttrL2CacheSize)
	total, _ := dev.TotalMem()
	free, total2, err := MemGetInfo()
	if err != nil || free == 0 || total2 != total {
		t.Errorf("MemGetInfo = %d, %d, %v (TotalMem %d)", free, total2, err, total)
	}
	t.Logf("%s: cc %d.%d (%s), driver %d, %d SMs, smem optin %d, L2 %d, mem %d/%d", name, major, minor, arch, ver, sms, smem, l2, free, total)
	if sms <= 0 || smem < 48<<10 || l2 <= 0 {
		t.Errorf("implausible attributes: SMs %d, smem %d, L2 %d", sms, smem, l2)
	}
}

func TestGPUMemory(t *testing.T) {
	setup(t)
	const n = 1 << 20
	p, err := MemAlloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer MemFree(p)

	if err := MemsetD8(p, 0xab, 4*n); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*n)
	if err := DtoH(got, p); err != nil {
		t.Fatal(err)
	}
	for i, b := range got {
		if b != 0xab {
			t.Fatalf("byte %d = %#x after MemsetD8", i, b)
		}
	}
	if err := MemsetD32(p, math.Float32bits(-1), n); err != nil {
		t.Fatal(err)
	}
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i)
	}
	if err := HtoD(p, src[:n/2]); err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, n)
	for i := range dst {
		dst[i] = float32(math.NaN()) // poison
	}
	if err := DtoH(dst, p); err != nil {
		t.Fatal(err)
	}
	for i, v := range dst {
		want := float32(-1)
		if i < n/2 {
			want = float32(i)
		}
		if v != want {
			t.Fatalf("element %d = %v, want %v", i, v, want)
		}
	}

	q, err := MemAlloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer MemFree(q)
	if err := MemcpyDtoD(q, p, 4*n); err != nil {
		t.Fatal(err)
	}
	clear(dst)
	if err := DtoH(dst, q); err != nil || dst[n/2-1] != float32(n/2-1) {
		t.Fatalf("DtoD: %v, %v", err, dst[n/2-1])
	}

	// The timer's L2 flush: queued on a stream, done by its synchronization.
	s, err := NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := MemsetD32Async(q, math.Float32bits(2.5), n, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := DtoH(dst, q); err != nil || dst[0] != 2.5 || dst[n-1] != 2.5 {
		t.Fatalf("MemsetD32Async: %v, %v %v", err, dst[0], dst[n-1])
	}

	if _, err := MemAlloc(1 << 50); err == nil {
		t.Error("allocating 1 PiB succeeded")
	} else {
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != ErrorOutOfMemory || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") {
			t.Errorf("1 PiB alloc error = %v", err)
		}
	}
}

func loadTest(t *testing.T, ptx string) *Module {
	t.Helper()
	m, err := LoadModule([]byte(ptx))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unload() })
	return m
}

// addOne runs add_one on n floats on stream s and checks the result.
func addOne(fn *Function, n int, shared uint32, s Stream) error {
	p, err := MemAlloc(4 * n)
	if err != nil {
		return err
	}
	defer MemFree(p)
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i) * 0.5
	}
	if err := MemcpyHtoDAsync(p, unsafe.Pointer(&src[0]), 4*n, s); err != nil {
		return err
	}
	grid := [3]uint32{uint32((n + 255) / 256), 1, 1}
	if err := fn.Launch(grid, [3]uint32{256, 1, 1}, shared, s, p, int32(n)); err != nil {
		return err
	}
	dst := make([]float32, n)
	for i := range dst {
		dst[i] = float32(math.NaN()) // poison
	}
	if err := MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), p, 4*n, s); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	for i, v := range dst {
		if v != src[i]+1 {
			return fmt.Errorf("element %d = %v, want %v", i, v, src[i]+1)
		}
	}
	return nil
}

func runAddOne(t *testing.T, fn *Function, n int, shared uint32, s Stream) {
	t.Helper()
	if err := addOne(fn, n, shared, s); err != nil {
		t.Fatal(err)
	}
}

func TestGPULaunch(t *testing.T) {
	setup(t)
	m := loadTest(t, testPTX)
	fn, err := m.Function("add_one")
	if err != nil {
		t.Fatal(err)
	}
	regs, err := fn.Attribute(FuncAttrNumRegs)
	if err != nil || regs <= 0 {
		t.Errorf("NumRegs = %d, %v", regs, err)
	}
	local, _ := fn.Attribute(FuncAttrLocalSizeBytes)
	maxT, _ := fn.Attribute(FuncAttrMaxThreadsPerBlock)
	t.Logf("add_one: %d regs, %d local bytes, max %d threads", regs, local, maxT)

	runAddOne(t, fn, 1000003, 0, Stream{})

	s, err := NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	runAddOne(t, fn, 4097, 0, s)

	// More than 48 KiB of dynamic shared memory needs the opt-in attribute.
	if err := fn.Launch([3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 100<<10, Stream{}, DevicePtr(0), int32(0)); err == nil {
		t.Error("launch with 100 KiB shared memory succeeded without opt-in")
	}
	if err := fn.SetMaxDynamicSharedMemory(100 << 10); err != nil {
		t.Fatal(err)
	}
	runAddOne(t, fn, 1000, 100<<10, s)

	if _, err := m.Function("no_such_kernel"); err == nil || !strings.Contains(err.Error(), "no_such_kernel") {
		t.Errorf("missing function: %v", err)
	}
	if err := fn.Launch([3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, Stream{}, DevicePtr(0), 5); err == nil {
		t.Error("plain int argument accepted")
	}

	g, size, err := m.Global("counter")
	if err != nil || size != 4 {
		t.Fatalf("Global = %v, %d, %v", g, size, err)
	}
	c := []uint32{0}
	if err := DtoH(c, g); err != nil || c[0] != 42 {
		t.Errorf("counter = %d, %v", c[0], err)
	}
}

func TestGPUArgs(t *testing.T) {
	setup(t)
	m := loadTest(t, testPTX)
	fn, err := m.Function("mix")
	if err != nil {
		t.Fatal(err)
	}
	out, err := MemAlloc(40)
	if err != nil {
		t.Fatal(err)
	}
	defer MemFree(out)
	if err := fn.Launch([3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, Stream{}, out, int32(-7), float32(2.5), int64(-1<<40), 0.125, uint32(99)); err != nil {
		t.Fatal(err)
	}
	got := make([]uint64, 5)
	if err := DtoH(got, out); err != nil {
		t.Fatal(err)
	}
	if int32(got[0]) != -7 || math.Float32frombits(uint32(got[1])) != 2.5 || int64(got[2]) != -1<<40 ||
		math.Float64frombits(got[3]) != 0.125 || uint32(got[4]) != 99 {
		t.Errorf("mix wrote %#x", got)
	}
}

func TestGPUTensorMap(t *testing.T) {
	dev := setup(t)
	if major, _, _ := dev.ComputeCapability(); major < 9 {
		t.Skip("needs sm_90")
	}
	buf, err := MemAlloc(128 * 256 * 2)
	if err != nil {
		t.Fatal(err)
	}
	defer MemFree(buf)
	tm, err := TiledTensorMap{
		DataType: TensorBFloat16, Addr: buf,
		Dims: []uint64{128, 256}, Strides: []uint64{256}, Box: []uint32{64, 64},
		Swizzle: Swizzle128B,
	}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (TiledTensorMap{DataType: TensorBFloat16, Addr: buf + 1, Dims: []uint64{128, 256}, Strides: []uint64{256}, Box: []uint32{64, 64}}).Encode(); err == nil {
		t.Error("misaligned tensor map address accepted")
	}

	m := loadTest(t, copyTMPTX())
	fn, err := m.Function("copy_tm")
	if err != nil {
		t.Fatal(err)
	}
	out, err := MemAlloc(128)
	if err != nil {
		t.Fatal(err)
	}
	defer MemFree(out)
	for _, arg := range []any{tm, *tm} {
		if err := MemsetD8(out, 0, 128); err != nil {
			t.Fatal(err)
		}
		if err := fn.Launch([3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, Stream{}, arg, out); err != nil {
			t.Fatal(err)
		}
		var got TensorMap
		if err := DtoH(got[:], out); err != nil {
			t.Fatal(err)
		}
		if got != *tm {
			t.Errorf("kernel saw %#x\nwant %#x", got, *tm)
		}
	}
}

func TestGPUEvents(t *testing.T) {
	setup(t)
	fn, err := loadTest(t, testPTX).Function("add_one")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 24
	p, err := MemAlloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer MemFree(p)
	start, err := NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer start.Destroy()
	end, _ := NewEvent()
	defer end.Destroy()
	s, _ := NewStream()
	defer s.Destroy()
	if err := start.Record(s); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := fn.Launch([3]uint32{n / 256, 1, 1}, [3]uint32{256, 1, 1}, 0, s, p, int32(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := end.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := end.Synchronize(); err != nil {
		t.Fatal(err)
	}
	ms, err := ElapsedMs(start, end)
	if err != nil || ms <= 0 {
		t.Fatalf("ElapsedMs = %v, %v", ms, err)
	}
	t.Logf("10 x add_one on %d floats: %.3f ms (%.0f GB/s)", n, ms, 10*8*float64(n)/float64(ms)/1e6)
}

func TestGPUJITError(t *testing.T) {
	setup(t)
	bad := strings.Replace(testPTX, "add.f32 %f2, %f1, 0f3F800000;", "add.f32 %f2, %f9, 0f3F800000;", 1)
	_, err := LoadModule([]byte(bad))
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != ErrorInvalidPTX {
		t.Fatalf("bad PTX: err = %v, want CUDA_ERROR_INVALID_PTX", err)
	}
	if ce.Log == "" || !strings.Contains(err.Error(), ce.Log) || !strings.Contains(err.Error(), "cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX") {
		t.Errorf("JIT log not surfaced: %v", err)
	}
	t.Logf("JIT error:\n%v", err)
}

// TestGPUGoroutines checks that the process-wide context follows
// goroutines onto whatever OS threads they run on.
func TestGPUGoroutines(t *testing.T) {
	setup(t)
	fn, err := loadTest(t, testPTX).Function("add_one")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := NewStream()
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Destroy()
			for i := 0; i < 20; i++ {
				if err := addOne(fn, 1000+g, 0, s); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestGPULLCKernel(t *testing.T) {
	path := os.Getenv("FAC_TEST_LLC_PTX")
	if path == "" {
		t.Skip("FAC_TEST_LLC_PTX not set")
	}
	setup(t)
	ptx, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := loadTest(t, string(ptx))
	fn, err := m.Function("add_one")
	if err != nil {
		t.Fatal(err)
	}
	if m.InfoLog != "" {
		t.Logf("JIT info log: %s", m.InfoLog)
	}
	runAddOne(t, fn, 12345, 0, Stream{})
}
