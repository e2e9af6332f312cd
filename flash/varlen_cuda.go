package flash

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/fac-compiler/fac/stdlib/attention"
)

// RunCUDA runs the varlen kernel on the GPU with host tensors and returns
// O and LSE like RunCPU (the block mask is built, or taken from in, on the
// host). Outputs are poisoned (NaN) before the launch.
func (v *ForwardVarlen) RunCUDA(d *CUDA, in VarlenInputs, heads, kvHeads int) (o, lse []float32, err error) {
	return v.RunCUDAContext(context.Background(), d, in, heads, kvHeads)
}

// RunCUDAContext is RunCUDA whose compile (llc, when the kernel is in no
// bundle or cache) stops once ctx is done.
func (v *ForwardVarlen) RunCUDAContext(ctx context.Context, d *CUDA, in VarlenInputs, heads, kvHeads int) (o, lse []float32, err error) {
	p, err := v.prepare(ctx, d, in, heads, kvHeads)
	if err != nil {
		return nil, nil, err
	}
	return runForOutputs(d, p)
}

// BenchCUDA times the varlen kernel on the GPU (CUDA events, warmup
// untimed launches, then reps timed ones) and returns each timed launch's
// milliseconds. Inputs and outputs stay on the device throughout.
func (v *ForwardVarlen) BenchCUDA(d *CUDA, in VarlenInputs, heads, kvHeads, warmup, reps int) ([]float64, error) {
	p, err := v.prepare(context.Background(), d, in, heads, kvHeads)
	if err != nil {
		return nil, err
	}
	defer p.Free()
	return p.Bench(warmup, reps)
}

// prepare finds the kernel tuned for d (tuned), binds a call (building the
// block mask on the host unless in has one) and uploads it.
func (v *ForwardVarlen) prepare(ctx context.Context, d *CUDA, in VarlenInputs, heads, kvHeads int) (preparedCall, error) {
	v, err := v.tuned(d.Arch)
	if err != nil {
		return nil, err
	}
	calls, host, err := v.bind(in, heads, kvHeads)
	if err != nil {
		return nil, err
	}
	return prepareCUDA(ctx, d, v.f.kernels(), calls, host, attention.ForwardVarlen.Results)
}

// RunCUDAGrads runs the varlen backward on the GPU with host tensors
// (flash_bwd_preprocess, flash_bwd_varlen, flash_bwd_postprocess on the
// default stream; Δ, the dQ accumulator and the aux gradients stay on the
// device between them) and returns the gradients like RunCPU. Outputs are
// poisoned (NaN) before the launch.
func (bw *BackwardVarlen) RunCUDAGrads(ctx context.Context, d *CUDA, in VarlenBackwardInputs, heads, kvHeads int) (*Grads, error) {
	p, grads, empty, err := bw.prepare(ctx, d, in, heads, kvHeads)
	if err != nil || empty != nil {
		return empty, err
	}
	return runGrads(d, p, grads, false)
}

// BenchCUDA times the varlen backward (its three kernels, in order) with
// CUDA events: warmup runs, then reps timed ones; it returns each run's
// milliseconds. Inputs and outputs stay on the device throughout.
func (bw *BackwardVarlen) BenchCUDA(d *CUDA, in VarlenBackwardInputs, heads, kvHeads, warmup, reps int) ([]float64, error) {
	p, _, empty, err := bw.prepare(context.Background(), d, in, heads, kvHeads)
	switch {
	case err != nil:
		return nil, err
	case empty != nil:
		return nil, fmt.Errorf("%s: no query to time", attention.FlashBwdVarlen.Kernel)
	}
	defer p.Free()
	return p.Bench(warmup, reps)
}

// prepare finds the kernels tuned for d, binds the call and uploads it,
// the aux gradients zeroed (their names, sorted); a call with no query
// gives its zero gradients (empty) instead.
func (bw *BackwardVarlen) prepare(ctx context.Context, d *CUDA, in VarlenBackwardInputs, heads, kvHeads int) (p preparedCall, grads []string, empty *Grads, err error) {
	bw, err = bw.tuned(d.Arch)
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := bw.bind(in, heads, kvHeads)
	if err != nil {
		return nil, nil, nil, err
	}
	if b.empty != nil {
		return nil, nil, b.empty, nil
	}
	zero := zeroGrads(&b.bound)
	maps.Copy(b.host, zero)
	p, err = prepareCUDA(ctx, d, bw.stages, b.calls, b.host, attention.BackwardVarlen.Results)
	return p, slices.Sorted(maps.Keys(zero)), nil, err
}

// tuned is the varlen forward the GPU of arch runs: v compiled again with
// Options.Target.Arch = arch when v names no arch and flash_fwd_varlen's contract
// tunes tile arguments for arch, else v (as Forward.tuned).
func (v *ForwardVarlen) tuned(arch string) (*ForwardVarlen, error) {
	return retune(&v.tunedFor, v, v.f.opts, arch, func(opts Options) (*ForwardVarlen, error) {
		g, err := CompileForwardVarlen(opts, v.f.dim)
		if err != nil || maps.Equal(g.f.res.Ident.Consts, v.f.res.Ident.Consts) {
			return v, err
		}
		return g, nil
	})
}

// tuned is the varlen backward the GPU of arch runs: bw compiled again
// with Options.Target.Arch = arch when bw names no arch and flash_bwd_varlen's
// contract tunes its tiles for arch, else bw (as Backward.tuned).
func (bw *BackwardVarlen) tuned(arch string) (*BackwardVarlen, error) {
	return retune(&bw.tunedFor, bw, bw.opts, arch, func(opts Options) (*BackwardVarlen, error) {
		g, err := CompileBackwardVarlen(opts, bw.dim)
		if err != nil || maps.Equal(g.stages[1].res.Ident.Consts, bw.stages[1].res.Ident.Consts) {
			return bw, err
		}
		return g, nil
	})
}
