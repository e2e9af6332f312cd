package cuda

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"unsafe"
)

// JIT option codes (CUjit_option).
const (
	jitInfoLogBuffer          = 3
	jitInfoLogBufferSizeBytes = 4
	jitErrorLogBuffer         = 5
	jitErrorLogBufferSize     = 6
	jitLogVerbose             = 12
)

// jitLogSize is the size of each JIT log buffer. A variable, not a
// constant, so the buffers are heap-allocated.
var jitLogSize = 16 << 10

// Module is a loaded CUmodule.
type Module struct {
	h uintptr
	// InfoLog is the JIT's informational log from loading (e.g. ptxas
	// warnings), if any.
	InfoLog string
}

// LoadModule loads a PTX (or cubin) image into the current context,
// JIT-compiling PTX. On failure the JIT error log is part of the error.
func LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, errors.New("cuda: LoadModule: empty image")
	}
	// PTX must be NUL-terminated; a copy also keeps the caller's slice out
	// of the driver's hands.
	img := make([]byte, len(image)+1)
	copy(img, image)

	j := newJITLogs()
	var h uintptr
	err := ctxCall(fModuleLoadDataEx, uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(&img[0])),
		uintptr(len(j.opts)), uintptr(unsafe.Pointer(&j.opts[0])), uintptr(unsafe.Pointer(&j.vals[0])))
	runtime.KeepAlive(j)
	if err != nil {
		return nil, j.withErrorLog(err)
	}
	return &Module{h: h, InfoLog: j.info()}, nil
}

// jitLogs are the JIT options both compile paths pass: an error log, and a
// verbose information log (ptxas -v's lines and its performance warnings).
type jitLogs struct {
	errLog, infoLog []byte
	opts            []uint32
	vals            []uintptr
}

func newJITLogs() *jitLogs {
	j := &jitLogs{errLog: make([]byte, jitLogSize), infoLog: make([]byte, jitLogSize)}
	j.opts = []uint32{jitErrorLogBuffer, jitErrorLogBufferSize, jitInfoLogBuffer, jitInfoLogBufferSizeBytes, jitLogVerbose}
	// Size options are passed by value in the void* slot, and the driver
	// writes back how much of the log it used.
	j.vals = []uintptr{
		uintptr(unsafe.Pointer(&j.errLog[0])), uintptr(len(j.errLog)),
		uintptr(unsafe.Pointer(&j.infoLog[0])), uintptr(len(j.infoLog)), 1,
	}
	return j
}

func (j *jitLogs) info() string { return strings.TrimSpace(goString(j.infoLog)) }

// withErrorLog puts the JIT error log into err when it is a driver error.
func (j *jitLogs) withErrorLog(err error) error {
	var ce *Error
	if errors.As(err, &ce) {
		ce.Log = strings.TrimSpace(goString(j.errLog))
	}
	return err
}

// Function looks up a kernel by its PTX entry name.
func (m *Module) Function(name string) (*Function, error) {
	var h uintptr
	cname := append([]byte(name), 0)
	if err := ctxCall(fModuleGetFunction, uintptr(unsafe.Pointer(&h)), m.h, uintptr(unsafe.Pointer(&cname[0]))); err != nil {
		return nil, fmt.Errorf("%w (function %q)", err, name)
	}
	return &Function{h: h, name: name}, nil
}

// Global returns the address and size of a module-scope variable.
func (m *Module) Global(name string) (DevicePtr, int, error) {
	var p DevicePtr
	var size uintptr
	cname := append([]byte(name), 0)
	if err := ctxCall(fModuleGetGlobal, uintptr(unsafe.Pointer(&p)), uintptr(unsafe.Pointer(&size)), m.h, uintptr(unsafe.Pointer(&cname[0]))); err != nil {
		return 0, 0, fmt.Errorf("%w (global %q)", err, name)
	}
	return p, int(size), nil
}

// Unload unloads the module; its Functions become invalid.
func (m *Module) Unload() error {
	if m.h == 0 {
		return nil
	}
	err := ctxCall(fModuleUnload, m.h)
	m.h = 0
	return err
}

// FuncAttribute is a CUfunction_attribute.
type FuncAttribute int32

// Function attributes.
const (
	FuncAttrMaxThreadsPerBlock         FuncAttribute = 0
	FuncAttrSharedSizeBytes            FuncAttribute = 1 // static shared memory
	FuncAttrConstSizeBytes             FuncAttribute = 2
	FuncAttrLocalSizeBytes             FuncAttribute = 3 // per-thread local memory (spills, stack)
	FuncAttrNumRegs                    FuncAttribute = 4
	FuncAttrPTXVersion                 FuncAttribute = 5
	FuncAttrBinaryVersion              FuncAttribute = 6
	FuncAttrMaxDynamicSharedSizeBytes  FuncAttribute = 8
	FuncAttrPreferredSharedMemCarveout FuncAttribute = 9
)

// Function is a kernel in a loaded module.
type Function struct {
	h    uintptr
	name string
}

// Name returns the kernel's entry name.
func (f *Function) Name() string { return f.name }

// Attribute returns a function attribute (registers, local memory, ...).
func (f *Function) Attribute(a FuncAttribute) (int, error) {
	var v int32
	if err := ctxCall(fFuncGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), f.h); err != nil {
		return 0, err
	}
	return int(v), nil
}

// SetAttribute sets a function attribute.
func (f *Function) SetAttribute(a FuncAttribute, v int) error {
	return ctxCall(fFuncSetAttribute, f.h, uintptr(a), uintptr(v))
}

// MaxActiveBlocksPerSM is how many CTAs of the kernel fit on one SM at
// once with block threads each and dynamicShared bytes of dynamic shared
// memory (cuOccupancyMaxActiveBlocksPerMultiprocessor: registers, shared
// memory and the SM's thread and CTA limits); 0 when none fits. Set the
// kernel's dynamic shared memory limit (SetMaxDynamicSharedMemory) first.
func (f *Function) MaxActiveBlocksPerSM(block, dynamicShared int) (int, error) {
	var n int32
	if err := ctxCall(fOccupancyMaxBlocks, uintptr(unsafe.Pointer(&n)), f.h, uintptr(block), uintptr(dynamicShared)); err != nil {
		return 0, fmt.Errorf("%w (kernel %s, block %d, shared %d)", err, f.name, block, dynamicShared)
	}
	return int(n), nil
}

// SetMaxDynamicSharedMemory allows launches with up to bytes of dynamic
// shared memory; needed above 48 KiB.
func (f *Function) SetMaxDynamicSharedMemory(bytes int) error {
	return f.SetAttribute(FuncAttrMaxDynamicSharedSizeBytes, bytes)
}

// Launch runs the kernel on stream s. Each arg is one kernel parameter:
// DevicePtr, uintptr, int32, uint32, int64, uint64, float32, float64, or a
// TensorMap / *TensorMap (passed by value, 128 bytes). Plain int is
// rejected because its width would silently disagree with an i32 param.
func (f *Function) Launch(grid, block [3]uint32, sharedBytes uint32, s Stream, args ...any) error {
	return f.launch(grid, block, sharedBytes, s, false, args...)
}

// LaunchDependent is Launch with programmatic dependent launch
// (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, sm_90 and newer):
// the kernel may start before the previous kernel on s finishes, once
// that kernel's CTAs have all run griddepcontrol.launch_dependents (or
// exited), and must run griddepcontrol.wait before it reads what that
// kernel writes. It hides the launch of a short kernel behind the tail
// of the one before (split-KV's combine). Without cuLaunchKernelEx in the
// driver it is Launch.
func (f *Function) LaunchDependent(grid, block [3]uint32, sharedBytes uint32, s Stream, args ...any) error {
	return f.launch(grid, block, sharedBytes, s, true, args...)
}

// launchConfig is CUlaunchConfig.
type launchConfig struct {
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	sharedBytes            uint32
	_                      uint32
	stream                 uintptr
	attrs                  uintptr // *launchAttribute
	numAttrs               uint32
	_                      uint32
}

// launchAttribute is CUlaunchAttribute: an id, padding to 8 bytes, and a
// 64-byte value union.
type launchAttribute struct {
	id    uint32
	_     uint32
	value [64]byte
}

// attrProgrammaticStreamSerialization is
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION; its value is an
// int, 1 to allow.
const attrProgrammaticStreamSerialization = 6

func (f *Function) launch(grid, block [3]uint32, sharedBytes uint32, s Stream, dependent bool, args ...any) error {
	words := 0
	for i, a := range args {
		n, err := argWords(a)
		if err != nil {
			return fmt.Errorf("cuda: launch %s: argument %d: %w", f.name, i, err)
		}
		words += n
	}
	// The values live in one []uint64 (no Go pointers inside, 8-byte
	// aligned) and params holds their addresses as uintptr: the driver
	// reads them during cuLaunchKernel, and heap memory does not move.
	store := make([]uint64, words+1)
	params := make([]uintptr, len(args)+1)
	w := 0
	for i, a := range args {
		params[i] = uintptr(unsafe.Pointer(&store[w]))
		w += putArg(store[w:], a)
	}
	var err error
	if dependent && haveSymbol(fLaunchKernelEx) {
		attr := &launchAttribute{id: attrProgrammaticStreamSerialization}
		binary.LittleEndian.PutUint32(attr.value[:], 1)
		cfg := &launchConfig{gridX: grid[0], gridY: grid[1], gridZ: grid[2], blockX: block[0], blockY: block[1], blockZ: block[2],
			sharedBytes: sharedBytes, stream: s.h, attrs: uintptr(unsafe.Pointer(attr)), numAttrs: 1}
		err = ctxCall(fLaunchKernelEx, uintptr(unsafe.Pointer(cfg)), f.h, uintptr(unsafe.Pointer(&params[0])), 0)
		runtime.KeepAlive(attr)
		runtime.KeepAlive(cfg)
	} else {
		err = ctxCall(fLaunchKernel, f.h,
			uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
			uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
			uintptr(sharedBytes), s.h, uintptr(unsafe.Pointer(&params[0])), 0)
	}
	runtime.KeepAlive(store)
	if err != nil {
		return fmt.Errorf("%w (kernel %s, grid %v, block %v, shared %d)", err, f.name, grid, block, sharedBytes)
	}
	return nil
}

func argWords(a any) (int, error) {
	switch a.(type) {
	case DevicePtr, uintptr, int32, uint32, int64, uint64, float32, float64:
		return 1, nil
	case TensorMap, *TensorMap:
		return len(TensorMap{}), nil
	case int, uint:
		return 0, fmt.Errorf("%T has no fixed C width; use int32 or int64", a)
	default:
		return 0, fmt.Errorf("unsupported kernel argument type %T", a)
	}
}

// putArg stores a at the start of dst (little endian, as on every CUDA
// host) and returns the words used.
func putArg(dst []uint64, a any) int {
	switch v := a.(type) {
	case DevicePtr:
		dst[0] = uint64(v)
	case uintptr:
		dst[0] = uint64(v)
	case int32:
		dst[0] = uint64(uint32(v))
	case uint32:
		dst[0] = uint64(v)
	case int64:
		dst[0] = uint64(v)
	case uint64:
		dst[0] = v
	case float32:
		dst[0] = uint64(math.Float32bits(v))
	case float64:
		dst[0] = math.Float64bits(v)
	case TensorMap:
		return copy(dst, v[:])
	case *TensorMap:
		return copy(dst, v[:])
	}
	return 1
}

// jitInputPTX is CU_JIT_INPUT_PTX.
const jitInputPTX = 1

// CompilePTX has the driver's JIT compile PTX for the current device and
// returns the cubin, so a kernel cache can keep machine code: loading a
// cubin takes about a millisecond where loading PTX runs ptxas, which can
// take a second for a large kernel. The JIT error log is in the error.
// The second result is the JIT's verbose information log (ptxas -v's
// lines, and its performance warnings such as C7509, wgmma serialized).
func CompilePTX(ptx []byte) ([]byte, string, error) {
	if len(ptx) == 0 {
		return nil, "", errors.New("cuda: CompilePTX: empty PTX")
	}
	img := make([]byte, len(ptx)+1)
	copy(img, ptx)
	j := newJITLogs()
	var state uintptr
	// The link state keeps the option arrays and the log buffers (the
	// driver writes the logs through vals until cuLinkDestroy): keep them
	// alive past the destroy below (defers run last first): a GC between
	// the calls could otherwise hand the driver freed memory (several
	// links at once crashed in cuLinkAddData on the H200 without it).
	defer runtime.KeepAlive(j)
	if err := ctxCall(fLinkCreate, uintptr(len(j.opts)), uintptr(unsafe.Pointer(&j.opts[0])), uintptr(unsafe.Pointer(&j.vals[0])), uintptr(unsafe.Pointer(&state))); err != nil {
		return nil, "", err
	}
	defer ctxCall(fLinkDestroy, state)
	name := []byte("fac.ptx\x00")
	err := ctxCall(fLinkAddData, state, jitInputPTX, uintptr(unsafe.Pointer(&img[0])), uintptr(len(img)),
		uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	if err == nil {
		var cubin unsafe.Pointer
		var size uintptr
		err = ctxCall(fLinkComplete, state, uintptr(unsafe.Pointer(&cubin)), uintptr(unsafe.Pointer(&size)))
		if err == nil {
			// The cubin belongs to the link state: copy it out before destroy.
			out := make([]byte, size)
			copy(out, unsafe.Slice((*byte)(cubin), size))
			return out, j.info(), nil
		}
	}
	return nil, "", j.withErrorLog(err)
}

// CompilesWhole reports whether ptx must be JIT-compiled as a whole
// module (LoadModule) rather than through the link step (CompilePTX): a
// kernel that moves registers between warpgroups (setmaxnreg), which
// ptxas ignores in the relocatable code the link step compiles (warning
// C7504).
func CompilesWhole(ptx []byte) bool { return bytes.Contains(ptx, []byte("setmaxnreg")) }

// JITLog compiles ptx as the runtime loads it (CompilesWhole: a whole
// module, loaded and unloaded again; otherwise CompilePTX) and returns the
// JIT's information log, for checking its performance warnings.
func JITLog(ptx []byte) (string, error) {
	if !CompilesWhole(ptx) {
		_, log, err := CompilePTX(ptx)
		return log, err
	}
	m, err := LoadModule(ptx)
	if err != nil {
		return "", err
	}
	return m.InfoLog, m.Unload()
}

// PerformanceWarnings returns the lines of a JIT log that report a
// performance loss (ptxas's C75xx codes: wgmma serialized, and the like).
func PerformanceWarnings(log string) []string {
	var w []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "(C75") {
			w = append(w, strings.TrimSpace(line))
		}
	}
	return w
}
