package flash

import (
	"context"
	"fmt"
	"maps"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cuda"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// RunPagedCUDA runs a paged call on the GPU with host tensors and returns
// O and LSE like RunPagedCPU. Outputs and the split workspace are poisoned
// (NaN) before the launch. An appending call updates in's KCache, VCache
// (copied back from the device) and CacheSeqlens in place, as RunPagedCPU
// does.
func (f *Forward) RunPagedCUDA(d *CUDA, in PagedInputs, ps PagedShape) (o, lse []float32, err error) {
	return f.RunPagedCUDAContext(context.Background(), d, in, ps)
}

// RunPagedCUDAContext is RunPagedCUDA whose compile (llc, when a kernel is
// in no bundle or cache) stops once ctx is done.
func (f *Forward) RunPagedCUDAContext(ctx context.Context, d *CUDA, in PagedInputs, ps PagedShape) (o, lse []float32, err error) {
	p, c, err := f.preparePaged(ctx, d, in, ps)
	if err != nil {
		return nil, nil, err
	}
	if c.app == nil {
		return runForOutputs(d, p)
	}
	out, err := runFor(d, p, "o", "lse", "k_cache", "v_cache")
	if err != nil {
		return nil, nil, err
	}
	copy(in.KCache, out[2])
	copy(in.VCache, out[3])
	copy(in.CacheSeqlens, c.lens)
	return out[0], out[1], nil
}

// BenchPagedCUDA times a paged call on the GPU (its kernels as one, as
// BenchCUDA times a split-KV call) and returns each timed launch's
// milliseconds. Inputs and outputs stay on the device throughout; an
// appending call writes the same rows at every launch (the device's
// lengths stay those before the append), and in is left as it is.
func (f *Forward) BenchPagedCUDA(d *CUDA, in PagedInputs, ps PagedShape, warmup, reps int) ([]float64, error) {
	p, _, err := f.preparePaged(context.Background(), d, in, ps)
	if err != nil {
		return nil, err
	}
	defer p.Free()
	return p.Bench(warmup, reps)
}

// preparePaged checks and binds a host call for d's arch and SMs and
// uploads it as one sequence: o_partial and lse_partial (and an appending
// call's caches and q) stay on the device between the kernels.
func (f *Forward) preparePaged(ctx context.Context, d *CUDA, in PagedInputs, ps PagedShape) (preparedCall, pagedCall, error) {
	f, err := f.tuned(d.Arch)
	if err != nil {
		return nil, pagedCall{}, err
	}
	c, err := f.checkPaged(in, ps)
	if err != nil {
		return nil, c, err
	}
	b, err := f.bindPaged(c, in.Scale, in.Scalars, d.SMs())
	if err != nil {
		return nil, c, err
	}
	p, err := prepareCUDA(ctx, d, b.ks, b.calls, b.hostData(in), b.plan.variant().Results)
	return p, c, err
}

// PagedDeviceTensors are a paged call's device buffers for LaunchPagedCUDA,
// as raw pointers, contiguous: Q [B, H, SeqQ, Dim] and O [B, H, SeqQ, DimV]
// in the kernel's DType, LSE [B, H, SeqQ] f32; KCache [NumPages, PageSize,
// KVHeads, Dim] and VCache [NumPages, PageSize, KVHeads, DimV] in the
// DType; PageTable [B, MaxPages] int32. The page table is not read back:
// its entries up to each sequence's length (after the append, if any) must
// be pages of 0 to NumPages-1, and an appending call's rows must fall in
// page rows that no sequence holds or appends to.
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

	// KNew [B, SeqQ, KVHeads, Dim] and VNew [B, SeqQ, KVHeads, DimV], in
	// the DType, when set (both), are keys and values to append, as
	// PagedInputs.KNew: the launch writes them into KCache and VCache at
	// each sequence's length, then attends over the grown caches, and
	// grows CacheSeqlens (the host slice) by SeqQ in place once both are
	// queued. Q is not written: the rotated q is the workspace's.
	KNew, VNew uintptr
	// Rotary, RotaryDim: as PagedInputs'; RotaryCos and RotarySin are the
	// tables [RotaryPositions, RotaryDim/2] in the DType (0 without
	// rotary), which must reach every appended position.
	Rotary               RotaryForm
	RotaryDim            int
	RotaryCos, RotarySin uintptr
	RotaryPositions      int
}

// NewPagedWorkspace allocates a workspace for paged launches of shape ps
// with caches up to maxLen keys (after the append, where they append) on
// d, of their PagedPlan there: the partial outputs and the rotated copy of
// q an appending launch attends with ([B, H, SeqQ, Dim] in the DType), so
// that one workspace serves launches that append and launches that do not.
func (f *Forward) NewPagedWorkspace(d *CUDA, ps PagedShape, maxLen int) (*ForwardWorkspace, error) {
	plan, err := f.PagedPlan(ps, maxLen, d.SMs())
	if err != nil {
		return nil, err
	}
	plan.Append = true
	return newForwardWorkspace(plan, pagedDense(ps, maxLen, f.dim, f.dimV))
}

// LaunchPagedCUDA runs a paged call on device buffers, asynchronously on
// stream s (the zero Stream is the default stream): flash_fwd_paged then
// flash_fwd_combine, as PagedPlan plans them for d, after kv_append where
// t has KNew and VNew. The cache lengths and block-mask lists go to the
// device with each launch (B + O(blocks) int32s), and are freed, with a
// workspace made for the call, once s is done with them. An appending
// launch grows t.CacheSeqlens by SeqQ once its kernels are queued.
func (f *Forward) LaunchPagedCUDA(d *CUDA, t PagedDeviceTensors, ps PagedShape, s cuda.Stream) error {
	f, err := f.tuned(d.Arch)
	if err != nil {
		return err
	}
	if err := ps.check(); err != nil {
		return fmt.Errorf("LaunchPagedCUDA: %w", err)
	}
	c, err := f.checkPagedDevice(t, ps.withKV())
	if err != nil {
		return fmt.Errorf("LaunchPagedCUDA: %w", err)
	}
	if f.opts.Sinks != (t.Sinks != 0) {
		return fmt.Errorf("LaunchPagedCUDA: a forward compiled with Options.Sinks takes PagedDeviceTensors.Sinks, and one without refuses them")
	}
	b, err := f.bindPaged(c, t.Scale, t.Scalars, d.SMs())
	if err != nil {
		return fmt.Errorf("LaunchPagedCUDA: %w", err)
	}
	err = launchWithLists(d, b.ks, b.calls, b.lists, s,
		func(after *afterStream) (*workspace, error) { return t.Workspace.orNew(b.plan, c.sh, after) },
		func(ws *workspace, lists map[string]uintptr) map[string]uintptr {
			return pagedPtrs(t, ws, lists, c.app != nil)
		})
	if err != nil {
		return fmt.Errorf("LaunchPagedCUDA: %w", err)
	}
	if c.app != nil {
		copy(t.CacheSeqlens, c.lens)
	}
	return nil
}

// checkPagedDevice checks a device call's geometry and, where it appends,
// its new rows and rotary tables against the lengths after the append.
func (f *Forward) checkPagedDevice(t PagedDeviceTensors, ps PagedShape) (pagedCall, error) {
	if (t.KNew == 0) != (t.VNew == 0) {
		return pagedCall{}, fmt.Errorf("an append takes both KNew and VNew")
	}
	if t.KNew == 0 {
		if t.Rotary != RotaryNone || t.RotaryCos != 0 || t.RotarySin != 0 {
			return pagedCall{}, fmt.Errorf("a rotary embedding without KNew and VNew: the call rotates what it appends (and q with it)")
		}
		return f.checkPagedGeometry(ps, t.NumPages, t.MaxPages, t.CacheSeqlens, t.Scalars)
	}
	rd, err := f.checkRotary(t.Rotary, t.RotaryDim)
	if err != nil {
		return pagedCall{}, err
	}
	a := &appendCall{rotary: t.Rotary, rotaryDim: rd}
	switch {
	case rd == 0 && (t.RotaryCos != 0 || t.RotarySin != 0):
		return pagedCall{}, fmt.Errorf("rotary tables without a rotary form: set the form (neox or gptj)")
	case rd > 0 && (t.RotaryCos == 0 || t.RotarySin == 0 || t.RotaryPositions < 1):
		return pagedCall{}, fmt.Errorf("rotary form %v takes RotaryCos, RotarySin and their RotaryPositions (≥ 1)", t.Rotary)
	case rd > 0:
		a.positions = t.RotaryPositions
	}
	lens, err := appendedLens(t.CacheSeqlens, ps.Batch, ps.SeqQ, t.MaxPages*ps.PageSize)
	if err != nil {
		return pagedCall{}, err
	}
	c, err := f.checkPagedGeometry(ps, t.NumPages, t.MaxPages, lens, t.Scalars)
	if err != nil {
		return c, err
	}
	c.app = a
	return c, a.checkPositions(lens)
}

// pagedPtrs are a paged launch's device buffers by kernel parameter name:
// the workspace's, the caller's and the lists'. The caller's come after
// the workspace's: a workspace made for appending launches has a q of its
// own, which only kv_append writes and only its attention reads.
func pagedPtrs(t PagedDeviceTensors, ws *workspace, lists map[string]uintptr, appends bool) map[string]uintptr {
	ptrs := cachePtrs(ws, lists, t.Q, t.KCache, t.VCache, t.PageTable, t.O, t.LSE, t.Sinks)
	if appends {
		ws.addPtrs(ptrs) // q: the workspace's rotated copy
		ptrs["q_in"], ptrs["k_new"], ptrs["v_new"] = t.Q, t.KNew, t.VNew
		// Without rotary the tables are not read, but a launch takes no
		// null pointer: k_new stands in.
		ptrs["rotary_cos"], ptrs["rotary_sin"] = t.RotaryCos, t.RotarySin
		if t.RotaryCos == 0 {
			ptrs["rotary_cos"], ptrs["rotary_sin"] = t.KNew, t.KNew
		}
	}
	return ptrs
}

// cachePtrs are a paged kernel's device buffers by parameter name: the
// workspace's, then the caller's (q, the cache and its table, o, lse and
// the sinks where given), then the lists uploaded for the launch.
func cachePtrs(ws *workspace, lists map[string]uintptr, q, kc, vc, table, o, lse, sinks uintptr) map[string]uintptr {
	ptrs := map[string]uintptr{}
	ws.addPtrs(ptrs)
	maps.Copy(ptrs, map[string]uintptr{"q": q, "k_cache": kc, "v_cache": vc, "page_table": table, "o": o, "lse": lse})
	if sinks != 0 {
		ptrs["sinks"] = sinks
	}
	maps.Copy(ptrs, lists)
	return ptrs
}

// launchWithLists launches calls of ks on d on stream s after uploading
// the lists made on the host: the workspace comes from workspace (which
// may allocate one, freed with after), the device buffers by name from
// ptrs; the uploaded lists, and such a workspace, are freed once s is
// done with them.
func launchWithLists(d *CUDA, ks []stage, calls []*launch.Call, hostLists map[string][]int32, s cuda.Stream,
	workspace func(after *afterStream) (*workspace, error), ptrs func(ws *workspace, lists map[string]uintptr) map[string]uintptr) error {
	gks, err := loadKernels(context.Background(), d, ks)
	if err != nil {
		return err
	}
	var after afterStream
	defer after.run(s)
	lists, err := uploadI32s(hostLists)
	if err != nil {
		return err
	}
	after = append(after, func() { freePtrs(lists) })
	ws, err := workspace(&after)
	if err != nil {
		return err
	}
	return launchAll(d, gks, calls, ptrs(ws, lists), s)
}

// BundlePagedKernels compiles the kernels a paged call of f may run for
// arch, through the cache c (which may be nil), as bundle entries:
// flash_fwd_paged and flash_fwd_paged_varlen (ragged batches) at both tile
// heights (or DecodeConsts' BLOCK_M), keys gathered and each TILE_PAGES
// form (1, 2 and 4 pages per tile), flash_fwd_combine at every width (the
// ragged batches' merge, and the paged calls' unless they merge in place)
// and kv_append (appending calls). It fails where f has no paged form.
func (f *Forward) BundlePagedKernels(ctx context.Context, c *cache.Cache, arch string, tool *llc.Tool) ([]*artifact.Artifact, error) {
	if err := f.pagedForm(); err != nil {
		return nil, err
	}
	v := attention.Paged
	if f.opts.fusedCombine() {
		v = attention.PagedFused
	}
	rs, err := f.splitKernels(v, tilePagesForms...)
	if err != nil {
		return nil, err
	}
	comb, err := f.combineResults()
	if err != nil {
		return nil, err
	}
	rs = append(rs, comb...)
	ragged, err := f.splitKernels(attention.PagedVarlen, tilePagesForms...)
	if err != nil {
		return nil, err
	}
	app, err := f.appendKernel()
	if err != nil {
		return nil, err
	}
	return bundleResults(ctx, c, append(append(rs, ragged...), app), arch, tool)
}
