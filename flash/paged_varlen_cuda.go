package flash

import (
	"cmp"
	"context"
	"fmt"

	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// RunPagedVarlenCUDA runs a ragged call on the GPU with host tensors and
// returns O and LSE like RunPagedVarlenCPU. Outputs and the split
// workspace are poisoned (NaN) before the launch.
func (f *Forward) RunPagedVarlenCUDA(d *CUDA, in PagedVarlenInputs, ps PagedVarlenShape) (o, lse []float32, err error) {
	return f.RunPagedVarlenCUDAContext(context.Background(), d, in, ps)
}

// RunPagedVarlenCUDAContext is RunPagedVarlenCUDA whose compile (llc, when
// a kernel is in no bundle or cache) stops once ctx is done.
func (f *Forward) RunPagedVarlenCUDAContext(ctx context.Context, d *CUDA, in PagedVarlenInputs, ps PagedVarlenShape) (o, lse []float32, err error) {
	p, c, err := f.preparePagedVarlen(ctx, d, in, ps)
	if err != nil || c.totalQ == 0 {
		return []float32{}, []float32{}, err
	}
	return runForOutputs(d, p)
}

// BenchPagedVarlenCUDA times a ragged call on the GPU (its kernels as
// one) and returns each timed launch's milliseconds. Inputs and outputs
// stay on the device throughout.
func (f *Forward) BenchPagedVarlenCUDA(d *CUDA, in PagedVarlenInputs, ps PagedVarlenShape, warmup, reps int) ([]float64, error) {
	p, c, err := f.preparePagedVarlen(context.Background(), d, in, ps)
	if err != nil {
		return nil, err
	}
	if c.totalQ == 0 {
		return nil, fmt.Errorf("a ragged batch with no queries runs no kernel to time")
	}
	defer p.Free()
	return p.Bench(warmup, reps)
}

// preparePagedVarlen checks and binds a host call for d's arch and SMs and
// uploads it as one sequence (o_partial and lse_partial stay on the
// device between the kernels); nothing is prepared for a batch with no
// queries.
func (f *Forward) preparePagedVarlen(ctx context.Context, d *CUDA, in PagedVarlenInputs, ps PagedVarlenShape) (preparedCall, raggedCall, error) {
	f, err := f.tuned(d.Arch)
	if err != nil {
		return nil, raggedCall{}, err
	}
	c, err := f.checkPagedVarlen(in, ps)
	if err != nil || c.totalQ == 0 {
		return nil, c, err
	}
	b, err := f.bindPagedVarlen(c, in.Scale, in.Scalars, d.SMs())
	if err != nil {
		return nil, c, err
	}
	p, err := prepareCUDA(ctx, d, b.ks, b.calls, b.raggedHost(in), b.plan.variant().Results)
	return p, c, err
}

// PagedVarlenDeviceTensors are a ragged call's device buffers for
// LaunchPagedVarlenCUDA, as raw pointers, contiguous: Q [total_q, H, Dim]
// and O [total_q, H, DimV] in the kernel's DType, LSE [H, total_q] f32;
// KCache, VCache and PageTable as PagedDeviceTensors'. The page table is
// not read back: its entries up to each sequence's length must be pages of
// 0 to NumPages-1.
type PagedVarlenDeviceTensors struct {
	Q, KCache, VCache, PageTable, O, LSE uintptr
	NumPages, MaxPages                   int
	// CuSeqlensQ [B + 1] and CacheSeqlens [B] are on the host: the
	// launch plans the call and builds its tile list and block mask from
	// them, and copies them to the device with those lists.
	CuSeqlensQ, CacheSeqlens []int32
	// Scalars are the mods' run-time parameters; Scale the softmax scale
	// (0: 1/sqrt(Dim)).
	Scalars map[string]any
	Scale   float32
	// Workspace holds the partial outputs (NewPagedVarlenWorkspace); nil
	// allocates them for this call only.
	Workspace *ForwardWorkspace
	// Sinks are the per-head sink logits ([Heads] f32) of a forward
	// compiled with Options.Sinks, 0 otherwise.
	Sinks uintptr
}

// NewPagedVarlenWorkspace allocates a workspace for ragged launches of
// shape ps on d with up to maxTotalQ queries and caches of up to maxLen
// keys: partial outputs for the most rows × splits such a launch's plan
// can have (raggedWorkspaceRows).
func (f *Forward) NewPagedVarlenWorkspace(d *CUDA, ps PagedVarlenShape, maxTotalQ, maxLen int) (*ForwardWorkspace, error) {
	if err := ps.check(); err != nil {
		return nil, err
	}
	if maxTotalQ < 1 || maxLen < 1 {
		return nil, fmt.Errorf("a ragged workspace for %d queries and caches of %d keys: want at least 1 of each", maxTotalQ, maxLen)
	}
	rows, err := f.raggedWorkspaceRows(ps.withKV(), maxTotalQ, maxLen, d.SMs())
	if err != nil {
		return nil, err
	}
	return newForwardWorkspaceFor(DecodePlan{SplitKV: true, Paged: true, Varlen: true, NumSplits: 1}, f.raggedWorkspaceProblem(ps.withKV(), rows, 1))
}

// raggedWorkspaceProblem is the split kernel's problem as far as its
// workspace goes: rows query positions of ps's heads in splits splits.
func (f *Forward) raggedWorkspaceProblem(ps PagedVarlenShape, rows, splits int) launch.Problem {
	sh := Shape{Batch: 1, Heads: ps.Heads, KVHeads: ps.KVHeads, SeqQ: 1, SeqK: 1, Dim: f.dim}
	if f.dimV != f.dim {
		sh.DimV = f.dimV
	}
	return launch.Problem{Shape: sh, TotalQ: rows, NumSplits: splits}
}

// raggedWorkspaceRows bounds splits × total_q over the ragged calls of
// shape ps with up to maxTotalQ queries and caches of up to maxLen keys
// on sms multiprocessors. With NumSplits given it is NumSplits ×
// maxTotalQ. Auto splits only where the programs P (q tiles × packed
// heads) fill less than 80% of two a multiprocessor (P·5 < 8·sms), into
// at most one split per 512 keys of the longest cache (MaxSplits at
// most); a tile holds at most BLOCK_M rows of query × head, so such a call
// has at most P·BLOCK_M / H queries.
func (f *Forward) raggedWorkspaceRows(ps PagedVarlenShape, maxTotalQ, maxLen, sms int) (int, error) {
	if ns := f.opts.NumSplits; ns > 0 {
		return ns * maxTotalQ, nil
	}
	sms = cmp.Or(f.opts.SMs, max(sms, 0), DefaultSMs)
	bm, user, err := f.splitBlockM(1, 1)
	if err != nil {
		return 0, err
	}
	if !user {
		bm = maxBlockM
	}
	_, sk := f.sparse()
	splits := min(MaxSplits, max(1, launch.CeilDiv(maxLen, sk)*sk/minKeysPerSplit))
	programs := (8*sms - 1) / 5
	return max(maxTotalQ, min(maxTotalQ, launch.CeilDiv(programs*bm, ps.Heads))*splits), nil
}

// LaunchPagedVarlenCUDA runs a ragged call on device buffers,
// asynchronously on stream s (the zero Stream is the default stream):
// flash_fwd_paged_varlen then flash_fwd_combine, as PagedVarlenPlan plans
// them for d. The lengths, tile list and block-mask lists go to the device
// with each launch (O(B + tiles + blocks) int32s), and are freed, with a
// workspace made for the call, once s is done with them. A batch with no
// queries launches nothing.
func (f *Forward) LaunchPagedVarlenCUDA(d *CUDA, t PagedVarlenDeviceTensors, ps PagedVarlenShape, s cuda.Stream) error {
	f, err := f.tuned(d.Arch)
	if err != nil {
		return err
	}
	if err := ps.check(); err != nil {
		return fmt.Errorf("LaunchPagedVarlenCUDA: %w", err)
	}
	if len(t.CuSeqlensQ) == 0 {
		return fmt.Errorf("LaunchPagedVarlenCUDA: cu_seqlens_q is empty: want %d elements", ps.Batch+1)
	}
	ps = ps.withKV()
	c, err := f.checkRaggedGeometry(ps, t.NumPages, t.MaxPages, t.CuSeqlensQ, t.CacheSeqlens, int(t.CuSeqlensQ[len(t.CuSeqlensQ)-1]))
	if err == nil {
		err = f.checkScalars(t.Scalars)
	}
	if err != nil {
		return fmt.Errorf("LaunchPagedVarlenCUDA: %w", err)
	}
	if f.opts.Sinks != (t.Sinks != 0) {
		return fmt.Errorf("LaunchPagedVarlenCUDA: a forward compiled with Options.Sinks takes PagedVarlenDeviceTensors.Sinks, and one without refuses them")
	}
	if c.totalQ == 0 {
		return nil
	}
	b, err := f.bindPagedVarlen(c, t.Scale, t.Scalars, d.SMs())
	if err != nil {
		return fmt.Errorf("LaunchPagedVarlenCUDA: %w", err)
	}
	err = launchWithLists(d, b.ks, b.calls, b.lists, s,
		func(after *afterStream) (*workspace, error) {
			return t.Workspace.orNewFor(b.plan, f.raggedWorkspaceProblem(ps, c.totalQ, b.plan.NumSplits),
				fmt.Sprintf("%d queries in %d splits", c.totalQ, b.plan.NumSplits), after)
		},
		func(ws *workspace, lists map[string]uintptr) map[string]uintptr {
			return cachePtrs(ws, lists, t.Q, t.KCache, t.VCache, t.PageTable, t.O, t.LSE, t.Sinks)
		})
	if err != nil {
		return fmt.Errorf("LaunchPagedVarlenCUDA: %w", err)
	}
	return nil
}
