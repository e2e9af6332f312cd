//go:build !gpu

package cuda

import (
	"errors"
	"os"
	"testing"
	"unsafe"
)

// Without the gpu tag the tests run as on a machine without a driver, even
// where one is installed.
func TestMain(m *testing.M) {
	libName = "libcuda-fac-test-missing.so.1"
	os.Exit(m.Run())
}

func TestNoDriver(t *testing.T) {
	var buf [16]byte
	p := unsafe.Pointer(&buf[0])
	fakeCtx := &Context{h: 1}
	mod := &Module{h: 1}
	fn := &Function{h: 1, name: "k"}
	s, ev := Stream{h: 1}, Event{h: 1}
	calls := map[string]func() error{
		"Init":                      Init,
		"DriverVersion":             func() error { _, err := DriverVersion(); return err },
		"DeviceCount":               func() error { _, err := DeviceCount(); return err },
		"GetDevice":                 func() error { _, err := GetDevice(0); return err },
		"Name":                      func() error { _, err := Device(0).Name(); return err },
		"Attribute":                 func() error { _, err := Device(0).Attribute(DevAttrMultiprocessorCount); return err },
		"ComputeCapability":         func() error { _, _, err := Device(0).ComputeCapability(); return err },
		"Arch":                      func() error { _, err := Device(0).Arch(); return err },
		"TotalMem":                  func() error { _, err := Device(0).TotalMem(); return err },
		"PrimaryContext":            func() error { _, err := PrimaryContext(0); return err },
		"SetCurrent":                fakeCtx.SetCurrent,
		"Synchronize":               fakeCtx.Synchronize,
		"Release":                   func() error { return (&Context{h: 1}).Release() },
		"LoadModule":                func() error { _, err := LoadModule([]byte(".version 8.0")); return err },
		"Function":                  func() error { _, err := mod.Function("k"); return err },
		"Global":                    func() error { _, _, err := mod.Global("g"); return err },
		"Unload":                    func() error { return (&Module{h: 1}).Unload() },
		"FuncAttribute":             func() error { _, err := fn.Attribute(FuncAttrNumRegs); return err },
		"SetMaxDynamicSharedMemory": func() error { return fn.SetMaxDynamicSharedMemory(100 << 10) },
		"MaxActiveBlocksPerSM":      func() error { _, err := fn.MaxActiveBlocksPerSM(128, 48<<10); return err },
		"Launch": func() error {
			return fn.Launch([3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, Stream{}, DevicePtr(1), int32(2))
		},
		"MemAlloc":          func() error { _, err := MemAlloc(16); return err },
		"MemFree":           func() error { return MemFree(1) },
		"MemGetInfo":        func() error { _, _, err := MemGetInfo(); return err },
		"MemcpyHtoD":        func() error { return MemcpyHtoD(1, p, 16) },
		"MemcpyDtoH":        func() error { return MemcpyDtoH(p, 1, 16) },
		"MemcpyDtoD":        func() error { return MemcpyDtoD(1, 2, 16) },
		"MemcpyHtoDAsync":   func() error { return MemcpyHtoDAsync(1, p, 16, s) },
		"MemcpyDtoHAsync":   func() error { return MemcpyDtoHAsync(p, 1, 16, s) },
		"MemsetD8":          func() error { return MemsetD8(1, 0xff, 16) },
		"MemsetD32":         func() error { return MemsetD32(1, 0xffffffff, 4) },
		"MemsetD32Async":    func() error { return MemsetD32Async(1, 0, 4, s) },
		"HtoD":              func() error { return HtoD(1, []float32{1}) },
		"DtoH":              func() error { return DtoH([]float32{1}, 1) },
		"NewStream":         func() error { _, err := NewStream(); return err },
		"StreamSynchronize": s.Synchronize,
		"StreamDestroy":     s.Destroy,
		"NewEvent":          func() error { _, err := NewEvent(); return err },
		"Record":            func() error { return ev.Record(s) },
		"EventSynchronize":  ev.Synchronize,
		"ElapsedMs":         func() error { _, err := ElapsedMs(ev, ev); return err },
		"EventDestroy":      ev.Destroy,
		"EncodeTensorMap": func() error {
			_, err := TiledTensorMap{DataType: TensorBFloat16, Addr: 1 << 20, Dims: []uint64{64, 64}, Strides: []uint64{128}, Box: []uint32{64, 64}}.Encode()
			return err
		},
	}
	for name, f := range calls {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			err := f()
			if !errors.Is(err, ErrNoDriver) {
				t.Fatalf("err = %v, want ErrNoDriver", err)
			}
			if want := "cuda: driver not available: libcuda-fac-test-missing.so.1: "; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
				t.Errorf("err = %q", err)
			}
		})
	}
}
