package fac

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/runtime/cuda"
	"github.com/fac-compiler/fac/tir"
)

// CUDA is an NVIDIA GPU opened through the driver API (no cgo). Kernels are
// compiled with llc on first use, through the on-disk kernel cache, and
// their modules stay loaded.
type CUDA struct {
	Dev   cuda.Device
	Ctx   *cuda.Context
	Arch  string
	Name  string
	Cache *cache.Cache // nil: no disk cache

	mu      sync.Mutex
	llc     *llc.Tool
	modules map[cache.Key]*loaded
	bundles []*bundle.Bundle
}

// AddBundle makes the kernels of an AOT bundle available: a kernel found in
// a bundle for this GPU's arch is loaded from it, with no llc needed.
func (d *CUDA) AddBundle(b *bundle.Bundle) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bundles = append(d.bundles, b)
}

// fromBundle finds f's kernel for this arch in the added bundles.
func (d *CUDA) fromBundle(f *Forward) *compiler.Artifact {
	kernel, mask, score, consts := f.bundleIdent()
	for _, b := range d.bundles {
		for _, k := range b.FindAll(kernel, mask, score, consts) {
			if k.Arch == d.Arch {
				return ArtifactOf(k)
			}
		}
	}
	return nil
}

type loaded struct {
	art *compiler.Artifact
	mod *cuda.Module
	fn  *cuda.Function
}

// OpenCUDA opens GPU ordinal with its primary context and the default
// kernel cache. On a machine without a driver it returns a clear error.
func OpenCUDA(ordinal int) (*CUDA, error) {
	dev, err := cuda.GetDevice(ordinal)
	if err != nil {
		return nil, err
	}
	ctx, err := cuda.PrimaryContext(dev)
	if err != nil {
		return nil, err
	}
	if err := ctx.SetCurrent(); err != nil {
		return nil, err
	}
	arch, err := dev.Arch()
	if err != nil {
		return nil, err
	}
	name, _ := dev.Name()
	c, err := cache.Open("")
	if err != nil {
		c = nil // a read-only home still runs, without the disk cache
	}
	return &CUDA{Dev: dev, Ctx: ctx, Arch: arch, Name: name, Cache: c, modules: map[cache.Key]*loaded{}}, nil
}

// kernel finds (in memory, then in bundles), or compiles through the
// disk cache, and loads f's kernel.
func (d *CUDA) kernel(f *Forward, t *compiler.Timings) (*loaded, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	req := f.req
	key := compiler.Key(req, d.Arch, nil)
	if l, ok := d.modules[key]; ok {
		return l, nil
	}
	if art := d.fromBundle(f); art != nil {
		return d.load(key, art)
	}
	if d.llc == nil {
		tool, err := llc.Find()
		if err != nil {
			return nil, err
		}
		d.llc = tool
	}
	var art *compiler.Artifact
	var err error
	if d.Cache != nil {
		art, err = compiler.CachedPTX(context.Background(), d.Cache, req, d.Arch, d.llc, t)
	} else {
		art, err = compiler.BuildPTX(context.Background(), req, d.Arch, d.llc, t)
	}
	if err != nil {
		return nil, err
	}
	return d.load(key, art)
}

// load puts an artifact (built here or read from a bundle) on the device.
// With a disk cache, the driver's JIT output (cubin) is cached too, keyed by
// the PTX, the GPU and the driver: loading a cubin takes about a
// millisecond, loading PTX runs ptxas inside the driver.
func (d *CUDA) load(key cache.Key, art *compiler.Artifact) (*loaded, error) {
	image := []byte(art.PTX)
	if d.Cache != nil {
		drv, _ := cuda.DriverVersion()
		ck := cache.NewKey("cubin", d.Name, d.Arch, strconv.Itoa(drv), bundle.Checksum(art.PTX))
		cubin, _, err := d.Cache.GetOrBuild(ck, "cubin "+art.Kernel+" "+d.Arch, func() ([]byte, error) {
			return cuda.CompilePTX(image)
		})
		if cubin == nil {
			return nil, fmt.Errorf("compiling kernel %s for %s: %w", art.Kernel, d.Name, err)
		}
		image = cubin
	}
	mod, err := cuda.LoadModule(image)
	if err != nil {
		return nil, fmt.Errorf("loading kernel %s: %w", art.Kernel, err)
	}
	fn, err := mod.Function(art.Kernel)
	if err != nil {
		return nil, err
	}
	if art.SharedBytes > 48*1024 {
		if err := fn.SetMaxDynamicSharedMemory(art.SharedBytes); err != nil {
			return nil, err
		}
	}
	l := &loaded{art: art, mod: mod, fn: fn}
	d.modules[key] = l
	return l, nil
}

// RunCUDA runs the forward kernel on the GPU with host tensors and returns
// O and LSE like RunCPU. Outputs are poisoned (NaN) before the launch.
func (f *Forward) RunCUDA(d *CUDA, in Inputs, sh Shape) (o, lse []float32, err error) {
	l, err := f.prepareCUDA(d, in, sh)
	if err != nil {
		return nil, nil, err
	}
	defer l.free()
	if err := l.run(cuda.Stream{}); err != nil {
		return nil, nil, err
	}
	if err := d.Ctx.Synchronize(); err != nil {
		return nil, nil, err
	}
	return l.results(f.dtype)
}

// BenchCUDA times the kernel with CUDA events: warmup launches, then reps
// timed launches; it returns each launch's time in milliseconds.
func (f *Forward) BenchCUDA(d *CUDA, in Inputs, sh Shape, warmup, reps int) ([]float64, error) {
	l, err := f.prepareCUDA(d, in, sh)
	if err != nil {
		return nil, err
	}
	defer l.free()
	s, err := cuda.NewStream()
	if err != nil {
		return nil, err
	}
	defer s.Destroy()
	for i := 0; i < warmup; i++ {
		if err := l.run(s); err != nil {
			return nil, err
		}
	}
	start, err := cuda.NewEvent()
	if err != nil {
		return nil, err
	}
	defer start.Destroy()
	end, err := cuda.NewEvent()
	if err != nil {
		return nil, err
	}
	defer end.Destroy()
	times := make([]float64, 0, reps)
	for i := 0; i < reps; i++ {
		if err := start.Record(s); err != nil {
			return nil, err
		}
		if err := l.run(s); err != nil {
			return nil, err
		}
		if err := end.Record(s); err != nil {
			return nil, err
		}
		if err := end.Synchronize(); err != nil {
			return nil, err
		}
		ms, err := cuda.ElapsedMs(start, end)
		if err != nil {
			return nil, err
		}
		times = append(times, float64(ms))
	}
	// The last run must have written everything: no poison (NaN) left.
	o, lse, err := l.results(f.dtype)
	if err != nil {
		return nil, err
	}
	for _, xs := range [][]float32{o, lse} {
		for i, x := range xs {
			if x != x {
				return nil, fmt.Errorf("benchmark run left NaN at element %d of an output", i)
			}
		}
	}
	return times, nil
}

// cudaLaunch is a kernel with its device buffers and arguments, ready to run.
type cudaLaunch struct {
	k           *loaded
	grid, block [3]uint32
	args        []any
	bufs        []cuda.DevicePtr
	o, lse      cuda.DevicePtr
	nO, nLSE    int
}

func (l *cudaLaunch) free() {
	for _, p := range l.bufs {
		cuda.MemFree(p)
	}
}

func (l *cudaLaunch) run(s cuda.Stream) error {
	return l.k.fn.Launch(l.grid, l.block, uint32(l.k.art.SharedBytes), s, l.args...)
}

// results copies O and LSE back.
func (l *cudaLaunch) results(e tir.Elem) (o, lse []float32, err error) {
	o, err = copyOut(l.o, l.nO, e)
	if err != nil {
		return nil, nil, err
	}
	lse = make([]float32, l.nLSE)
	if err := cuda.DtoH(lse, l.lse); err != nil {
		return nil, nil, err
	}
	return o, lse, nil
}

func (f *Forward) prepareCUDA(d *CUDA, in Inputs, sh Shape) (_ *cudaLaunch, err error) {
	if err := f.check(in, sh); err != nil {
		return nil, err
	}
	k, err := d.kernel(f, nil)
	if err != nil {
		return nil, err
	}
	l := &cudaLaunch{k: k, nO: sh.Batch * sh.Heads * sh.SeqQ * sh.Dim, nLSE: sh.Batch * sh.Heads * sh.SeqQ}
	defer func() {
		if err != nil {
			l.free()
		}
	}()
	alloc := func(bytes int) (cuda.DevicePtr, error) {
		p, err := cuda.MemAlloc(max(bytes, 4))
		if err == nil {
			l.bufs = append(l.bufs, p)
		}
		return p, err
	}
	ptrs := map[string]cuda.DevicePtr{}
	for name, xs := range map[string][]float32{"q": in.Q, "k": in.K, "v": in.V} {
		p, err := alloc(len(xs) * f.dtype.Bytes())
		if err != nil {
			return nil, err
		}
		if err := copyIn(p, xs, f.dtype); err != nil {
			return nil, err
		}
		ptrs[name] = p
	}
	bm, err := f.blockMaskCUDA(d, in, sh)
	if err != nil {
		return nil, err
	}
	for name, xs := range bmTensors(bm) {
		p, err := alloc(len(xs) * 4)
		if err != nil {
			return nil, err
		}
		if err := cuda.HtoD(p, xs); err != nil {
			return nil, err
		}
		ptrs[name] = p
	}
	if l.o, err = alloc(l.nO * f.dtype.Bytes()); err != nil {
		return nil, err
	}
	if l.lse, err = alloc(l.nLSE * 4); err != nil {
		return nil, err
	}
	ptrs["o"], ptrs["lse"] = l.o, l.lse
	// All-ones bytes are NaN in f32, f16 and bf16: unwritten outputs show.
	if err := cuda.MemsetD8(l.o, 0xff, l.nO*f.dtype.Bytes()); err != nil {
		return nil, err
	}
	if err := cuda.MemsetD8(l.lse, 0xff, l.nLSE*4); err != nil {
		return nil, err
	}
	scalars := f.scalars(in, sh)
	for k, v := range bmScalars(bm) {
		scalars[k] = v
	}
	// Aux tensors go to the device under their kernel parameter names.
	for _, p := range k.art.Params {
		if _, ok := scalars[p.Name]; ok || ptrs[p.Name] != 0 || isLen(p.Name) {
			continue
		}
		dp, n, err := uploadAux(p.Name, in.Aux, alloc)
		if err != nil {
			return nil, err
		}
		ptrs[p.Name] = dp
		scalars[p.Name+".len"] = n
	}
	if l.args, err = launchArgs(k.art, ptrs, scalars); err != nil {
		return nil, err
	}
	l.grid = [3]uint32{uint32((sh.SeqQ + f.blockM - 1) / f.blockM), uint32(sh.Batch * sh.Heads), 1}
	l.block = [3]uint32{uint32(k.art.Threads), 1, 1}
	return l, nil
}

// copyIn uploads float32 values converted to the element type e.
func copyIn(p cuda.DevicePtr, xs []float32, e tir.Elem) error {
	switch e {
	case tir.F32:
		return cuda.HtoD(p, xs)
	case tir.BF16:
		return cuda.HtoD(p, F32sToBF16(xs))
	case tir.F16:
		return cuda.HtoD(p, F32sToF16(xs))
	}
	return fmt.Errorf("unsupported element type %s", e)
}

func copyOut(p cuda.DevicePtr, n int, e tir.Elem) ([]float32, error) {
	if e == tir.F32 {
		out := make([]float32, n)
		return out, cuda.DtoH(out, p)
	}
	hs := make([]uint16, n)
	if err := cuda.DtoH(hs, p); err != nil {
		return nil, err
	}
	if e == tir.F16 {
		return F16s(hs), nil
	}
	return BF16s(hs), nil
}

// bundleIdent names f's kernel in a bundle: kernel, canonical mod strings
// and the compile-time constants of the request.
func (f *Forward) bundleIdent() (kernel, mask, score string, consts map[string]string) {
	mask, score = "none", "identity"
	if f.res.Mask != nil {
		mask = f.res.Mask.String()
	}
	if f.res.Score != nil {
		score = f.res.Score.String()
	}
	return f.kernel, mask, score, f.req.Consts
}

// BundleKernels compiles f and its block classifier (used for masks the
// analytic builder cannot bound) for arch and returns them as bundle entries.
func (f *Forward) BundleKernels(ctx context.Context, c *cache.Cache, arch string, tool *llc.Tool) ([]bundle.Kernel, error) {
	k, err := f.BundleKernel(ctx, c, arch, tool, nil)
	if err != nil {
		return nil, err
	}
	cls, err := f.classifier()
	if err != nil {
		return nil, err
	}
	kc, err := cls.BundleKernel(ctx, c, arch, tool, nil)
	if err != nil {
		return nil, err
	}
	return []bundle.Kernel{k, kc}, nil
}

// BundleKernel compiles f for arch (through the cache c, which may be nil)
// and returns it as a bundle entry.
func (f *Forward) BundleKernel(ctx context.Context, c *cache.Cache, arch string, tool *llc.Tool, t *compiler.Timings) (bundle.Kernel, error) {
	var art *compiler.Artifact
	var err error
	if c != nil {
		art, err = compiler.CachedPTX(ctx, c, f.req, arch, tool, t)
	} else {
		art, err = compiler.BuildPTX(ctx, f.req, arch, tool, t)
	}
	if err != nil {
		return bundle.Kernel{}, err
	}
	kernel, mask, score, consts := f.bundleIdent()
	k := bundle.Kernel{Name: art.Kernel, Kernel: kernel, Mask: mask, Score: score, Arch: arch, Consts: consts,
		Block: [3]uint32{uint32(art.Threads), 1, 1}, SharedBytes: uint32(art.SharedBytes), PTX: art.PTX}
	for _, p := range art.Params {
		k.Params = append(k.Params, bundle.Param{Name: p.Name, Type: string(p.Kind)})
	}
	return k, nil
}

// ArtifactOf converts a bundle entry to an artifact the runtime can load.
func ArtifactOf(k *bundle.Kernel) *compiler.Artifact {
	a := &compiler.Artifact{Kernel: k.Name, Arch: k.Arch, PTX: k.PTX, Threads: int(k.Block[0]), SharedBytes: int(k.SharedBytes)}
	for _, p := range k.Params {
		a.Params = append(a.Params, codegen.Param{Name: p.Name, Kind: codegen.ParamKind(p.Type)})
	}
	return a
}

// CacheHitTime measures the kernel cache's hit path on this GPU for one
// artifact: the entry is stored in a fresh cache in dir, loaded once (which
// fills the cubin entry), then timed from disk entry to loaded function.
func (d *CUDA) CacheHitTime(dir string, art *compiler.Artifact) (first, hit time.Duration, err error) {
	c, err := cache.Open(dir)
	if err != nil {
		return 0, 0, err
	}
	payload, err := art.Encode()
	if err != nil {
		return 0, 0, err
	}
	key := cache.NewKey("artifact", art.Arch, art.Kernel, bundle.Checksum(art.PTX))
	if err := c.Put(key, "timing "+art.Kernel, payload); err != nil {
		return 0, 0, err
	}
	probe := &CUDA{Dev: d.Dev, Ctx: d.Ctx, Arch: d.Arch, Name: d.Name, Cache: c, modules: map[cache.Key]*loaded{}}
	for i := 0; i < 2; i++ {
		t0 := time.Now()
		b, status, err := c.Get(key)
		if err != nil || status != cache.Hit {
			return 0, 0, fmt.Errorf("cache entry: %v (%v)", err, status)
		}
		a, err := compiler.DecodeArtifact(b)
		if err != nil {
			return 0, 0, err
		}
		l, err := probe.load(key, a)
		if err != nil {
			return 0, 0, err
		}
		took := time.Since(t0)
		l.mod.Unload()
		delete(probe.modules, key)
		if i == 0 {
			first = took
		} else {
			hit = took
		}
	}
	return first, hit, nil
}

// launchArgs orders a kernel's arguments by its parameters, by name.
func launchArgs(art *compiler.Artifact, ptrs map[string]cuda.DevicePtr, scalars map[string]any) ([]any, error) {
	args := make([]any, 0, len(art.Params))
	for _, p := range art.Params {
		if ptr, ok := ptrs[p.Name]; ok {
			args = append(args, ptr)
			continue
		}
		v, ok := scalars[p.Name]
		if !ok {
			return nil, fmt.Errorf("kernel %s: no value for parameter %s", art.Kernel, p.Name)
		}
		switch p.Kind {
		case codegen.ParamI32:
			args = append(args, int32(v.(int)))
		case codegen.ParamF32:
			args = append(args, v.(float32))
		default:
			return nil, fmt.Errorf("kernel %s: parameter %s has unexpected kind %s", art.Kernel, p.Name, p.Kind)
		}
	}
	return args, nil
}

// DeviceTensors are device buffers for LaunchCUDA, as raw pointers (a
// gorgonia.org/cu DevicePtr converts with uintptr(p)). Q and O are
// [B, H, SeqQ, Dim], K and V [B, KVHeads, SeqK, Dim], in the kernel's DType,
// with the last dimension contiguous and the other strides (in elements)
// given as {batch, head, seq}; a zero stride array means contiguous. LSE is
// [B, H, SeqQ] f32, contiguous. Aux holds the mods' aux tensors (int32 or
// f32 elements) by name, e.g. "doc".
type DeviceTensors struct {
	Q, K, V, O, LSE                    uintptr
	QStride, KStride, VStride, OStride [3]int
	Aux                                map[string]DeviceAux
	Scale                              float32 // 0 means 1/sqrt(Dim)
	// BlockMask is the block mask on the device (see UploadBlockMask); nil
	// builds one on the host and uploads it for this call only.
	BlockMask *DeviceBlockMask
}

// DeviceBlockMask is a block mask's kernel tensors on the device.
type DeviceBlockMask struct {
	Mask *blockmask.BlockMask
	ptrs map[string]cuda.DevicePtr
}

// UploadBlockMask copies a block mask to the GPU once, for many launches.
func (d *CUDA) UploadBlockMask(bm *blockmask.BlockMask) (*DeviceBlockMask, error) {
	if err := bm.Validate(); err != nil {
		return nil, err
	}
	dm := &DeviceBlockMask{Mask: bm, ptrs: map[string]cuda.DevicePtr{}}
	for name, xs := range bmTensors(bm) {
		p, err := cuda.MemAlloc(max(len(xs), 1) * 4)
		if err != nil {
			dm.Free()
			return nil, err
		}
		dm.ptrs[name] = p
		if err := cuda.HtoD(p, xs); err != nil {
			dm.Free()
			return nil, err
		}
	}
	return dm, nil
}

// Free releases the device copy.
func (dm *DeviceBlockMask) Free() {
	for _, p := range dm.ptrs {
		cuda.MemFree(p)
	}
	dm.ptrs = nil
}

// DeviceAux is an aux tensor on the device.
type DeviceAux struct {
	Ptr uintptr
	Len int
}

// LaunchCUDA runs the forward kernel on device buffers, asynchronously on
// stream s (the zero Stream is the default stream). Nothing is copied.
func (f *Forward) LaunchCUDA(d *CUDA, t DeviceTensors, sh Shape, s cuda.Stream) error {
	if err := sh.Validate(); err != nil {
		return err
	}
	if sh.Dim != f.dim {
		return fmt.Errorf("shape: head dim %d, but the kernel was compiled for %d", sh.Dim, f.dim)
	}
	for name, p := range map[string]uintptr{"q": t.Q, "k": t.K, "v": t.V, "o": t.O, "lse": t.LSE} {
		if p == 0 {
			return fmt.Errorf("LaunchCUDA: %s is a null device pointer", name)
		}
	}
	k, err := d.kernel(f, nil)
	if err != nil {
		return err
	}
	scalars := f.scalars(Inputs{Scale: t.Scale}, sh)
	for _, st := range []struct {
		name string
		s    [3]int
		seq  int
		rows int
	}{{"q", t.QStride, sh.SeqQ, sh.Heads}, {"k", t.KStride, sh.SeqK, sh.kvHeads()}, {"v", t.VStride, sh.SeqK, sh.kvHeads()}, {"o", t.OStride, sh.SeqQ, sh.Heads}} {
		if st.s == [3]int{} {
			continue
		}
		for i, v := range st.s {
			if v <= 0 {
				return fmt.Errorf("LaunchCUDA: %s stride %d is %d; strides must be positive (the last dimension is contiguous)", st.name, i, v)
			}
		}
		if st.s[2] < sh.Dim {
			return fmt.Errorf("LaunchCUDA: %s seq stride %d is smaller than the head dim %d: rows overlap", st.name, st.s[2], sh.Dim)
		}
		for i, suffix := range []string{"b", "h", "s"} {
			scalars["stride_"+st.name+suffix] = st.s[i]
		}
	}
	ptrs := map[string]cuda.DevicePtr{"q": cuda.DevicePtr(t.Q), "k": cuda.DevicePtr(t.K), "v": cuda.DevicePtr(t.V),
		"o": cuda.DevicePtr(t.O), "lse": cuda.DevicePtr(t.LSE)}
	dm := t.BlockMask
	if dm == nil {
		aux, err := f.hostAux(t.Aux)
		if err != nil {
			return err
		}
		bm, err := f.blockMaskCUDA(d, Inputs{Aux: aux}, sh)
		if err != nil {
			return err
		}
		if dm, err = d.UploadBlockMask(bm); err != nil {
			return err
		}
		// The launch is asynchronous: free after the stream is done with it.
		defer func() { s.Synchronize(); dm.Free() }()
	} else if _, err := f.blockMask(Inputs{BlockMask: dm.Mask}, sh); err != nil {
		return err
	}
	for name, p := range dm.ptrs {
		ptrs[name] = p
	}
	for k, v := range bmScalars(dm.Mask) {
		scalars[k] = v
	}
	for _, p := range k.art.Params {
		if _, ok := scalars[p.Name]; ok || ptrs[p.Name] != 0 || isLen(p.Name) {
			continue
		}
		short := p.Name
		if i := strings.IndexByte(short, '.'); i >= 0 {
			short = short[i+1:]
		}
		a, ok := t.Aux[p.Name]
		if !ok {
			a, ok = t.Aux[short]
		}
		if !ok || a.Ptr == 0 {
			return fmt.Errorf("LaunchCUDA: missing aux tensor %q", short)
		}
		ptrs[p.Name] = cuda.DevicePtr(a.Ptr)
		scalars[p.Name+".len"] = a.Len
	}
	args, err := launchArgs(k.art, ptrs, scalars)
	if err != nil {
		return err
	}
	grid := [3]uint32{uint32((sh.SeqQ + f.blockM - 1) / f.blockM), uint32(sh.Batch * sh.Heads), 1}
	return k.fn.Launch(grid, [3]uint32{uint32(k.art.Threads), 1, 1}, uint32(k.art.SharedBytes), s, args...)
}

// blockMaskCUDA is blockMask for a GPU call: given, else analytic where the
// mask can be bounded, else evaluated on the GPU.
func (f *Forward) blockMaskCUDA(d *CUDA, in Inputs, sh Shape) (*blockmask.BlockMask, error) {
	if in.BlockMask != nil {
		return f.blockMask(in, sh)
	}
	bm, err := f.analytic(sh)
	if err == nil {
		return bm, nil
	}
	if !errors.Is(err, blockmask.ErrNotAnalyzable) {
		return nil, err
	}
	return f.BuildBlockMaskCUDA(d, sh, in.Aux)
}

// hostAux copies the mask's aux tensors back from the device, for building
// a block mask (the slow path of LaunchCUDA without a block mask).
func (f *Forward) hostAux(aux map[string]DeviceAux) (map[string]any, error) {
	out := map[string]any{}
	if f.res.Mask == nil {
		return out, nil
	}
	for _, p := range f.res.Mask.AuxParams() {
		a, ok := aux[p.Name]
		if !ok {
			a, ok = aux["mask."+p.Name]
		}
		if !ok {
			return nil, fmt.Errorf("LaunchCUDA: missing aux tensor %q", p.Name)
		}
		if p.Elem == tir.F32 {
			xs := make([]float32, a.Len)
			if err := cuda.DtoH(xs, cuda.DevicePtr(a.Ptr)); err != nil {
				return nil, err
			}
			out[p.Name] = xs
			continue
		}
		xs := make([]int32, a.Len)
		if err := cuda.DtoH(xs, cuda.DevicePtr(a.Ptr)); err != nil {
			return nil, err
		}
		out[p.Name] = xs
	}
	return out, nil
}

// BuildBlockMaskCUDA classifies the mask's blocks on the GPU with the
// stdlib's block_classify kernel (the mask inlined, one program per q
// block), then makes the lists on the host. It is the builder for masks the
// analytic classifier cannot bound, such as document masks; shared reports
// whether the mask ignores b and h (one mask for all).
func (f *Forward) BuildBlockMaskCUDA(d *CUDA, sh Shape, aux map[string]any) (*blockmask.BlockMask, error) {
	usesB, usesH, err := blockmask.UsesBH(f.res.Program, f.res.Mask, sh.SeqQ, sh.SeqK)
	if err != nil {
		return nil, err
	}
	b, h := 1, 1
	if usesB {
		b = sh.Batch
	}
	if usesH {
		h = sh.Heads
	}
	cls, err := f.classifier()
	if err != nil {
		return nil, err
	}
	k, err := d.kernel(cls, nil)
	if err != nil {
		return nil, err
	}
	nq, nk := (sh.SeqQ+f.sparseQ-1)/f.sparseQ, (sh.SeqK+f.sparseK-1)/f.sparseK
	out, err := cuda.MemAlloc(b * h * nq * nk * 4)
	if err != nil {
		return nil, err
	}
	defer cuda.MemFree(out)
	ptrs := map[string]cuda.DevicePtr{"classes": out}
	scalars := map[string]any{"heads": h, "num_q": nq, "num_k": nk, "seqlen_q": sh.SeqQ, "seqlen_k": sh.SeqK}
	var bufs []cuda.DevicePtr
	defer func() {
		for _, p := range bufs {
			cuda.MemFree(p)
		}
	}()
	for _, p := range k.art.Params {
		if _, ok := scalars[p.Name]; ok || ptrs[p.Name] != 0 || isLen(p.Name) {
			continue
		}
		dp, n, err := uploadAux(p.Name, aux, func(bytes int) (cuda.DevicePtr, error) {
			p, err := cuda.MemAlloc(max(bytes, 4))
			if err == nil {
				bufs = append(bufs, p)
			}
			return p, err
		})
		if err != nil {
			return nil, err
		}
		ptrs[p.Name] = dp
		scalars[p.Name+".len"] = n
	}
	args, err := launchArgs(k.art, ptrs, scalars)
	if err != nil {
		return nil, err
	}
	if err := k.fn.Launch([3]uint32{uint32(nq), uint32(b * h), 1}, [3]uint32{uint32(k.art.Threads), 1, 1}, uint32(k.art.SharedBytes), cuda.Stream{}, args...); err != nil {
		return nil, err
	}
	classes := make([]int32, b*h*nq*nk)
	if err := cuda.DtoH(classes, out); err != nil {
		return nil, err
	}
	g, err := blockmask.NewGrid(b, h, sh.SeqQ, sh.SeqK, f.sparseQ, f.sparseK)
	if err != nil {
		return nil, err
	}
	for i, c := range classes {
		if c < int32(blockmask.Empty) || c > int32(blockmask.Full) {
			return nil, fmt.Errorf("internal error: block classifier wrote class %d at %d", c, i)
		}
		g.Classes[i] = blockmask.Class(c)
	}
	return blockmask.FromClasses(g)
}

// classifier is the block_classify kernel for f's mask and block sizes.
func (f *Forward) classifier() (*Forward, error) {
	f.clsOnce.Do(func() {
		req := compiler.Request{Sources: f.req.Sources, Kernel: "block_classify", Mask: f.req.Mask,
			Consts: map[string]string{"BLOCK_Q": strconv.Itoa(f.sparseQ), "BLOCK_K": strconv.Itoa(f.sparseK)}}
		res, err := compiler.Compile(req)
		if err != nil {
			f.clsErr = err
			return
		}
		f.cls = &Forward{req: req, res: res, kernel: "block_classify"}
	})
	return f.cls, f.clsErr
}

// uploadAux copies the aux tensor for kernel parameter param to memory from
// alloc and returns it with its length.
func uploadAux(param string, aux map[string]any, alloc func(bytes int) (cuda.DevicePtr, error)) (cuda.DevicePtr, int, error) {
	buf, n, err := auxArg(param, aux)
	if err != nil {
		return 0, 0, err
	}
	dp, err := alloc(n * 4)
	if err != nil {
		return 0, 0, err
	}
	if buf.Elem == tir.I32 {
		err = cuda.HtoD(dp, buf.I32())
	} else {
		err = cuda.HtoD(dp, buf.F32())
	}
	return dp, n, err
}
