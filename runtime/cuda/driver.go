// Package cuda is a small binding of the CUDA driver API, loaded at run time
// from libcuda.so.1 with purego, so fac builds with CGO_ENABLED=0 and no
// CUDA headers, and still runs on machines without a GPU.
//
// The driver is loaded (and cuInit called) once, on first use. If the
// library, a required symbol or cuInit is missing, every function returns an
// error wrapping ErrNoDriver; nothing panics.
//
// CUDA's current context is per OS thread, but goroutines move between
// threads. The package therefore keeps one process-wide current context
// (set by Context.SetCurrent) and, for each call that needs a context, pins
// the goroutine to its thread and makes that context current there first.
//
// Typical use:
//
//	dev, _ := cuda.GetDevice(0)
//	ctx, _ := cuda.PrimaryContext(dev)
//	ctx.SetCurrent()
//	mod, _ := cuda.LoadModule(ptx)
//	fn, _ := mod.Function("kernel")
//	fn.Launch(grid, block, 0, cuda.Stream{}, ptr, int32(n))
package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// LibName is the shared library loaded on first use.
const LibName = "libcuda.so.1"

// libName is LibName except in tests that simulate a missing driver.
var libName = LibName

// ErrNoDriver is wrapped by every error caused by a missing or unusable
// CUDA driver, so callers can fall back with errors.Is(err, ErrNoDriver).
var ErrNoDriver = errors.New("cuda: driver not available")

// fn identifies a driver entry point; the values index sym.
type fn int

const (
	fInit fn = iota
	fDriverGetVersion
	fGetErrorName
	fGetErrorString
	fDeviceGetCount
	fDeviceGet
	fDeviceGetName
	fDeviceGetAttribute
	fDeviceTotalMem
	fDevicePrimaryCtxRetain
	fDevicePrimaryCtxRelease
	fCtxSetCurrent
	fCtxGetCurrent
	fCtxSynchronize
	fModuleLoadDataEx
	fModuleGetFunction
	fModuleGetGlobal
	fModuleUnload
	fFuncGetAttribute
	fFuncSetAttribute
	fOccupancyMaxBlocks
	fLaunchKernel
	fLaunchKernelEx
	fMemAlloc
	fMemFree
	fMemGetInfo
	fMemcpyHtoD
	fMemcpyDtoH
	fMemcpyDtoD
	fMemcpyHtoDAsync
	fMemcpyDtoHAsync
	fMemsetD8
	fMemsetD32
	fMemsetD32Async
	fStreamCreate
	fStreamSynchronize
	fStreamDestroy
	fEventCreate
	fEventRecord
	fEventSynchronize
	fEventElapsedTime
	fEventDestroy
	fTensorMapEncodeTiled
	fLinkCreate
	fLinkAddData
	fLinkComplete
	fLinkDestroy
	numFn
)

type symbol struct {
	name     string
	fallback string // older name, used when name is missing
	optional bool   // newer than the oldest driver we support; checked per call
}

// syms are the driver symbol names; _v2 names where the driver has them,
// because the unsuffixed ones keep legacy 32-bit or deprecated behaviour.
var syms = [numFn]symbol{
	fInit:                    {name: "cuInit"},
	fDriverGetVersion:        {name: "cuDriverGetVersion"},
	fGetErrorName:            {name: "cuGetErrorName"},
	fGetErrorString:          {name: "cuGetErrorString"},
	fDeviceGetCount:          {name: "cuDeviceGetCount"},
	fDeviceGet:               {name: "cuDeviceGet"},
	fDeviceGetName:           {name: "cuDeviceGetName"},
	fDeviceGetAttribute:      {name: "cuDeviceGetAttribute"},
	fDeviceTotalMem:          {name: "cuDeviceTotalMem_v2"},
	fDevicePrimaryCtxRetain:  {name: "cuDevicePrimaryCtxRetain"},
	fDevicePrimaryCtxRelease: {name: "cuDevicePrimaryCtxRelease_v2"},
	fCtxSetCurrent:           {name: "cuCtxSetCurrent"},
	fCtxGetCurrent:           {name: "cuCtxGetCurrent"},
	fCtxSynchronize:          {name: "cuCtxSynchronize"},
	fModuleLoadDataEx:        {name: "cuModuleLoadDataEx"},
	fLinkCreate:              {name: "cuLinkCreate_v2"},
	fLinkAddData:             {name: "cuLinkAddData_v2"},
	fLinkComplete:            {name: "cuLinkComplete"},
	fLinkDestroy:             {name: "cuLinkDestroy"},
	fModuleGetFunction:       {name: "cuModuleGetFunction"},
	fModuleGetGlobal:         {name: "cuModuleGetGlobal_v2"},
	fModuleUnload:            {name: "cuModuleUnload"},
	fFuncGetAttribute:        {name: "cuFuncGetAttribute"},
	fFuncSetAttribute:        {name: "cuFuncSetAttribute"},
	fOccupancyMaxBlocks:      {name: "cuOccupancyMaxActiveBlocksPerMultiprocessor"},
	fLaunchKernel:            {name: "cuLaunchKernel"},
	fLaunchKernelEx:          {name: "cuLaunchKernelEx", optional: true},
	fMemAlloc:                {name: "cuMemAlloc_v2"},
	fMemFree:                 {name: "cuMemFree_v2"},
	fMemGetInfo:              {name: "cuMemGetInfo_v2"},
	fMemcpyHtoD:              {name: "cuMemcpyHtoD_v2"},
	fMemcpyDtoH:              {name: "cuMemcpyDtoH_v2"},
	fMemcpyDtoD:              {name: "cuMemcpyDtoD_v2"},
	fMemcpyHtoDAsync:         {name: "cuMemcpyHtoDAsync_v2"},
	fMemcpyDtoHAsync:         {name: "cuMemcpyDtoHAsync_v2"},
	fMemsetD8:                {name: "cuMemsetD8_v2"},
	fMemsetD32:               {name: "cuMemsetD32_v2"},
	fMemsetD32Async:          {name: "cuMemsetD32Async"},
	fStreamCreate:            {name: "cuStreamCreate"},
	fStreamSynchronize:       {name: "cuStreamSynchronize"},
	fStreamDestroy:           {name: "cuStreamDestroy_v2"},
	fEventCreate:             {name: "cuEventCreate"},
	fEventRecord:             {name: "cuEventRecord"},
	fEventSynchronize:        {name: "cuEventSynchronize"},
	fEventElapsedTime:        {name: "cuEventElapsedTime_v2", fallback: "cuEventElapsedTime"}, // _v2 since CUDA 12.8
	fEventDestroy:            {name: "cuEventDestroy_v2"},
	fTensorMapEncodeTiled:    {name: "cuTensorMapEncodeTiled", optional: true},
}

type driver struct {
	addr [numFn]uintptr
}

var (
	loadOnce sync.Once
	drv      *driver
	drvErr   error
	// current is the process-wide current CUcontext (see package doc).
	current atomic.Uintptr
)

// open dlopens lib and resolves every symbol, without calling cuInit.
func open(lib string) (*driver, error) {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		// dlerror names the library itself ("libcuda.so.1: cannot open
		// shared object file: ..."): name it once.
		msg := err.Error()
		if !strings.HasPrefix(msg, lib+":") {
			msg = lib + ": " + msg
		}
		return nil, fmt.Errorf("%w: %s", ErrNoDriver, msg)
	}
	d := &driver{}
	var missing []string
	for i, s := range syms {
		a, err := purego.Dlsym(h, s.name)
		if (err != nil || a == 0) && s.fallback != "" {
			a, err = purego.Dlsym(h, s.fallback)
		}
		if err != nil || a == 0 {
			if !s.optional {
				missing = append(missing, s.name)
			}
			continue
		}
		d.addr[i] = a
	}
	if len(missing) > 0 {
		purego.Dlclose(h)
		return nil, fmt.Errorf("%w: %s: missing symbols %v (driver too old?)", ErrNoDriver, lib, missing)
	}
	return d, nil
}

// load opens the driver and runs cuInit(0) once per process.
func load() (*driver, error) {
	loadOnce.Do(func() {
		d, err := open(libName)
		if err != nil {
			drvErr = err
			return
		}
		if err := d.call(fInit, 0); err != nil {
			drvErr = fmt.Errorf("%w: %v", ErrNoDriver, err)
			return
		}
		drv = d
	})
	return drv, drvErr
}

// Init loads the driver and initializes it. Other functions do this
// implicitly; Init lets a caller check for a usable driver up front.
func Init() error {
	_, err := load()
	return err
}

// call invokes a driver function and converts its CUresult.
//
// Pointer arguments are passed as uintptr(unsafe.Pointer(p)) in the call
// expression; go:uintptrescapes keeps those objects alive and in place for
// the duration of the call, as for syscall.Syscall.
//
//go:uintptrescapes
func (d *driver) call(f fn, args ...uintptr) error {
	a := d.addr[f]
	if a == 0 {
		return fmt.Errorf("cuda: %s is not available in this driver", syms[f].name)
	}
	r, _, _ := purego.SyscallN(a, args...)
	return d.check(f, Result(int32(uint32(r))))
}

// haveSymbol reports whether the driver has optional function f.
func haveSymbol(f fn) bool {
	d, err := load()
	return err == nil && d.addr[f] != 0
}

// call loads the driver and invokes f without touching the context.
//
//go:uintptrescapes
func call(f fn, args ...uintptr) error {
	d, err := load()
	if err != nil {
		return err
	}
	return d.call(f, args...)
}

// ctxCall invokes f with the process-wide current context made current on
// the calling OS thread.
//
//go:uintptrescapes
func ctxCall(f fn, args ...uintptr) error {
	return withContext(current.Load(), f, args...)
}

// withContext invokes f with context c (if non-zero) current on this thread.
//
//go:uintptrescapes
func withContext(c uintptr, f fn, args ...uintptr) error {
	d, err := load()
	if err != nil {
		return err
	}
	if c != 0 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var have uintptr
		if err := d.call(fCtxGetCurrent, uintptr(unsafe.Pointer(&have))); err != nil {
			return err
		}
		if have != c {
			if err := d.call(fCtxSetCurrent, c); err != nil {
				return err
			}
		}
	}
	return d.call(f, args...)
}

// Result is a CUresult code.
type Result int32

// A few CUresult values callers may want to test for with errors.As.
const (
	Success                   Result = 0
	ErrorInvalidValue         Result = 1
	ErrorOutOfMemory          Result = 2
	ErrorNoDevice             Result = 100
	ErrorInvalidPTX           Result = 218
	ErrorNotFound             Result = 500
	ErrorNotReady             Result = 600
	ErrorIllegalAddress       Result = 700
	ErrorLaunchOutOfResources Result = 701
	ErrorLaunchFailed         Result = 719
)

// Error is a failed driver call.
type Error struct {
	Func string // driver function, e.g. "cuModuleLoadDataEx"
	Code Result
	Name string // e.g. "CUDA_ERROR_INVALID_PTX"
	Desc string // e.g. "a PTX JIT compilation failed"
	Log  string // JIT error log for module loads, else empty
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cuda: %s: %s (%s)", e.Func, e.Name, e.Desc)
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

func (d *driver) check(f fn, r Result) error {
	if r == Success {
		return nil
	}
	e := &Error{Func: syms[f].name, Code: r, Name: fmt.Sprintf("CUresult %d", r), Desc: "unknown error"}
	var p *byte
	if d.addr[fGetErrorName] != 0 {
		if rr, _, _ := purego.SyscallN(d.addr[fGetErrorName], uintptr(r), uintptr(unsafe.Pointer(&p))); rr == 0 && p != nil {
			e.Name = cString(p)
		}
	}
	p = nil
	if d.addr[fGetErrorString] != 0 {
		if rr, _, _ := purego.SyscallN(d.addr[fGetErrorString], uintptr(r), uintptr(unsafe.Pointer(&p))); rr == 0 && p != nil {
			e.Desc = cString(p)
		}
	}
	return e
}

// cString copies a NUL-terminated C string owned by the driver.
func cString(p *byte) string {
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// goString returns buf up to its first NUL.
func goString(buf []byte) string {
	for i, b := range buf {
		if b == 0 {
			return string(buf[:i])
		}
	}
	return string(buf)
}

// DriverVersion returns the driver's CUDA version, e.g. 13000 for 13.0.
func DriverVersion() (int, error) {
	var v int32
	if err := call(fDriverGetVersion, uintptr(unsafe.Pointer(&v))); err != nil {
		return 0, err
	}
	return int(v), nil
}
