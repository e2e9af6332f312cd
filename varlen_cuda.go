package fac

import (
	"context"

	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/gpu"
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
	call, host, err := v.bind(in, heads, kvHeads)
	if err != nil {
		return nil, nil, err
	}
	k, err := d.Kernel(ctx, v.f.res, nil)
	if err != nil {
		return nil, nil, err
	}
	p, err := d.Prepare(k, call, host)
	if err != nil {
		return nil, nil, err
	}
	return runForOutputs(d, p)
}

// RunCUDAGrads runs the varlen backward on the GPU with host tensors
// (flash_bwd_preprocess, flash_bwd_varlen, flash_bwd_postprocess on the
// default stream; Δ, the dQ accumulator and the aux gradients stay on the
// device between them) and returns the gradients like RunCPU. Outputs are
// poisoned (NaN) before the launch.
func (bw *BackwardVarlen) RunCUDAGrads(ctx context.Context, d *CUDA, in VarlenBackwardInputs, heads, kvHeads int) (*Grads, error) {
	b, err := bw.bind(in, heads, kvHeads)
	if err != nil {
		return nil, err
	}
	if b.empty != nil {
		return b.empty, nil
	}
	steps := make([]gpu.Step, len(bw.stages))
	var grads []string
	for i, st := range bw.stages {
		k, err := d.Kernel(ctx, st.res, nil)
		if err != nil {
			return nil, err
		}
		steps[i] = gpu.Step{Kernel: k, Call: b.calls[i]}
		for _, buf := range b.calls[i].Buffers {
			if n, ok := b.gradLen[buf.Key]; ok && buf.Role == launch.Aux {
				b.host[buf.Name] = make([]float32, n) // zeroed: flash_bwd_varlen adds into it
				grads = append(grads, buf.Name)
			}
		}
	}
	seq, err := d.PrepareSequence(steps, b.host)
	if err != nil {
		return nil, err
	}
	return runGrads(d, seq, grads, false)
}
