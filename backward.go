package fac

import "github.com/fac-compiler/fac/flash"

// Backward is the compiled backward pass of attention for one head
// dimension, with the same mods as the forward (docs/backward.md): the
// stdlib kernels flash_bwd_preprocess (Δ = rowsum(dO∘O)), flash_bwd (dK,
// dV; dQ through f32 atomics) and flash_bwd_postprocess (dQ), or, with the
// compile-time argument DETERMINISTIC=true, flash_bwd_dq in place of the
// atomics and the postprocess, so that every run gives the same bits.
// Compiled with Options.Sinks, it also runs flash_bwd_sinks, the gradient
// of the sink logits (Grads.DSinks). Its methods:
//   - RunCPU, RunCPUGrads: run on the CPU reference device;
//   - RunCUDA, RunCUDAGrads, BenchCUDA: run (or time) on a GPU with host
//     tensors; LaunchCUDA: launch on device buffers
//     (BackwardDeviceTensors), with NewWorkspace for Δ and the dQ
//     accumulator;
//   - BlockMask: the block mask of a shape, as the forward builds it;
//   - Reference: float64 gradients with the same mods;
//   - AuxTensors, AuxGrads: the aux tensors the mods read, and those that
//     get gradients; Deterministic, HasSinks, Kernels: what was compiled;
//     BundleKernels: the kernels an AOT bundle needs.
//
// Each method is documented at flash.Backward.
type Backward = flash.Backward

// CompileBackward compiles the backward kernels for head dimension dim
// (V's: opts.DimV, or dim). opts are the forward's: Mask, Score, Sources,
// DType, DimV and Passes apply to every kernel; each of Consts goes to the kernels that declare it
// (BLOCK_M, BLOCK_N, SPARSE_Q, SPARSE_K, DETERMINISTIC, AUX_GRAD,
// fold_scale), and one that no backward kernel declares is an error. The
// block sizes SPARSE_Q × SPARSE_K must be the forward's for a block mask to
// serve both. opts.Sinks adds flash_bwd_sinks (calls then need
// BackwardInputs.Sinks): dQ, dK and dV need no other change, since the
// forward's LSE includes the sink.
func CompileBackward(opts Options, dim int) (*Backward, error) {
	return flash.CompileBackward(opts, dim)
}

// BackwardInputs are the tensors of one backward call, contiguous
// row-major: Q, K, V, Aux, Scalars, Scale and BlockMask as given to the
// forward; O ([B, H, SeqQ, DimV]) and LSE ([B, H, SeqQ], natural log) as it
// returned them; DO = dL/dO, shaped like O. Sinks are the forward's sink
// logits ([Heads]) for a backward compiled with Options.Sinks, and must be
// nil otherwise.
type BackwardInputs = flash.BackwardInputs

// Grads are the gradients of one backward call: DQ like Q, DK and DV like
// K and V (summed over the query heads of a group), DAux, by name, the
// gradients of the score mod's float aux tensors (as long as each tensor),
// and DSinks ([Heads]) the gradients of the sink logits (nil without
// Options.Sinks).
type Grads = flash.Grads
