package flash

import (
	"context"
	"fmt"

	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cuda"
	"github.com/fac-compiler/fac/runtime/gpu"
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
// else flash_fwd_splitkv at every tile height a plan picks (16 and 64
// rows, or DecodeConsts' BLOCK_M) and flash_fwd_combine at every width.
func (f *Forward) decodeResults() ([]*compiler.Result, error) {
	if !f.splitKVCapable() || (f.opts.NumSplits == 1 && f.opts.PackGQA == PackGQAOff) {
		return nil, nil
	}
	heights := []int{16, maxBlockM}
	bm, user, err := f.splitBlockM(1, 1)
	if err != nil {
		return nil, err
	}
	if user {
		heights = []int{bm}
	}
	var out []*compiler.Result
	for _, bm := range heights {
		r, err := f.splitKernel(bm)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
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
	for i, r := range rs {
		if out[i], err = d.Kernel(ctx, r, nil); err != nil {
			return out, err
		}
	}
	return out, nil
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
	seq, err := d.PrepareSequence([]gpu.Step{{Kernel: ks[0], Call: b.calls[0]}, {Kernel: ks[1], Call: b.calls[1]}}, b.hostData(in))
	if err != nil {
		return nil, err
	}
	return seqCall{seq}, nil
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
	no, nl := workspaceLens(plan, sh)
	w := &ForwardWorkspace{nO: no, nLSE: nl}
	if err := allocF32s([]*cuda.DevicePtr{&w.oPartial, &w.lsePartial}, []int{no, nl}); err != nil {
		return nil, err
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
	var cleanup []func()
	defer func() {
		if len(cleanup) > 0 {
			s.Synchronize()
			for _, f := range cleanup {
				f()
			}
		}
	}()
	if b.bm != dm.Mask {
		// PackGQA over a block mask per query head: the union over each
		// group's heads, for this call.
		pm, err := d.UploadBlockMask(b.bm)
		if err != nil {
			return err
		}
		cleanup = append(cleanup, pm.Free)
		for name, p := range pm.ptrs {
			ptrs[name] = p
		}
	}
	ws := t.Workspace
	no, nl := workspaceLens(plan, sh)
	if ws == nil {
		ws = &ForwardWorkspace{nO: no, nLSE: nl}
		cleanup = append(cleanup, ws.Free)
		if err := allocF32s([]*cuda.DevicePtr{&ws.oPartial, &ws.lsePartial}, []int{no, nl}); err != nil {
			return err
		}
	} else if ws.nO < no || ws.nLSE < nl {
		return fmt.Errorf("LaunchCUDA: workspace holds %d and %d elements, %d splits of shape %+v need %d and %d", ws.nO, ws.nLSE, plan.NumSplits, sh, no, nl)
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
