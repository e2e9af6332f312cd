package flash

import (
	"context"
	"fmt"
	"slices"

	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cuda"
	"github.com/fac-compiler/fac/runtime/gpu"
)

// A variant's kernels on a GPU (variant.go binds them): loaded, uploaded
// with host data as one prepared call, or launched on device buffers with
// the variant's workspace.

// loadKernels finds (or builds) and loads ks on d.
func loadKernels(ctx context.Context, d *CUDA, ks []stage) ([]*gpu.Kernel, error) {
	out := make([]*gpu.Kernel, len(ks))
	for i, st := range ks {
		k, err := d.Kernel(ctx, st.res, nil)
		if err != nil {
			return nil, err
		}
		out[i] = k
	}
	return out, nil
}

// preparedCall is a host call uploaded to the GPU: one kernel
// (gpu.Prepared) or several (seqCall).
type preparedCall interface {
	Run(s cuda.Stream) error
	Output(name string) (any, error)
	Bench(warmup, reps int) ([]float64, error)
	Free()
}

// prepareCUDA loads ks on d and uploads a call of them (calls; host: the
// inputs by parameter name): one kernel alone, several as one sequence
// whose buffers stay on the device from kernel to kernel, which a
// benchmark checks for NaN in results (a variant's Results: not its
// workspace).
func prepareCUDA(ctx context.Context, d *CUDA, ks []stage, calls []*launch.Call, host map[string]any, results []string) (preparedCall, error) {
	gks, err := loadKernels(ctx, d, ks)
	if err != nil {
		return nil, err
	}
	if len(ks) == 1 {
		return d.Prepare(gks[0], calls[0], host)
	}
	steps := make([]gpu.Step, len(ks))
	for i := range ks {
		steps[i] = gpu.Step{Kernel: gks[i], Call: calls[i]}
	}
	seq, err := d.PrepareSequence(steps, host)
	if err != nil {
		return nil, err
	}
	return seqCall{seq, results}, nil
}

// seqCall is a sequence of kernels uploaded as one call.
type seqCall struct {
	*gpu.Sequence
	results []string
}

// Bench times the kernels as one and checks the results for NaN.
func (s seqCall) Bench(warmup, reps int) ([]float64, error) {
	return s.Sequence.Bench(warmup, reps, s.results...)
}

// launchAll launches calls of the loaded kernels ks in order on stream s,
// with the device buffers ptrs, by parameter name.
func launchAll(d *CUDA, ks []*gpu.Kernel, calls []*launch.Call, ptrs map[string]uintptr, s cuda.Stream) error {
	for i, call := range calls {
		if err := d.Launch(ks[i], call, ptrs, s); err != nil {
			return err
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

// workspace is a variant's buffers that pass from kernel to kernel
// (Variant.Workspace) on the device: f32, by parameter name.
type workspace struct {
	names []string
	ptrs  []cuda.DevicePtr
	lens  []int // elements
}

// workspaceLens are the elements of the buffers names for problem p: each
// one's extent in the first contract of cs that has it.
func workspaceLens(cs []*launch.Contract, names []string, p launch.Problem) ([]int, error) {
	lens := make([]int, len(names))
	for i, name := range names {
		j := 0
		for j < len(cs) && !hasTensor(cs[j], name) {
			j++
		}
		if j == len(cs) {
			return nil, fmt.Errorf("internal error: no kernel has workspace buffer %s", name)
		}
		var err error
		if lens[i], err = cs[j].Extent(name, p, nil); err != nil {
			return nil, err
		}
	}
	return lens, nil
}

// newWorkspace allocates buffers names of lens elements (at least one
// each), zeroed: a kernel's counters (launch.Tensor.Zeroed) start at 0
// here, once, and the kernel leaves them so.
func newWorkspace(names []string, lens []int) (*workspace, error) {
	w := &workspace{names: names, ptrs: make([]cuda.DevicePtr, len(names)), lens: lens}
	ps := make([]*cuda.DevicePtr, len(names))
	for i := range w.ptrs {
		ps[i] = &w.ptrs[i]
	}
	if err := allocF32s(ps, lens); err != nil {
		return nil, err
	}
	for i, p := range w.ptrs {
		if err := cuda.MemsetD8(p, 0, max(lens[i], 1)*4); err != nil {
			w.free()
			return nil, err
		}
	}
	return w, nil
}

// orNew is w when it holds lens elements of its buffers, else an error
// naming the call (what); a nil w is a workspace allocated for one launch,
// freed with after.
func (w *workspace) orNew(names []string, lens []int, what string, after *afterStream) (*workspace, error) {
	if w == nil {
		w, err := newWorkspace(names, lens)
		if err != nil {
			return nil, err
		}
		*after = append(*after, w.free)
		return w, nil
	}
	// A workspace may hold more buffers than the call needs (a paged
	// workspace holds an appending call's q), never fewer.
	if len(w.names) < len(names) || !slices.Equal(w.names[:len(names)], names) {
		return nil, fmt.Errorf("workspace holds %v, %s needs %v", w.names, what, names)
	}
	for i, n := range lens {
		if w.lens[i] < n {
			return nil, fmt.Errorf("workspace holds %v elements of %v, %s needs %v", w.lens, names, what, lens)
		}
	}
	return w, nil
}

// addPtrs adds the buffers to ptrs by parameter name.
func (w *workspace) addPtrs(ptrs map[string]uintptr) {
	for i, name := range w.names {
		ptrs[name] = uintptr(w.ptrs[i])
	}
}

// free releases the buffers.
func (w *workspace) free() {
	for i := range w.ptrs {
		freeAll(&w.ptrs[i])
	}
}

// allocF32s allocates n[i] float32s (at least one) at *ps[i], for each i;
// on a failure it frees what it allocated.
func allocF32s(ps []*cuda.DevicePtr, n []int) error {
	for i, p := range ps {
		var err error
		if *p, err = cuda.MemAlloc(max(n[i], 1) * 4); err != nil {
			freeAll(ps[:i]...)
			return err
		}
	}
	return nil
}

// freeAll frees the device buffers that are set and clears them.
func freeAll(ps ...*cuda.DevicePtr) {
	for _, p := range ps {
		if *p != 0 {
			cuda.MemFree(*p)
			*p = 0
		}
	}
}
