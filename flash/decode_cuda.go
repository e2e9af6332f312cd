package flash

import (
	"context"
	"errors"
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

// decodeResults are the split-KV kernels a bundle of f needs: none when
// Options turn split-KV and PackGQA off or the kernel has no split-KV form,
// else flash_fwd_splitkv at every tile height a plan picks (splitHeights)
// and, unless it merges in place (fused_combine), flash_fwd_combine at
// every width.
func (f *Forward) decodeResults() ([]*compiler.Result, error) {
	if !f.splitKVCapable() || (f.opts.NumSplits == 1 && f.opts.PackGQA == PackGQAOff) {
		return nil, nil
	}
	v := attention.SplitKV
	if f.opts.fusedCombine() {
		v = attention.SplitKVFused
	}
	return f.splitFamilyResults(v, 0)
}

// splitFamilyResults are the kernels of split-KV variant v that its plans
// can pick: its split kernel at every tile height, with each of tilePages
// (flash_fwd_paged's TILE_PAGES), and flash_fwd_combine at every width
// unless v merges in place.
func (f *Forward) splitFamilyResults(v *attention.Variant, tilePages ...int) ([]*compiler.Result, error) {
	out, err := f.splitKernels(v, tilePages...)
	if err != nil || v.InPlace {
		return out, err
	}
	comb, err := f.combineResults()
	if err != nil {
		return nil, err
	}
	return append(out, comb...), nil
}

// splitKernels are split-KV variant v's split kernel at every tile height
// its plans can pick, with each of tilePages.
func (f *Forward) splitKernels(v *attention.Variant, tilePages ...int) ([]*compiler.Result, error) {
	heights, err := f.splitHeights()
	if err != nil {
		return nil, err
	}
	cs, err := v.Kernels(attention.VariantOptions{})
	if err != nil {
		return nil, err
	}
	var out []*compiler.Result
	for _, bm := range heights {
		for _, pt := range tilePages {
			r, err := f.splitFamilyKernel(cs[0], bm, pt)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
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

// ForwardWorkspace is split-KV's scratch memory on the device: the partial
// outputs o_partial ([splits, B, H, SeqQ, DimV]) and lse_partial ([splits,
// B, H, SeqQ]), f32. One workspace serves every launch whose partial
// outputs are no larger, on one stream at a time.
type ForwardWorkspace struct{ w *workspace }

// NewWorkspace allocates a workspace for launches of shape sh on d (of its
// Plan there; an empty one when the plan does not split).
func (f *Forward) NewWorkspace(d *CUDA, sh Shape) (*ForwardWorkspace, error) {
	plan, err := f.Plan(sh, d.SMs())
	if err != nil {
		return nil, err
	}
	return newForwardWorkspace(plan, sh)
}

// newForwardWorkspace allocates the partial outputs of plan on shape sh.
func newForwardWorkspace(plan DecodePlan, sh Shape) (*ForwardWorkspace, error) {
	return newForwardWorkspaceFor(plan, launch.Problem{Shape: sh, NumSplits: plan.NumSplits})
}

// newForwardWorkspaceFor allocates the partial outputs of plan for its
// split kernel's problem p.
func newForwardWorkspaceFor(plan DecodePlan, p launch.Problem) (*ForwardWorkspace, error) {
	v, lens, err := workspaceFor(plan, p)
	if err != nil {
		return nil, err
	}
	w, err := newWorkspace(v.Workspace, lens)
	if err != nil {
		return nil, err
	}
	return &ForwardWorkspace{w}, nil
}

// orNew is w's buffers when they hold plan's partial outputs on shape sh,
// else an error; a nil w is a workspace allocated for one launch, freed
// with after.
func (w *ForwardWorkspace) orNew(plan DecodePlan, sh Shape, after *afterStream) (*workspace, error) {
	return w.orNewFor(plan, launch.Problem{Shape: sh, NumSplits: plan.NumSplits}, fmt.Sprintf("shape %+v in %d splits", sh, plan.NumSplits), after)
}

// orNewFor is orNew for plan's split kernel's problem p, a call that what
// names in errors.
func (w *ForwardWorkspace) orNewFor(plan DecodePlan, p launch.Problem, what string, after *afterStream) (*workspace, error) {
	v, lens, err := workspaceFor(plan, p)
	if err != nil {
		return nil, err
	}
	var ws *workspace
	if w != nil {
		ws = w.w
	}
	return ws.orNew(v.Workspace, lens, what, after)
}

// Free releases the workspace.
func (w *ForwardWorkspace) Free() { w.w.free() }

// workspaceOf is plan's variant and the elements of its workspace buffers
// on shape sh (0 without split-KV).
func workspaceOf(plan DecodePlan, sh Shape) (*attention.Variant, []int, error) {
	return workspaceFor(plan, launch.Problem{Shape: sh, NumSplits: plan.NumSplits})
}

// workspaceFor is workspaceOf for the split kernel's problem p (a ragged
// call's has TotalQ).
func workspaceFor(plan DecodePlan, p launch.Problem) (*attention.Variant, []int, error) {
	v := plan.variant()
	if !plan.SplitKV {
		return v, make([]int, len(v.Workspace)), nil
	}
	cs, err := v.Kernels(attention.VariantOptions{})
	if err != nil {
		return nil, nil, err
	}
	lens, err := workspaceLens(cs, v.Workspace, p)
	return v, lens, err
}

// PlanCUDA is the plan a call of shape sh runs on d: Plan's, or flash_fwd
// alone where d cannot have a split-KV kernel of it (withFallback).
func (f *Forward) PlanCUDA(d *CUDA, sh Shape) (DecodePlan, error) {
	t, err := f.tuned(d.Arch)
	if err != nil {
		return DecodePlan{}, err
	}
	return t.planCUDA(context.Background(), d, sh)
}

func (f *Forward) planCUDA(ctx context.Context, d *CUDA, sh Shape) (DecodePlan, error) {
	plan, err := f.Plan(sh, d.SMs())
	if err != nil {
		return plan, err
	}
	return f.withFallback(plan, func(r *compiler.Result) error {
		_, err := d.Kernel(ctx, r, nil)
		return err
	})
}

// withFallback is plan, or flash_fwd alone where the device cannot have
// one of plan's split-KV kernels (have says so with a
// *gpu.UnavailableError) and f was not told to split (NumSplits > 1,
// PackGQAOn): a bundle built with --num-splits 1 then runs the call it
// holds a kernel for. Told to split, the error says what to add.
func (f *Forward) withFallback(plan DecodePlan, have func(*compiler.Result) error) (DecodePlan, error) {
	if !plan.SplitKV {
		return plan, nil
	}
	rs, err := f.DecodeKernels(plan)
	if err != nil {
		return plan, err
	}
	for _, r := range rs {
		err := have(r)
		var missing *gpu.UnavailableError
		if err == nil {
			continue
		}
		if !errors.As(err, &missing) {
			return plan, err
		}
		if f.opts.NumSplits > 1 || f.opts.PackGQA == PackGQAOn {
			return plan, fmt.Errorf("%w; this call's plan, %s, needs it: bundle the split-KV kernels (fac build without --num-splits 1 or --pack-gqa off), or ask for NumSplits 1 and PackGQA off", err, plan)
		}
		return DecodePlan{NumSplits: 1, Pack: 1, SMs: plan.SMs,
			Fallback: fmt.Sprintf("the split-KV plan's %s is in no bundle and cannot be compiled here; bundle it (fac build without --num-splits 1) to decode faster", r.Kernel)}, nil
	}
	return plan, nil
}
