package gpu

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// Prepared is a call with its buffers on the device, ready to launch (many
// times, for a benchmark).
type Prepared struct {
	k     *Kernel
	call  *launch.Call
	run   *launch.Call     // call as launched (launchArgs)
	ptrs  []cuda.DevicePtr // by call buffer
	owned []cuda.DevicePtr
	args  []any
	sync  bool // Config.BenchSync
}

// Prepare uploads host (the contents of every input, block-mask and aux
// buffer by parameter name: []float32 converted to the buffer's element
// type, or []int32; for aux tensors, anything launch.HostData converts) and
// allocates the outputs, poisoned so that an element the kernel does not
// write reads as NaN.
func (d *Device) Prepare(k *Kernel, call *launch.Call, host map[string]any) (_ *Prepared, err error) {
	p := &Prepared{k: k, call: call, ptrs: make([]cuda.DevicePtr, len(call.Buffers)), sync: d.cfg.BenchSync}
	defer func() {
		if err != nil {
			p.Free()
		}
	}()
	for i, b := range call.Buffers {
		size, err := elemBytes(b.Elem)
		if err != nil {
			return nil, fmt.Errorf("kernel %s: buffer %s: %w", call.Kernel, b.Name, err)
		}
		ptr, err := cuda.MemAlloc(max(b.Len*size, 4))
		if err != nil {
			return nil, err
		}
		p.owned = append(p.owned, ptr)
		p.ptrs[i] = ptr
		if b.Role == launch.Output {
			// All-ones bytes are NaN in f32, f16 and bf16.
			if err := cuda.MemsetD8(ptr, 0xff, b.Len*size); err != nil {
				return nil, err
			}
			continue
		}
		if err := upload(ptr, b, host[b.Name]); err != nil {
			return nil, fmt.Errorf("kernel %s: %w", call.Kernel, err)
		}
	}
	if p.run, p.args, err = launchArgs(k, call, p.ptrs); err != nil {
		return nil, err
	}
	return p, nil
}

// Run launches the prepared call on stream s.
func (p *Prepared) Run(s cuda.Stream) error { return p.k.launch(p.run, p.args, s) }

// Output copies an output buffer back as float32 (floats) or int32 values.
func (p *Prepared) Output(name string) (any, error) {
	for i, b := range p.call.Buffers {
		if b.Name == name {
			return download(p.ptrs[i], b)
		}
	}
	return nil, fmt.Errorf("kernel %s has no buffer %s", p.call.Kernel, name)
}

// Free releases the buffers Prepare allocated.
func (p *Prepared) Free() {
	for _, ptr := range p.owned {
		cuda.MemFree(ptr)
	}
	p.owned = nil
}

// Execute runs a call on host data and returns every output by name
// ([]float32 or []int32), after the device finished.
func (d *Device) Execute(k *Kernel, call *launch.Call, host map[string]any) (map[string]any, error) {
	p, err := d.Prepare(k, call, host)
	if err != nil {
		return nil, err
	}
	defer p.Free()
	if err := p.Run(cuda.Stream{}); err != nil {
		return nil, err
	}
	if err := d.Ctx.Synchronize(); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, b := range call.Buffers {
		if b.Role != launch.Output {
			continue
		}
		if out[b.Name], err = p.Output(b.Name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Launch runs a call on device buffers, by parameter name, asynchronously
// on stream s. Nothing is copied.
func (d *Device) Launch(k *Kernel, call *launch.Call, ptrs map[string]uintptr, s cuda.Stream) error {
	dp := make([]cuda.DevicePtr, len(call.Buffers))
	for i, b := range call.Buffers {
		p := ptrs[b.Name]
		if p == 0 {
			return fmt.Errorf("kernel %s: %s is a null device pointer", call.Kernel, b.Name)
		}
		dp[i] = cuda.DevicePtr(p)
	}
	// Tensor maps hold the addresses, so they are encoded per call.
	run, a, err := launchArgs(k, call, dp)
	if err != nil {
		return err
	}
	return k.launch(run, a, s)
}

// launch launches call, as launchArgs made it, with its driver arguments.
func (k *Kernel) launch(call *launch.Call, args []any, s cuda.Stream) error {
	g := call.Grid
	if g[0] == 0 || g[1] == 0 || g[2] == 0 {
		return nil // nothing to do (an empty problem)
	}
	launch := k.fn.Launch
	if k.dependentLaunch() {
		launch = k.fn.LaunchDependent
	}
	return launch([3]uint32{uint32(g[0]), uint32(g[1]), uint32(g[2])}, [3]uint32{uint32(k.Art.Threads), 1, 1},
		uint32(k.Art.SharedBytes), s, args...)
}

// dependentLaunch reports whether k is launched as a programmatic
// dependent launch: it was compiled with pdl (its programs wait for the
// previous kernel's writes first: codegen/sm90/pdl.go), for sm_90 or newer.
func (k *Kernel) dependentLaunch() bool {
	if k.Art.Ident.Consts["pdl"] != "true" {
		return false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(k.Art.Ident.Arch, "sm_"), "a"))
	return err == nil && n >= 90
}

// launchArgs is call (bound to k's parameters, or to its tile-IR
// function's, which lack the tensor maps) as k launches it, and its driver
// arguments with its buffers at ptrs: device pointers, scalars and encoded
// tensor maps. It is where every launch's grid is settled: a persistent
// kernel runs on persistentPrograms programs (call itself is not changed).
func launchArgs(k *Kernel, call *launch.Call, ptrs []cuda.DevicePtr) (*launch.Call, []any, error) {
	call, err := call.WithTensorMaps(k.Art.Params)
	if err != nil {
		return nil, nil, err
	}
	if call.Persistent() {
		n, err := k.persistentPrograms()
		if err != nil {
			return nil, nil, fmt.Errorf("kernel %s: %w", call.Kernel, err)
		}
		call = call.Clone()
		call.Persist(n)
	}
	out := make([]any, len(call.Args))
	for i, a := range call.Args {
		tm, isMap := a.Value.(launch.TensorMap)
		_, isOrder := a.Value.(launch.TileOrder)
		switch {
		case isOrder:
			if out[i], err = k.tileOrder(call.Order); err != nil {
				return nil, nil, fmt.Errorf("kernel %s: %w", call.Kernel, err)
			}
		case a.Buffer >= 0:
			out[i] = ptrs[a.Buffer]
		case isMap:
			if out[i], err = encodeTensorMap(call, tm, ptrs[tm.Buffer]); err != nil {
				return nil, nil, err
			}
		default:
			out[i] = a.Value
		}
	}
	return call, out, nil
}

// persistentPrograms is the number of programs a persistent launch of k
// runs on (at most, as launch.Call.Persist caps it by the tiles): as many
// CTAs as the GPU holds at once, SMs × CTAs of k per SM by the driver's
// occupancy calculator (k's threads, registers and dynamic shared memory),
// so that every program starts at once and loops over its share of the
// tiles; one per SM if the calculator says none fits. Known once per
// kernel (or set by Config.PersistentPrograms, for measurements).
func (k *Kernel) persistentPrograms() (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.programs > 0 {
		return k.programs, nil
	}
	sms, err := k.dev.Attribute(cuda.DevAttrMultiprocessorCount)
	if err != nil {
		return 0, err
	}
	perSM, err := k.fn.MaxActiveBlocksPerSM(k.Art.Threads, k.Art.SharedBytes)
	if err != nil {
		return 0, err
	}
	k.programs = max(sms, 1) * max(perSM, 1)
	return k.programs, nil
}

// tmaSwizzles are the driver's swizzle modes by span in bytes.
var tmaSwizzles = map[int]cuda.TensorSwizzle{32: cuda.Swizzle32B, 64: cuda.Swizzle64B, 128: cuda.Swizzle128B}

// encodeTensorMap builds the CUtensorMap of tm over the tensor at addr.
func encodeTensorMap(call *launch.Call, tm launch.TensorMap, addr cuda.DevicePtr) (*cuda.TensorMap, error) {
	tensor := call.Buffers[tm.Buffer].Name
	// The driver's requirements, checked here to say what to do instead:
	// the cp.async path takes any layout.
	bad := ""
	if addr%16 != 0 {
		bad = fmt.Sprintf("address %#x", uint64(addr))
	}
	for i, st := range tm.Strides {
		if bad == "" && st%16 != 0 {
			bad = fmt.Sprintf("stride %d = %d bytes", i+1, st)
		}
	}
	if bad != "" {
		return nil, fmt.Errorf("kernel %s: tensor %s: TMA needs a 16-byte aligned address and strides that are multiples of 16 bytes (%s); compile with the target option tma=off (fac --target-opt tma=off, Options.Target.NoTMA, or FAC_TMA=0) for the cp.async path, which takes any layout", call.Kernel, tensor, bad)
	}
	dt := cuda.TensorBFloat16
	switch tm.Elem {
	case "bf16":
	case "f16":
		dt = cuda.TensorFloat16
	case "f32":
		dt = cuda.TensorFloat32
	default:
		return nil, fmt.Errorf("kernel %s: tensor %s: no tensor map of %s", call.Kernel, tensor, tm.Elem)
	}
	sw, ok := tmaSwizzles[tm.Swizzle]
	if !ok {
		return nil, fmt.Errorf("kernel %s: tensor %s: no %d-byte swizzle", call.Kernel, tensor, tm.Swizzle)
	}
	m, err := cuda.TiledTensorMap{DataType: dt, Addr: addr, Dims: tm.Dims, Strides: tm.Strides, Box: tm.Box,
		Swizzle: sw, L2Promotion: cuda.L2Promotion256B}.Encode()
	if err != nil {
		return nil, fmt.Errorf("kernel %s: tensor map of %s: %w", call.Kernel, tensor, err)
	}
	return m, nil
}

func elemBytes(e string) (int, error) {
	switch e {
	case "f32", "i32":
		return 4, nil
	case "bf16", "f16":
		return 2, nil
	case "i64":
		return 8, nil
	case "i1", "i8", "u8":
		return 1, nil
	}
	return 0, fmt.Errorf("unsupported element type %q", e)
}

// upload copies a host value to ptr in the buffer's element type. Aux
// tensors take any data launch.HostData converts.
func upload(ptr cuda.DevicePtr, b launch.Buffer, v any) error {
	if b.Role == launch.Aux && v != nil {
		data, _, err := launch.HostData(b.Elem, v)
		if err != nil {
			return fmt.Errorf("aux tensor %s: %w", b.Name, err)
		}
		return uploadAux(ptr, b, data)
	}
	n := 0
	var err error
	switch v := v.(type) {
	case []float32:
		n = len(v)
		if n >= b.Len {
			switch b.Elem {
			case "f32":
				err = cuda.HtoD(ptr, v[:b.Len])
			case "bf16":
				err = cuda.HtoD(ptr, narrow(v[:b.Len], half.F32ToBF16))
			case "f16":
				err = cuda.HtoD(ptr, narrow(v[:b.Len], half.F32ToF16))
			default:
				return fmt.Errorf("%s is %s, got float32 data", b.Name, b.Elem)
			}
		}
	case []int32:
		n = len(v)
		if b.Elem != "i32" {
			return fmt.Errorf("%s is %s, got int32 data", b.Name, b.Elem)
		}
		if n >= b.Len && b.Len > 0 {
			err = cuda.HtoD(ptr, v[:b.Len])
		}
	case nil:
		return fmt.Errorf("no data for %s", b.Name)
	default:
		return fmt.Errorf("%s: unsupported host type %T", b.Name, v)
	}
	if n < b.Len {
		return fmt.Errorf("%s has %d elements, the call needs %d", b.Name, n, b.Len)
	}
	return err
}

// uploadAux copies an aux tensor converted by launch.HostData: its first
// b.Len elements, in the element type's bytes (bool as one byte 0 or 1).
func uploadAux(ptr cuda.DevicePtr, b launch.Buffer, data any) error {
	n, err := launch.HostLen(data)
	if err != nil {
		return err
	}
	if n < b.Len {
		return fmt.Errorf("%s has %d elements, the call needs %d", b.Name, n, b.Len)
	}
	if b.Len == 0 {
		return nil
	}
	switch x := data.(type) {
	case []bool:
		bs := make([]uint8, b.Len)
		for i, v := range x[:b.Len] {
			if v {
				bs[i] = 1
			}
		}
		return cuda.HtoD(ptr, bs)
	case []int32:
		return cuda.HtoD(ptr, x[:b.Len])
	case []int64:
		return cuda.HtoD(ptr, x[:b.Len])
	case []uint16:
		return cuda.HtoD(ptr, x[:b.Len])
	case []float32:
		return cuda.HtoD(ptr, x[:b.Len])
	}
	return fmt.Errorf("%s: unsupported host type %T", b.Name, data)
}

func download(ptr cuda.DevicePtr, b launch.Buffer) (any, error) {
	switch b.Elem {
	case "f32":
		out := make([]float32, b.Len)
		return out, cuda.DtoH(out, ptr)
	case "i32":
		out := make([]int32, b.Len)
		return out, cuda.DtoH(out, ptr)
	case "bf16", "f16":
		hs := make([]uint16, b.Len)
		if err := cuda.DtoH(hs, ptr); err != nil {
			return nil, err
		}
		f := half.BF16ToF32
		if b.Elem == "f16" {
			f = half.F16ToF32
		}
		out := make([]float32, len(hs))
		for i, h := range hs {
			out[i] = f(h)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: cannot read back %s", b.Name, b.Elem)
}

func narrow(xs []float32, f func(float32) uint16) []uint16 {
	out := make([]uint16, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}
