package flash

import (
	"context"
	"fmt"
	"maps"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/runtime/cuda"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// RunPagedCUDA runs a paged call on the GPU with host tensors and returns
// O and LSE like RunPagedCPU. Outputs and the split workspace are poisoned
// (NaN) before the launch.
func (f *Forward) RunPagedCUDA(d *CUDA, in PagedInputs, ps PagedShape) (o, lse []float32, err error) {
	return f.RunPagedCUDAContext(context.Background(), d, in, ps)
}

// RunPagedCUDAContext is RunPagedCUDA whose compile (llc, when a kernel is
// in no bundle or cache) stops once ctx is done.
func (f *Forward) RunPagedCUDAContext(ctx context.Context, d *CUDA, in PagedInputs, ps PagedShape) (o, lse []float32, err error) {
	p, err := f.preparePaged(ctx, d, in, ps)
	if err != nil {
		return nil, nil, err
	}
	return runForOutputs(d, p)
}

// BenchPagedCUDA times a paged call on the GPU (both kernels as one, as
// BenchCUDA times a split-KV call) and returns each timed launch's
// milliseconds. Inputs and outputs stay on the device throughout.
func (f *Forward) BenchPagedCUDA(d *CUDA, in PagedInputs, ps PagedShape, warmup, reps int) ([]float64, error) {
	p, err := f.preparePaged(context.Background(), d, in, ps)
	if err != nil {
		return nil, err
	}
	defer p.Free()
	return p.Bench(warmup, reps)
}

// preparePaged checks and binds a host call for d's arch and SMs and
// uploads it as one sequence: o_partial and lse_partial stay on the device
// between the kernels.
func (f *Forward) preparePaged(ctx context.Context, d *CUDA, in PagedInputs, ps PagedShape) (preparedCall, error) {
	f, err := f.tuned(d.Arch)
	if err != nil {
		return nil, err
	}
	c, err := f.checkPaged(in, ps)
	if err != nil {
		return nil, err
	}
	b, err := f.bindPaged(c, in.CacheSeqlens, in.Scale, in.Scalars, d.SMs())
	if err != nil {
		return nil, err
	}
	return prepareCUDA(ctx, d, b.ks, b.calls, b.hostData(in), b.plan.variant().Results)
}

// PagedDeviceTensors are a paged call's device buffers for LaunchPagedCUDA,
// as raw pointers, contiguous: Q [B, H, SeqQ, Dim] and O [B, H, SeqQ, DimV]
// in the kernel's DType, LSE [B, H, SeqQ] f32; KCache [NumPages, PageSize,
// KVHeads, Dim] and VCache [NumPages, PageSize, KVHeads, DimV] in the
// DType; PageTable [B, MaxPages] int32. The page table is not read back:
// its entries up to each sequence's length must be pages of 0 to
// NumPages-1.
type PagedDeviceTensors struct {
	Q, KCache, VCache, PageTable, O, LSE uintptr
	NumPages, MaxPages                   int
	// CacheSeqlens are the cache lengths [B], on the host: the launch
	// builds the call's block mask and plan from them and copies them to
	// the device with the block-mask lists.
	CacheSeqlens []int32
	// Scalars are the mods' run-time parameters; Scale the softmax scale
	// (0: 1/sqrt(Dim)).
	Scalars map[string]any
	Scale   float32
	// Workspace holds the partial outputs (NewPagedWorkspace); nil
	// allocates them for this call only.
	Workspace *ForwardWorkspace
	// Sinks are the per-head sink logits ([Heads] f32) of a forward
	// compiled with Options.Sinks, 0 otherwise.
	Sinks uintptr
}

// NewPagedWorkspace allocates a workspace for paged launches of shape ps
// with caches up to maxLen keys on d (of their PagedPlan there).
func (f *Forward) NewPagedWorkspace(d *CUDA, ps PagedShape, maxLen int) (*ForwardWorkspace, error) {
	plan, err := f.PagedPlan(ps, maxLen, d.SMs())
	if err != nil {
		return nil, err
	}
	return newForwardWorkspace(plan, pagedDense(ps, maxLen, f.dim, f.dimV))
}

// LaunchPagedCUDA runs a paged call on device buffers, asynchronously on
// stream s (the zero Stream is the default stream): flash_fwd_paged then
// flash_fwd_combine, as PagedPlan plans them for d. The cache lengths and
// block-mask lists go to the device with each launch (B + O(blocks)
// int32s), and are freed, with a workspace made for the call, once s is
// done with them.
func (f *Forward) LaunchPagedCUDA(d *CUDA, t PagedDeviceTensors, ps PagedShape, s cuda.Stream) error {
	f, err := f.tuned(d.Arch)
	if err != nil {
		return err
	}
	if err := ps.check(); err != nil {
		return fmt.Errorf("LaunchPagedCUDA: %w", err)
	}
	c, err := f.checkPagedGeometry(ps.withKV(), t.NumPages, t.MaxPages, t.CacheSeqlens, t.Scalars)
	if err != nil {
		return fmt.Errorf("LaunchPagedCUDA: %w", err)
	}
	if f.opts.Sinks != (t.Sinks != 0) {
		return fmt.Errorf("LaunchPagedCUDA: a forward compiled with Options.Sinks takes PagedDeviceTensors.Sinks, and one without refuses them")
	}
	b, err := f.bindPaged(c, t.CacheSeqlens, t.Scale, t.Scalars, d.SMs())
	if err != nil {
		return fmt.Errorf("LaunchPagedCUDA: %w", err)
	}
	ks, err := loadKernels(context.Background(), d, b.ks)
	if err != nil {
		return err
	}
	var after afterStream
	defer after.run(s)
	lists, err := uploadI32s(b.lists)
	if err != nil {
		return err
	}
	after = append(after, func() { freePtrs(lists) })
	ws, err := t.Workspace.orNew(b.plan, c.sh, &after)
	if err != nil {
		return fmt.Errorf("LaunchPagedCUDA: %w", err)
	}
	if err := launchAll(d, ks, b.calls, pagedPtrs(t, ws, lists), s); err != nil {
		return fmt.Errorf("LaunchPagedCUDA: %w", err)
	}
	return nil
}

// pagedPtrs are a paged launch's device buffers by kernel parameter name:
// the caller's, the workspace's and the lists'.
func pagedPtrs(t PagedDeviceTensors, ws *workspace, lists map[string]uintptr) map[string]uintptr {
	ptrs := map[string]uintptr{"q": t.Q, "k_cache": t.KCache, "v_cache": t.VCache, "page_table": t.PageTable, "o": t.O, "lse": t.LSE}
	if t.Sinks != 0 {
		ptrs["sinks"] = t.Sinks
	}
	ws.addPtrs(ptrs)
	maps.Copy(ptrs, lists)
	return ptrs
}

// BundlePagedKernels compiles the kernels a paged call of f may run for
// arch, through the cache c (which may be nil), as bundle entries:
// flash_fwd_paged at both tile heights (or DecodeConsts' BLOCK_M), keys
// gathered and each TILE_PAGES form (1, 2 and 4 pages per tile), and
// flash_fwd_combine at every width. It
// fails where f has no paged form.
func (f *Forward) BundlePagedKernels(ctx context.Context, c *cache.Cache, arch string, tool *llc.Tool) ([]*artifact.Artifact, error) {
	if err := f.pagedForm(); err != nil {
		return nil, err
	}
	rs, err := f.splitFamilyResults(attention.Paged, tilePagesForms...)
	if err != nil {
		return nil, err
	}
	return bundleResults(ctx, c, rs, arch, tool)
}
