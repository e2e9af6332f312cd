package flash

import (
	"context"
	"fmt"

	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cuda"
	"github.com/fac-compiler/fac/runtime/gpu"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// SMs is the GPU's multiprocessor count (0 when the driver does not say),
// which the automatic split choice fills.
func (d *CUDA) SMs() int {
	n, err := d.Dev.Attribute(cuda.DevAttrMultiprocessorCount)
	if err != nil {
		return 0
	}
	return n
}

// preparedCall is a host call uploaded to the GPU: one kernel
// (gpu.Prepared) or the split-KV pair (seqCall).
type preparedCall interface {
	Run(s cuda.Stream) error
	Output(name string) (any, error)
	Bench(warmup, reps int) ([]float64, error)
	Free()
}

// seqCall is the split-KV pair uploaded as one sequence: o_partial and
// lse_partial stay on the device between the kernels.
type seqCall struct{ *gpu.Sequence }

// Bench times both kernels as one and checks the results (not the
// workspace) for NaN.
func (s seqCall) Bench(warmup, reps int) ([]float64, error) {
	return s.Sequence.Bench(warmup, reps, "o", "lse")
}

// decodeResults are the split-KV kernels a bundle of f needs: none when
// Options turn split-KV and PackGQA off or the kernel has no split-KV form,
// else flash_fwd_splitkv at every tile height a plan picks (splitHeights)
// and flash_fwd_combine at every width.
func (f *Forward) decodeResults() ([]*compiler.Result, error) {
	if !f.splitKVCapable() || (f.opts.NumSplits == 1 && f.opts.PackGQA == PackGQAOff) {
		return nil, nil
	}
	return f.splitFamilyResults(attention.FlashFwdSplitKV)
}

// splitFamilyResults are c's kernel (flash_fwd_splitkv, or flash_fwd_paged
// with PAGE_TILES off and on) at every tile height a plan picks and
// flash_fwd_combine at every width.
func (f *Forward) splitFamilyResults(c *launch.Contract) ([]*compiler.Result, error) {
	heights, err := f.splitHeights()
	if err != nil {
		return nil, err
	}
	tiles := []bool{false}
	if c == attention.FlashFwdPaged {
		tiles = append(tiles, true)
	}
	var out []*compiler.Result
	for _, bm := range heights {
		for _, pt := range tiles {
			r, err := f.splitFamilyKernel(c, bm, pt)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	cs, err := f.combineResults()
	if err != nil {
		return nil, err
	}
	return append(out, cs...), nil
}

// splitHeights are the split kernels' tile heights a plan of f can pick:
// 16 and 64 rows, or DecodeConsts' BLOCK_M.
func (f *Forward) splitHeights() ([]int, error) {
	bm, user, err := f.splitBlockM(1, 1)
	if err != nil {
		return nil, err
	}
	if user {
		return []int{bm}, nil
	}
	return []int{16, maxBlockM}, nil
}

// combineResults are flash_fwd_combine at every width a plan can pick.
func (f *Forward) combineResults() ([]*compiler.Result, error) {
	var out []*compiler.Result
	for _, w := range combineWidths() {
		c, err := f.combineKernel(w)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// decodeKernelsCUDA loads the kernels of plan on d.
func (f *Forward) decodeKernelsCUDA(ctx context.Context, d *CUDA, plan DecodePlan) ([2]*gpu.Kernel, error) {
	var out [2]*gpu.Kernel
	rs, err := f.DecodeKernels(plan)
	if err != nil {
		return out, err
	}
	if len(rs) != 2 {
		return out, fmt.Errorf("internal error: plan %v launches no split-KV kernels", plan)
	}
	return loadPair(ctx, d, [2]*compiler.Result{rs[0], rs[1]})
}

// loadPair loads a split kernel and flash_fwd_combine on d.
func loadPair(ctx context.Context, d *CUDA, rs [2]*compiler.Result) ([2]*gpu.Kernel, error) {
	var out [2]*gpu.Kernel
	for i, r := range rs {
		var err error
		if out[i], err = d.Kernel(ctx, r, nil); err != nil {
			return out, err
		}
	}
	return out, nil
}

// preparePair uploads a split kernel's and flash_fwd_combine's calls as
// one sequence: o_partial and lse_partial stay on the device between them.
func preparePair(d *CUDA, ks [2]*gpu.Kernel, calls [2]*launch.Call, host map[string]any) (preparedCall, error) {
	seq, err := d.PrepareSequence([]gpu.Step{{Kernel: ks[0], Call: calls[0]}, {Kernel: ks[1], Call: calls[1]}}, host)
	if err != nil {
		return nil, err
	}
	return seqCall{seq}, nil
}

// prepareDecode builds the block mask, binds both split-KV kernels and
// uploads a host call as one sequence.
func (f *Forward) prepareDecode(ctx context.Context, d *CUDA, plan DecodePlan, in Inputs, sh Shape) (preparedCall, error) {
	ks, err := f.decodeKernelsCUDA(ctx, d, plan)
	if err != nil {
		return nil, err
	}
	bm, err := f.blockMaskCUDA(d, in, sh)
	if err != nil {
		return nil, err
	}
	aux, err := auxLens(in.Aux)
	if err != nil {
		return nil, err
	}
	b, err := f.bindDecode(plan, sh, in.Scale, bm, aux, in.Scalars, nil)
	if err != nil {
		return nil, err
	}
	return preparePair(d, ks, b.calls, b.hostData(in))
}

// ForwardWorkspace is split-KV's scratch memory on the device: the partial
// outputs o_partial ([splits, B, H, SeqQ, DimV]) and lse_partial ([splits,
// B, H, SeqQ]), f32. One workspace serves every launch whose partial
// outputs are no larger, on one stream at a time.
type ForwardWorkspace struct {
	oPartial, lsePartial cuda.DevicePtr
	nO, nLSE             int // elements
}

// NewWorkspace allocates a workspace for launches of shape sh on d (of its
// Plan there; an empty one when the plan does not split).
func (f *Forward) NewWorkspace(d *CUDA, sh Shape) (*ForwardWorkspace, error) {
	plan, err := f.Plan(sh, d.SMs())
	if err != nil {
		return nil, err
	}
	return newWorkspace(plan, sh)
}

// newWorkspace allocates the partial outputs of plan on shape sh.
func newWorkspace(plan DecodePlan, sh Shape) (*ForwardWorkspace, error) {
	no, nl := workspaceLens(plan, sh)
	w := &ForwardWorkspace{nO: no, nLSE: nl}
	if err := allocF32s([]*cuda.DevicePtr{&w.oPartial, &w.lsePartial}, []int{no, nl}); err != nil {
		return nil, err
	}
	return w, nil
}

// orNew is w when it holds plan's partial outputs on shape sh, else an
// error; a nil w is a workspace allocated for one launch, freed after it.
func (w *ForwardWorkspace) orNew(plan DecodePlan, sh Shape, after *afterStream) (*ForwardWorkspace, error) {
	no, nl := workspaceLens(plan, sh)
	if w == nil {
		w, err := newWorkspace(plan, sh)
		if err != nil {
			return nil, err
		}
		*after = append(*after, w.Free)
		return w, nil
	}
	if w.nO < no || w.nLSE < nl {
		return nil, fmt.Errorf("workspace holds %d and %d elements, %d splits of shape %+v need %d and %d", w.nO, w.nLSE, plan.NumSplits, sh, no, nl)
	}
	return w, nil
}

// Free releases the workspace.
func (w *ForwardWorkspace) Free() { freeAll(&w.oPartial, &w.lsePartial) }

// workspaceLens are the elements of o_partial and lse_partial for plan (0
// without split-KV).
func workspaceLens(plan DecodePlan, sh Shape) (o, lse int) {
	if !plan.SplitKV {
		return 0, 0
	}
	rows := plan.NumSplits * sh.Batch * sh.Heads * sh.SeqQ
	return rows * sh.VDim(), rows
}

// launchDecode is LaunchCUDA's split-KV path: dm is the call's block mask
// on the device, ptrs the caller's tensors and its lists by parameter name.
func (f *Forward) launchDecode(d *CUDA, plan DecodePlan, t DeviceTensors, sh Shape, s cuda.Stream, dm *DeviceBlockMask,
	strides map[string][]int, ptrs map[string]uintptr, aux map[string]int) error {
	ks, err := f.decodeKernelsCUDA(context.Background(), d, plan)
	if err != nil {
		return err
	}
	b, err := f.bindDecode(plan, sh, t.Scale, dm.Mask, aux, t.Scalars, strides)
	if err != nil {
		return fmt.Errorf("LaunchCUDA: %w", err)
	}
	var after afterStream
	defer after.run(s)
	if b.bm != dm.Mask {
		// PackGQA over a block mask per query head: the union over each
		// group's heads, for this call.
		pm, err := d.UploadBlockMask(b.bm)
		if err != nil {
			return err
		}
		after = append(after, pm.Free)
		for name, p := range pm.ptrs {
			ptrs[name] = p
		}
	}
	ws, err := t.Workspace.orNew(plan, sh, &after)
	if err != nil {
		return fmt.Errorf("LaunchCUDA: %w", err)
	}
	ptrs["o_partial"], ptrs["lse_partial"] = uintptr(ws.oPartial), uintptr(ws.lsePartial)
	for _, buf := range b.calls[0].Buffers {
		if buf.Role == launch.Aux {
			ptrs[buf.Name] = t.Aux[buf.Key].Ptr
		}
	}
	for i, call := range b.calls {
		if err := d.Launch(ks[i], call, ptrs, s); err != nil {
			return fmt.Errorf("LaunchCUDA: %w", err)
		}
	}
	return nil
}

// afterStream is what an asynchronous launch frees once its stream is done
// with the buffers it made.
type afterStream []func()

// run waits for s, where there is anything to free, and frees it (a
// pointer receiver, so that a deferred run sees what was added later).
func (a *afterStream) run(s cuda.Stream) {
	if len(*a) == 0 {
		return
	}
	s.Synchronize()
	for _, f := range *a {
		f()
	}
}
