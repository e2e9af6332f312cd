package flash

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cuda"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// tuned is the backward the GPU of arch runs: bw compiled again with
// Options.Target.Arch = arch when bw names no arch and flash_bwd's contract tunes
// its tiles for arch (FlashBwd.Tuned), else bw. Made once per arch.
func (bw *Backward) tuned(arch string) (*Backward, error) {
	return retune(&bw.tunedFor, bw, bw.opts, arch, func(opts Options) (*Backward, error) {
		g, err := CompileBackward(opts, bw.dim)
		if err != nil || maps.Equal(g.main.res.Ident.Consts, bw.main.res.Ident.Consts) {
			return bw, err // nothing tuned: keep bw's kernels
		}
		return g, nil
	})
}

// prepare builds the block mask, binds every kernel and uploads a host
// call; the kernels share Δ, the dQ accumulator and the aux gradients on
// the device. The aux gradients' parameter names come back too.
func (bw *Backward) prepare(ctx context.Context, d *CUDA, in BackwardInputs, sh Shape) (preparedCall, []string, error) {
	bw, err := bw.tuned(d.Arch)
	if err != nil {
		return nil, nil, err
	}
	if err := sh.Validate(); err != nil {
		return nil, nil, err
	}
	if err := bw.checkInputs(in, sh); err != nil {
		return nil, nil, err
	}
	bm, err := bw.masker.blockMaskCUDA(d, in.forwardInputs(), sh)
	if err != nil {
		return nil, nil, err
	}
	// As the forward's prepare: the span form where the ids allow and its
	// kernels can be had, with bw's block mask.
	if g, gin := bw.withSpans(in, sh); g != bw {
		if g, err = g.tuned(d.Arch); err == nil {
			if _, err = loadKernels(ctx, d, g.stages); err == nil {
				bw, in = g, gin
			}
		}
	}
	b, err := bw.bind(in.Aux, in.Scalars, in.Scale, sh, bm, nil)
	if err != nil {
		return nil, nil, err
	}
	host, grads := bw.hostData(in, bm, b), zeroGrads(b)
	maps.Copy(host, grads)
	p, err := prepareCUDA(ctx, d, bw.stages, b.calls, host, attention.Backward.Results)
	return p, slices.Sorted(maps.Keys(grads)), err
}

// zeroGrads are b's aux gradients as zeroed host buffers, by parameter
// name: the main kernel adds into them.
func zeroGrads(b *bound) map[string]any {
	out := map[string]any{}
	for key, n := range b.gradLen {
		out[key] = make([]float32, n)
	}
	return out
}

// RunCUDA runs the backward pass on the GPU with host tensors and returns
// dQ, dK and dV like RunCPU; RunCUDAGrads also returns the aux gradients.
// The kernels' outputs are poisoned (NaN) before the launch.
func (bw *Backward) RunCUDA(d *CUDA, in BackwardInputs, sh Shape) (dq, dk, dv []float32, err error) {
	g, err := bw.RunCUDAGrads(context.Background(), d, in, sh)
	if err != nil {
		return nil, nil, nil, err
	}
	return g.DQ, g.DK, g.DV, nil
}

// RunCUDAGrads runs the backward pass on the GPU: flash_bwd_preprocess,
// flash_bwd and flash_bwd_postprocess (or flash_bwd_dq) in order on the
// default stream. Compiling (llc, when a kernel is in no bundle or cache)
// stops once ctx is done.
func (bw *Backward) RunCUDAGrads(ctx context.Context, d *CUDA, in BackwardInputs, sh Shape) (*Grads, error) {
	seq, grads, err := bw.prepare(ctx, d, in, sh)
	if err != nil {
		return nil, err
	}
	return runGrads(d, seq, grads, bw.opts.Sinks)
}

// runGrads runs an uploaded backward sequence once, frees it, and returns
// its gradients: dQ, dK, dV, dsinks when withSinks, and the aux gradients
// in the buffers named grads.
func runGrads(d *CUDA, seq preparedCall, grads []string, withSinks bool) (*Grads, error) {
	defer seq.Free()
	if err := seq.Run(cuda.Stream{}); err != nil {
		return nil, err
	}
	if err := d.Ctx.Synchronize(); err != nil {
		return nil, err
	}
	g := &Grads{DAux: map[string][]float32{}}
	for _, o := range []struct {
		name string
		dst  *[]float32
	}{{"dq", &g.DQ}, {"dk", &g.DK}, {"dv", &g.DV}} {
		v, err := seq.Output(o.name)
		if err != nil {
			return nil, err
		}
		*o.dst = v.([]float32)
	}
	if withSinks {
		v, err := seq.Output("dsinks")
		if err != nil {
			return nil, err
		}
		g.DSinks = v.([]float32)
	}
	for _, name := range grads {
		v, err := seq.Output(name)
		if err != nil {
			return nil, err
		}
		g.DAux[auxGradName(name)] = v.([]float32)
	}
	return g, nil
}

// BenchCUDA times the whole backward pass (every kernel, in order) with
// CUDA events: warmup runs, then reps timed ones; it returns each run's
// time in milliseconds. dQ, dK and dV must hold no NaN afterwards.
func (bw *Backward) BenchCUDA(d *CUDA, in BackwardInputs, sh Shape, warmup, reps int) ([]float64, error) {
	p, _, err := bw.prepare(context.Background(), d, in, sh)
	if err != nil {
		return nil, err
	}
	defer p.Free()
	return p.Bench(warmup, reps)
}

// BackwardDeviceTensors are device buffers for Backward.LaunchCUDA, as raw
// pointers, laid out as for the forward's DeviceTensors: Q and DQ are
// [B, H, SeqQ, Dim], O and DO (dL/dO) [B, H, SeqQ, DimV], K and DK
// [B, KVHeads, SeqK, Dim], V and DV [B, KVHeads, SeqK, DimV], in the
// kernels' DType, the last dimension contiguous and the others strided
// by the {batch, head, seq} strides (zero: contiguous); LSE is the
// forward's [B, H, SeqQ] f32, contiguous.
//
// DAux holds the gradients of the score's float aux tensors
// (Backward.AuxGrads), f32, as long as each aux tensor: the kernels add
// into them, so zero them first (or pass a running sum).
//
// Sinks ([H] f32, the forward's sink logits) and DSinks ([H] f32, written,
// not added into) are for a backward compiled with Options.Sinks.
type BackwardDeviceTensors struct {
	Q, K, V, O, LSE, DO uintptr
	DQ, DK, DV          uintptr
	Sinks, DSinks       uintptr

	QStride, KStride, VStride, OStride, DOStride, DQStride, DKStride, DVStride [3]int

	Aux     map[string]DeviceAux
	DAux    map[string]DeviceAux
	Scalars map[string]any
	Scale   float32 // 0 means 1/sqrt(Dim)
	// BlockMask is the block mask on the device (UploadBlockMask); the
	// transposed lists the backward reads are added to it on first use.
	// nil builds one for this call only.
	BlockMask *DeviceBlockMask
	// Workspace holds Δ and the dQ accumulator (NewWorkspace); nil
	// allocates them for this call only.
	Workspace *BackwardWorkspace
}

// BackwardWorkspace is the backward pass's scratch memory on the device:
// Δ = rowsum(dO∘O) ([B, H, SeqQ] f32) and the f32 dQ accumulator
// ([B·H·SeqQ + 1024, Dim]: 1024 rows of padding that the last head's last
// tile adds zeros into; one element in DETERMINISTIC mode). One workspace
// serves every launch of a shape no larger than it was made for, on one
// stream at a time.
type BackwardWorkspace struct{ w *workspace }

// NewWorkspace allocates a workspace for launches of shapes up to sh.
func (bw *Backward) NewWorkspace(sh Shape) (*BackwardWorkspace, error) {
	lens, err := bw.workspaceLens(sh)
	if err != nil {
		return nil, err
	}
	w, err := newWorkspace(attention.Backward.Workspace, lens)
	if err != nil {
		return nil, err
	}
	return &BackwardWorkspace{w}, nil
}

// Free releases the workspace.
func (w *BackwardWorkspace) Free() { w.w.free() }

// workspaceLens are the elements of the workspace buffers for shape sh.
func (bw *Backward) workspaceLens(sh Shape) ([]int, error) {
	if err := sh.Validate(); err != nil {
		return nil, err
	}
	cs := make([]*launch.Contract, len(bw.stages))
	for i, st := range bw.stages {
		cs[i] = st.contract
	}
	return workspaceLens(cs, attention.Backward.Workspace, launch.Problem{Shape: sh, Attrs: bw.main.res.Attrs()})
}

// LaunchCUDA runs the backward pass on device buffers, asynchronously on
// stream s (the zero Stream is the default stream); nothing is copied.
// Without a Workspace (or a BlockMask) in t, it allocates one for the call
// and waits for s to finish before freeing it.
func (bw *Backward) LaunchCUDA(d *CUDA, t BackwardDeviceTensors, sh Shape, s cuda.Stream) error {
	bw, err := bw.tuned(d.Arch)
	if err != nil {
		return err
	}
	if err := sh.Validate(); err != nil {
		return err
	}
	ks, err := loadKernels(context.Background(), d, bw.stages)
	if err != nil {
		return err
	}
	aux := deviceLens(t.Aux)
	if err := bw.masker.checkAuxLens(aux, sh); err != nil {
		return fmt.Errorf("LaunchCUDA: %w", err)
	}
	if err := bw.masker.checkScalars(t.Scalars); err != nil {
		return fmt.Errorf("LaunchCUDA: %w", err)
	}
	if bw.opts.Sinks != (t.Sinks != 0) || bw.opts.Sinks != (t.DSinks != 0) {
		return fmt.Errorf("LaunchCUDA: a backward compiled with Options.Sinks = %v needs Sinks and DSinks set (only then)", bw.opts.Sinks)
	}
	// Free what this call allocates once the stream is done with it.
	var after afterStream
	defer after.run(s)
	lens, err := bw.workspaceLens(sh)
	if err != nil {
		return err
	}
	var ws *workspace
	if t.Workspace != nil {
		ws = t.Workspace.w
	}
	if ws, err = ws.orNew(attention.Backward.Workspace, lens, fmt.Sprintf("shape %+v", sh), &after); err != nil {
		return fmt.Errorf("LaunchCUDA: %w", err)
	}
	dm, err := bw.masker.deviceBlockMask(d, t.BlockMask, t.Aux, t.Scalars, sh, bw.stages, &after)
	if err != nil {
		return err
	}
	strides := deviceStrides(map[string][3]int{"q": t.QStride, "k": t.KStride, "v": t.VStride, "o": t.OStride,
		"dout": t.DOStride, "dq": t.DQStride, "dk": t.DKStride, "dv": t.DVStride})
	for _, a := range bw.AuxGrads() {
		g, ok := t.DAux[a]
		if !ok {
			return fmt.Errorf("LaunchCUDA: missing DAux[%q], the gradient of aux tensor %s", a, a)
		}
		if n, ok := lookupLen(aux, a); ok && g.Len != n {
			return fmt.Errorf("LaunchCUDA: DAux[%q] has %d elements, aux tensor %s has %d", a, g.Len, a, n)
		}
	}
	b, err := bw.bindLens(aux, t.Scalars, t.Scale, sh, dm.Mask, strides)
	if err != nil {
		return fmt.Errorf("LaunchCUDA: %w", err)
	}
	ptrs := map[string]uintptr{"q": t.Q, "k": t.K, "v": t.V, "o": t.O, "lse": t.LSE, "dout": t.DO,
		"dq": t.DQ, "dk": t.DK, "dv": t.DV, "sinks": t.Sinks, "dsinks": t.DSinks}
	ws.addPtrs(ptrs)
	maps.Copy(ptrs, dm.ptrs)
	addDeviceAux(ptrs, b.calls, t.Aux, b.gradLen, t.DAux)
	if err := launchAll(d, ks, b.calls, ptrs, s); err != nil {
		return fmt.Errorf("LaunchCUDA: %w", err)
	}
	return nil
}

// lookupLen finds an aux tensor's length by its short or score-qualified
// name.
func lookupLen(lens map[string]int, a string) (int, bool) {
	if n, ok := lens[a]; ok {
		return n, true
	}
	n, ok := lens["score."+a]
	return n, ok
}

// BundleKernels compiles the backward's kernels, its block classifier
// (for masks the analytic builder cannot bound) and the span form of a
// document mask (withSpans) for arch, through the cache c (which may be
// nil), as bundle entries.
func (bw *Backward) BundleKernels(ctx context.Context, c *cache.Cache, arch string, tool *llc.Tool) ([]*artifact.Artifact, error) {
	cls, err := bw.masker.classifier()
	if err != nil {
		return nil, err
	}
	rs := append(results(bw.stages), cls)
	if g, ok := bw.spanVariant(); ok {
		rs = append(rs, results(g.stages)...) // what document runs as on contiguous ids (withSpans)
	}
	return bundleResults(ctx, c, rs, arch, tool)
}

// BundleKernels compiles the varlen backward's kernels for arch, through
// the cache c (which may be nil), as bundle entries (its block masks are
// built on the host: no classifier).
func (bw *BackwardVarlen) BundleKernels(ctx context.Context, c *cache.Cache, arch string, tool *llc.Tool) ([]*artifact.Artifact, error) {
	return bundleResults(ctx, c, results(bw.stages), arch, tool)
}

// BundleKernels compiles the varlen forward's kernel for arch, through the
// cache c (which may be nil), as a bundle entry (its block masks are built
// on the host: no classifier).
func (v *ForwardVarlen) BundleKernels(ctx context.Context, c *cache.Cache, arch string, tool *llc.Tool) ([]*artifact.Artifact, error) {
	return bundleResults(ctx, c, []*compiler.Result{v.f.res}, arch, tool)
}

// bundleResults compiles rs for arch through the cache c (which may be
// nil), as bundle entries.
func bundleResults(ctx context.Context, c *cache.Cache, rs []*compiler.Result, arch string, tool *llc.Tool) ([]*artifact.Artifact, error) {
	out := make([]*artifact.Artifact, 0, len(rs))
	for _, r := range rs {
		a, err := compiler.Cached(ctx, c, r, arch, tool, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
