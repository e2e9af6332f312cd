package flash

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cuda"
	"github.com/fac-compiler/fac/runtime/gpu"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// CUDA is an NVIDIA GPU opened through the driver API (no cgo); see
// runtime/gpu. Kernels are compiled with llc on first use (or loaded from
// added AOT bundles), through the on-disk kernel cache.
type CUDA struct{ *gpu.Device }

// OpenCUDA opens GPU ordinal with its primary context and the kernel
// cache, set up as the environment says (Env: FAC_ARCH, FAC_CACHE_DIR,
// FAC_LLC, ...). On a machine without a driver it returns a clear error.
func OpenCUDA(ordinal int) (*CUDA, error) {
	env, err := Env()
	if err != nil {
		return nil, err
	}
	d, err := gpu.Open(ordinal, env.GPU)
	if err != nil {
		return nil, err
	}
	return &CUDA{d}, nil
}

// prepare builds the block mask, binds and uploads a host call: one
// kernel, or the split-KV pair (Plan).
func (f *Forward) prepare(ctx context.Context, d *CUDA, in Inputs, sh Shape) (preparedCall, error) {
	if err := sh.Validate(); err != nil {
		return nil, err
	}
	f, err := f.tuned(d.Arch)
	if err != nil {
		return nil, err
	}
	if err := f.checkInputs(in, sh); err != nil {
		return nil, err
	}
	plan, err := f.planCUDA(ctx, d, sh)
	if err != nil {
		return nil, err
	}
	bm, err := f.blockMaskCUDA(d, in, sh)
	if err != nil {
		return nil, err
	}
	// The span form keeps the same pairs: f's block mask serves it. A
	// span kernel that cannot be had (in no bundle, no llc) leaves f.
	if !plan.SplitKV {
		if g, gin := f.withSpans(in, sh); g != f {
			if g, err = g.tuned(d.Arch); err == nil {
				if _, err = d.Kernel(ctx, g.res, nil); err == nil {
					f, in = g, gin
				}
			}
		}
	}
	aux, err := auxLens(in.Aux)
	if err != nil {
		return nil, err
	}
	c, err := f.bindPlan(plan, sh, in.Scale, bm, aux, in.Scalars, nil)
	if err != nil {
		return nil, err
	}
	return prepareCUDA(ctx, d, c.ks, c.calls, f.hostData(in, c), attention.Forward.Results)
}

// RunCUDA runs the forward kernel on the GPU with host tensors and returns
// O and LSE like RunCPU. Outputs are poisoned (NaN) before the launch.
func (f *Forward) RunCUDA(d *CUDA, in Inputs, sh Shape) (o, lse []float32, err error) {
	return f.RunCUDAContext(context.Background(), d, in, sh)
}

// RunCUDAContext is RunCUDA whose compile (llc, when the kernel is in no
// bundle or cache) stops once ctx is done.
func (f *Forward) RunCUDAContext(ctx context.Context, d *CUDA, in Inputs, sh Shape) (o, lse []float32, err error) {
	p, err := f.prepare(ctx, d, in, sh)
	if err != nil {
		return nil, nil, err
	}
	return runForOutputs(d, p)
}

// runForOutputs runs an uploaded forward call once, frees it, and returns
// its O and LSE.
func runForOutputs(d *CUDA, p preparedCall) (o, lse []float32, err error) {
	out, err := runFor(d, p, "o", "lse")
	if err != nil {
		return nil, nil, err
	}
	return out[0], out[1], nil
}

// runFor runs p once, waits for it, copies back the float buffers names
// and frees p.
func runFor(d *CUDA, p preparedCall, names ...string) ([][]float32, error) {
	defer p.Free()
	if err := p.Run(cuda.Stream{}); err != nil {
		return nil, err
	}
	if err := d.Ctx.Synchronize(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(names))
	for i, name := range names {
		v, err := p.Output(name)
		if err != nil {
			return nil, err
		}
		out[i] = v.([]float32)
	}
	return out, nil
}

// BenchCUDA times the kernel with CUDA events: warmup launches, then reps
// timed launches; it returns each launch's time in milliseconds.
func (f *Forward) BenchCUDA(d *CUDA, in Inputs, sh Shape, warmup, reps int) ([]float64, error) {
	p, err := f.prepare(context.Background(), d, in, sh)
	if err != nil {
		return nil, err
	}
	defer p.Free()
	return p.Bench(warmup, reps)
}

// DeviceTensors are device buffers for LaunchCUDA, as raw pointers (a
// gorgonia.org/cu DevicePtr converts with uintptr(p)). Q is [B, H, SeqQ,
// Dim], O [B, H, SeqQ, DimV], K [B, KVHeads, SeqK, Dim] and V [B, KVHeads,
// SeqK, DimV] (Shape.VDim), in the kernel's DType,
// with the last dimension contiguous and the other strides (in elements)
// given as {batch, head, seq}; a zero stride array means contiguous. LSE is
// [B, H, SeqQ] f32, contiguous. Aux holds the mods' aux tensors by name,
// e.g. "doc", in their declared element types (bool as one byte, f16 and
// bf16 as two), row-major in their declared shapes. Scalars holds the
// mods' run-time parameters, as Inputs.Scalars.
type DeviceTensors struct {
	Q, K, V, O, LSE                    uintptr
	QStride, KStride, VStride, OStride [3]int
	Aux                                map[string]DeviceAux
	Scalars                            map[string]any
	Scale                              float32 // 0 means 1/sqrt(Dim)
	// BlockMask is the block mask on the device (see UploadBlockMask); nil
	// builds one on the host and uploads it for this call only.
	BlockMask *DeviceBlockMask
	// Workspace holds split-KV's partial outputs (NewWorkspace); nil
	// allocates them for this call only, when its Plan splits.
	Workspace *ForwardWorkspace
}

// DeviceAux is an aux tensor on the device.
type DeviceAux struct {
	Ptr uintptr
	Len int
}

// DeviceBlockMask is a block mask's kernel tensors on the device.
type DeviceBlockMask struct {
	Mask *blockmask.BlockMask
	ptrs map[string]uintptr // by kernel parameter name
}

// UploadBlockMask copies a block mask to the GPU once, for many launches.
func (d *CUDA) UploadBlockMask(bm *blockmask.BlockMask) (*DeviceBlockMask, error) {
	if err := bm.Validate(); err != nil {
		return nil, err
	}
	ptrs, err := uploadI32s(launch.KVBlockMask.Tensors(bm))
	if err != nil {
		return nil, err
	}
	return &DeviceBlockMask{Mask: bm, ptrs: ptrs}, nil
}

// Free releases the device copy.
func (dm *DeviceBlockMask) Free() {
	freePtrs(dm.ptrs)
	dm.ptrs = nil
}

// uploadI32s copies int32 tensors to the device, each in a buffer of its
// own (at least one element), by name.
func uploadI32s(xs map[string][]int32) (map[string]uintptr, error) {
	ptrs := map[string]uintptr{}
	for name, x := range xs {
		p, err := cuda.MemAlloc(max(len(x), 1) * 4)
		if err != nil {
			freePtrs(ptrs)
			return nil, err
		}
		ptrs[name] = uintptr(p)
		if err := cuda.HtoD(p, x); err != nil {
			freePtrs(ptrs)
			return nil, err
		}
	}
	return ptrs, nil
}

// freePtrs frees device buffers by name.
func freePtrs(ptrs map[string]uintptr) {
	for _, p := range ptrs {
		cuda.MemFree(cuda.DevicePtr(p))
	}
}

// LaunchCUDA runs the forward kernel on device buffers, asynchronously on
// stream s (the zero Stream is the default stream). Nothing is copied. A
// split-KV plan (Plan) runs its two kernels with t.Workspace, or with one
// allocated for the call (freed once s is done with it).
func (f *Forward) LaunchCUDA(d *CUDA, t DeviceTensors, sh Shape, s cuda.Stream) error {
	if err := sh.Validate(); err != nil {
		return err
	}
	if f.opts.Sinks {
		// DeviceTensors has no sinks buffer yet; RunCUDA takes host sinks.
		return fmt.Errorf("LaunchCUDA: kernels compiled with sinks are not supported yet (use RunCUDA)")
	}
	f, err := f.tuned(d.Arch)
	if err != nil {
		return err
	}
	plan, err := f.planCUDA(context.Background(), d, sh)
	if err != nil {
		return fmt.Errorf("LaunchCUDA: %w", err)
	}
	aux := deviceLens(t.Aux)
	if err := f.checkAuxLens(aux, sh); err != nil {
		return fmt.Errorf("LaunchCUDA: %w", err)
	}
	var after afterStream // the launch is asynchronous: free once s is done
	defer after.run(s)
	dm, err := f.deviceBlockMask(d, t.BlockMask, t.Aux, t.Scalars, sh, nil, &after)
	if err != nil {
		return err
	}
	ptrs := map[string]uintptr{"q": t.Q, "k": t.K, "v": t.V, "o": t.O, "lse": t.LSE}
	maps.Copy(ptrs, dm.ptrs)
	strides := deviceStrides(map[string][3]int{"q": t.QStride, "k": t.KStride, "v": t.VStride, "o": t.OStride})
	c, err := f.bindPlan(plan, sh, t.Scale, dm.Mask, aux, t.Scalars, strides)
	if err != nil {
		return fmt.Errorf("LaunchCUDA: %w", err)
	}
	ks, err := loadKernels(context.Background(), d, c.ks)
	if err != nil {
		return err
	}
	if c.bm != dm.Mask {
		// PackGQA over a block mask per query head: the union over each
		// group's heads, for this call.
		pm, err := d.UploadBlockMask(c.bm)
		if err != nil {
			return err
		}
		after = append(after, pm.Free)
		maps.Copy(ptrs, pm.ptrs)
	}
	if plan.SplitKV {
		ws, err := t.Workspace.orNew(plan, sh, &after)
		if err != nil {
			return fmt.Errorf("LaunchCUDA: %w", err)
		}
		ws.addPtrs(ptrs)
	}
	addDeviceAux(ptrs, c.calls, t.Aux, nil, nil)
	if err := launchAll(d, ks, c.calls, ptrs, s); err != nil {
		return fmt.Errorf("LaunchCUDA: %w", err)
	}
	return nil
}

// deviceLens are the lengths of device aux tensors, by the caller's names.
func deviceLens(aux map[string]DeviceAux) map[string]int {
	out := map[string]int{}
	for name, a := range aux {
		out[name] = a.Len
	}
	return out
}

// deviceStrides are the strides of device tensors given as {batch, head,
// seq} (zero: contiguous), by tensor name.
func deviceStrides(given map[string][3]int) map[string][]int {
	out := map[string][]int{}
	for name, st := range given {
		if st != [3]int{} {
			out[name] = st[:]
		}
	}
	return out
}

// addDeviceAux adds to ptrs the device aux tensors the calls read: aux by
// the caller's names, the aux gradients (grads, by binder key) from daux.
func addDeviceAux(ptrs map[string]uintptr, calls []*launch.Call, aux map[string]DeviceAux, grads map[string]int, daux map[string]DeviceAux) {
	for _, call := range calls {
		for _, b := range call.Buffers {
			if b.Role != launch.Aux {
				continue
			}
			if _, ok := grads[b.Key]; ok {
				ptrs[b.Name] = daux[auxGradName(b.Key)].Ptr
			} else {
				ptrs[b.Name] = aux[b.Key].Ptr
			}
		}
	}
}

// deviceBlockMask is the block mask of a launch on device buffers: dm,
// checked against the call, or one built for it (from the mask's aux
// tensors, read back, and run-time parameters) and uploaded, freed with
// after. It gets the lists of ks' kernels that it lacks (UploadBlockMask
// uploads the kv lists; flash_bwd reads the transposed q lists), freed
// with it.
func (f *Forward) deviceBlockMask(d *CUDA, dm *DeviceBlockMask, aux map[string]DeviceAux, scalars map[string]any, sh Shape, ks []stage, after *afterStream) (*DeviceBlockMask, error) {
	if dm == nil {
		host, err := f.hostAux(aux)
		if err != nil {
			return nil, err
		}
		bm, err := f.blockMaskCUDA(d, Inputs{Aux: host, Scalars: scalars}, sh)
		if err != nil {
			return nil, err
		}
		if dm, err = d.UploadBlockMask(bm); err != nil {
			return nil, err
		}
		*after = append(*after, dm.Free)
	} else if err := f.checkBlockMask(dm.Mask, sh); err != nil {
		return nil, err
	} else if err := f.checkBlockMaskParams(dm.Mask, Inputs{Scalars: scalars}.modValues()); err != nil {
		return nil, err
	}
	for _, st := range ks {
		if st.contract.BlockMask == nil {
			continue
		}
		for name, xs := range st.contract.BlockMask.Tensors(dm.Mask) {
			if _, ok := dm.ptrs[name]; ok {
				continue
			}
			p, err := cuda.MemAlloc(max(len(xs), 1) * 4)
			if err != nil {
				return nil, err
			}
			dm.ptrs[name] = uintptr(p)
			if err := cuda.HtoD(p, xs); err != nil {
				return nil, err
			}
		}
	}
	return dm, nil
}

// blockMaskCUDA is blockMask for a GPU call: given, else analytic where the
// mask can be bounded, else evaluated on the GPU.
func (f *Forward) blockMaskCUDA(d *CUDA, in Inputs, sh Shape) (*blockmask.BlockMask, error) {
	if in.BlockMask != nil {
		return f.blockMask(in, sh)
	}
	bm, err := f.analyticWith(sh, in.modValues())
	if err == nil {
		return bm, nil
	}
	if !errors.Is(err, blockmask.ErrNotAnalyzable) {
		return nil, err
	}
	// The classifier takes the mask's run-time parameters from the same
	// map as its aux tensors: a mask with one (offset) failed here with
	// "missing run-time parameter" whenever the analyzer could not bound it.
	return f.BuildBlockMaskCUDA(d, sh, in.modValues())
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
		xs, err := deviceToHost(p.Elem, a)
		if err != nil {
			return nil, err
		}
		out[p.Name] = xs
	}
	return out, nil
}

// deviceToHost copies an aux tensor of element type e back from the device
// as the slice launch.HostData gives for e.
func deviceToHost(e tir.Elem, a DeviceAux) (any, error) {
	var err error
	switch e {
	case tir.F32:
		xs := make([]float32, a.Len)
		err = cuda.DtoH(xs, cuda.DevicePtr(a.Ptr))
		return xs, err
	case tir.I32:
		xs := make([]int32, a.Len)
		err = cuda.DtoH(xs, cuda.DevicePtr(a.Ptr))
		return xs, err
	case tir.I64:
		xs := make([]int64, a.Len)
		err = cuda.DtoH(xs, cuda.DevicePtr(a.Ptr))
		return xs, err
	case tir.F16, tir.BF16:
		xs := make([]uint16, a.Len)
		err = cuda.DtoH(xs, cuda.DevicePtr(a.Ptr))
		return xs, err
	case tir.I1:
		bs := make([]uint8, a.Len)
		err = cuda.DtoH(bs, cuda.DevicePtr(a.Ptr))
		xs := make([]bool, a.Len)
		for i, b := range bs {
			xs[i] = b != 0
		}
		return xs, err
	}
	return nil, fmt.Errorf("LaunchCUDA: aux tensors of %s cannot be read back", e)
}

// BuildBlockMaskCUDA classifies the mask's blocks on the GPU with the
// stdlib's block_classify kernel (the mask inlined, one program per q
// block), then makes the lists on the host. It is the builder for masks the
// analytic classifier cannot bound, such as document masks. Like
// BuildBlockMask, it records the mask, batch and heads in the block mask.
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
	k, err := d.Kernel(context.Background(), cls, nil)
	if err != nil {
		return nil, err
	}
	// The classifier reads only the mask's aux tensors.
	maskAux := map[string]any{}
	auxLen := map[string]int{}
	if f.res.Mask != nil {
		for _, p := range f.res.Mask.AuxParams() {
			for _, key := range []string{p.Name, "mask." + p.Name} {
				if v, ok := aux[key]; ok {
					maskAux["mask."+p.Name] = v
				}
			}
		}
	}
	if auxLen, err = auxLens(maskAux); err != nil {
		return nil, err
	}
	// ... and the mask's run-time parameters, passed in aux by name.
	scalars := map[string]any{}
	if f.res.Mask != nil {
		for _, sp := range f.res.Mask.ScalarParams() {
			for _, key := range []string{sp.Name, "mask." + sp.Name} {
				if v, ok := aux[key]; ok {
					scalars["mask."+sp.Name] = v
				}
			}
		}
	}
	p := launch.Problem{Shape: Shape{Batch: b, Heads: h, SeqQ: sh.SeqQ, SeqK: sh.SeqK, Dim: 1}, Attrs: cls.Attrs()}
	call, err := attention.BlockClassify.Bind(k.Art.Params, launch.Request{Problem: p, Aux: auxLen, Scalars: scalars})
	if err != nil {
		return nil, err
	}
	out, err := d.Execute(k, call, maskAux)
	if err != nil {
		return nil, err
	}
	classes := out["classes"].([]int32)
	sq, sk := f.sparse()
	g, err := blockmask.NewGrid(b, h, sh.SeqQ, sh.SeqK, sq, sk)
	if err != nil {
		return nil, err
	}
	for i, c := range classes {
		if c < int32(blockmask.Empty) || c > int32(blockmask.Full) {
			return nil, fmt.Errorf("internal error: block classifier wrote class %d at %d", c, i)
		}
		g.Classes[i] = blockmask.Class(c)
	}
	bm, err := blockmask.FromClasses(g)
	if err != nil {
		return nil, err
	}
	// Record what it was built for, as BuildBlockMask does.
	bm.Mask, bm.BuiltB, bm.BuiltH, bm.Params = "none", sh.Batch, sh.Heads, f.maskParams(aux)
	if f.res.Mask != nil {
		bm.Mask = f.res.Mask.String()
	}
	return bm, nil
}

// tuned is the forward the GPU of arch runs: f compiled again with
// Options.Target.Arch = arch when f names no arch and the kernel's contract tunes
// tile arguments for arch (128×128 on 8 warps for sm_90a's wgmma), else f.
// Made once per arch.
func (f *Forward) tuned(arch string) (*Forward, error) {
	return retune(&f.tunedFor, f, f.opts, arch, func(opts Options) (*Forward, error) {
		g, err := CompileForward(opts, f.dim)
		if err != nil || maps.Equal(g.res.Ident.Consts, f.res.Ident.Consts) {
			return f, err // nothing tuned: keep f's kernels, block-mask analyzers and split-KV kernels
		}
		return g, nil
	})
}

// retune is the tuned methods' common part: self when opts names an arch
// or arch is "", else compile(opts with Target.Arch = arch), made once per arch
// in cache (compile returns self when nothing was tuned).
func retune[T any](cache *perArch[T], self T, opts Options, arch string, compile func(Options) (T, error)) (T, error) {
	if opts.Target.Arch != "" || arch == "" {
		return self, nil
	}
	return cache.get(arch, func() (T, error) {
		opts.Target.Arch = arch
		return compile(opts)
	})
}

// perArch holds a compiled object made again for each GPU arch it runs on
// (Forward.tuned, Backward.tuned), each made once.
type perArch[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// get is the object for arch, made by build the first time.
func (p *perArch[T]) get(arch string, build func() (T, error)) (T, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.m[arch]; ok {
		return v, nil
	}
	v, err := build()
	if err != nil {
		return v, err
	}
	if p.m == nil {
		p.m = map[string]T{}
	}
	p.m[arch] = v
	return v, nil
}

// classifier is the block_classify kernel for f's mask and block sizes.
func (f *Forward) classifier() (*compiler.Result, error) {
	f.clsOnce.Do(func() {
		sq, sk := f.sparse()
		// f's switches, and no arch: the classifier takes no tuned set.
		t := f.opts.target()
		t.Arch = ""
		f.cls, f.clsErr = compiler.Compile(compiler.Request{Sources: f.opts.Sources, Kernel: attention.BlockClassify.Kernel,
			Mask: f.opts.Mask, Consts: attention.ClassifyConsts(sq, sk), Target: t})
	})
	return f.cls, f.clsErr
}

// BundleKernels compiles f, its block classifier (used for masks the
// analytic builder cannot bound), unless Options turn split-KV and PackGQA
// off the split-KV kernels (flash_fwd_splitkv for both tile heights,
// flash_fwd_combine), and the span form of a document mask (withSpans) for
// arch, through the cache c (which may be nil), as bundle entries.
func (f *Forward) BundleKernels(ctx context.Context, c *cache.Cache, arch string, tool *llc.Tool) ([]*artifact.Artifact, error) {
	cls, err := f.classifier()
	if err != nil {
		return nil, err
	}
	ds, err := f.decodeResults()
	if err != nil {
		return nil, err
	}
	rs := append([]*compiler.Result{f.res, cls}, ds...)
	if g, ok := f.spanVariant(); ok {
		rs = append(rs, g.res) // what document runs as on contiguous ids (withSpans)
	}
	return bundleResults(ctx, c, rs, arch, tool)
}
