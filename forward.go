package fac

import "github.com/fac-compiler/fac/flash"

// Shape is an attention problem: Q is [Batch, Heads, SeqQ, Dim], K [Batch,
// KVHeads, SeqK, Dim], V [Batch, KVHeads, SeqK, DimV] and O [Batch, Heads,
// SeqQ, DimV] (KVHeads = Heads unless grouped-query, 0 means Heads; DimV,
// V's head dim, 0 means Dim: DeepSeek's Dim 192, DimV 128).
type Shape = flash.Shape

// Options choose the kernel instance:
//   - Mask and Score are the mods, e.g. "causal", "sliding_window(256, 0)",
//     "softcap(30.0)" ("": no mask, identity score); Sources holds the
//     caller's own source files (name → text) defining mods; MaskForms
//     declares forms of the caller's masks that the runtime may rely on
//     (MaskForm).
//   - Consts are other compile-time arguments (BLOCK_M: "32"); DType is the
//     element type of Q, K, V and O: f32 (default), bf16 or f16; DimV is the
//     head dim of V and O where it differs from Q's and K's (the kernels'
//     HEAD_DIM_V; 0: the same); Passes steers the tile pass pipeline.
//   - Target is the GPU target: its Arch (e.g. "sm_90a") picks the tile
//     arguments tuned for that GPU ("": the kernel's defaults, and the
//     device's arch at run time), its switches (wgmma, tma, ...) the code;
//     switches left at their defaults take the environment's (Env).
//   - Sinks compiles flash_fwd_sinks: per-head sink logits join the softmax
//     denominator; calls then need Inputs.Sinks.
//   - NumSplits, PackGQA, SMs and DecodeConsts steer decoding, split-KV
//     (docs/decoding.md): 0 splits means auto, 1 off.
//
// Every field is documented at flash.Options.
type Options = flash.Options

// Forward is a compiled forward kernel for one head dimension. Its methods:
//   - RunCPU, RunCPUContext: run on the CPU reference device, returning O
//     ([B, H, SeqQ, DimV]) and LSE ([B, H, SeqQ], natural log);
//   - RunCUDA, RunCUDAContext, BenchCUDA: run (or time) on a GPU with host
//     tensors; LaunchCUDA: launch on device buffers (DeviceTensors) on a
//     stream, with NewWorkspace for split-KV's partial outputs;
//   - BuildBlockMask, BuildBlockMaskCUDA: the mask's block mask for a shape;
//     CountPairs: the pairs the mask keeps;
//   - Plan, Reason, DecodeKernels: how a call runs (split-KV or not), and why;
//     PlanCUDA: the plan on a device, flash_fwd alone where it cannot have a
//     split-KV kernel (a bundle built with --num-splits 1);
//   - RunPagedCPU, RunPagedCUDA, BenchPagedCUDA, PagedReference, PagedPlan:
//     decoding over a paged KV cache (PagedInputs, PagedShape), appending
//     new keys and values first where the inputs have them (rotated:
//     RotaryForm), PagedAppendReference: the cache such a call leaves;
//     LaunchPagedCUDA on device buffers (PagedDeviceTensors), with
//     NewPagedWorkspace; BundlePagedKernels: its kernels for a bundle;
//   - RunPagedVarlenCPU, RunPagedVarlenCUDA, BenchPagedVarlenCUDA,
//     PagedVarlenReference, PagedVarlenReferenceRows, PagedVarlenPlan:
//     ragged continuous batches over the paged cache, decode rows and
//     prefill chunks in one launch (PagedVarlenInputs, PagedVarlenShape);
//     LaunchPagedVarlenCUDA on device buffers (PagedVarlenDeviceTensors),
//     with NewPagedVarlenWorkspace;
//   - Reference, ReferenceRows: float64 attention with the same mods;
//   - AuxTensors, RuntimeParams: the names Inputs.Aux and Inputs.Scalars
//     must hold; Options, HasSinks, Mask, Score, Module, Result: what was
//     compiled; FullVariant: the mask-free variant; BundleKernels: the
//     kernels an AOT bundle needs.
//
// Each method is documented at flash.Forward.
type Forward = flash.Forward

// CompileForward compiles flash_fwd (flash_fwd_sinks with Options.Sinks)
// for head dimension dim (Q's and K's; V's is Options.DimV, or dim; each 1
// to 256: on the GPU a dim that is not a power of two is computed in the
// next one, its extra lanes masked) with the mods and
// compile-time arguments of opts. Options no kernel can be built or run
// with (an unknown Target.Arch, SMs, NumSplits or PackGQA out of range, a
// DType other than f32, bf16 and f16, Consts that contradict DType, dim or
// DimV) are refused before anything is compiled.
func CompileForward(opts Options, dim int) (*Forward, error) {
	return flash.CompileForward(opts, dim)
}

// Inputs are the tensors of one forward call, contiguous row-major: Q, K, V
// as Shape says. Aux holds the mods' aux tensors by name ("doc" → []int32,
// "slopes" → []float32; "mask.doc" also works), as flat slices or Arrays;
// Scalars the mods' run-time parameters by name ("offset" → 5). Scale 0
// means 1/sqrt(Dim). BlockMask, when set, is the block mask to use; else
// one is built for each call. Sinks are the per-head sink logits [Heads] of
// a kernel compiled with Options.Sinks, nil otherwise. The accepted element
// types are listed at flash.Inputs.
type Inputs = flash.Inputs

// Array is an N-D host array for Inputs.Aux: a flat row-major slice and its
// shape, e.g. Array{Shape: []int{2, 1024}, Data: docIDs} for an aux tensor
// declared tensor[i32][batch, seqlen_q].
type Array = flash.Array

// RefRow names one query row of a problem (batch B, head H, position I),
// for Forward.ReferenceRows.
type RefRow = flash.RefRow

// MaskForm is a form a mask declares (Options.MaskForms), which the runtime
// may rely on to run it otherwise with the same result: a mask with
// EqualIDs (ids[q_idx] == ids[kv_idx]) runs as spans where its ids are
// runs, as the stdlib's document does (docs/runtime.md, Declared mask
// forms).
type MaskForm = flash.MaskForm

// DocumentSpans gives each position i of document ids doc the run of equal
// ids holding it, [start[i], end[i]): the aux tensors doc_start and doc_end
// of the stdlib's document_spans and document_spans_kv. ok is false when
// some id has positions in two runs (then doc[q] == doc[kv] is no span
// test).
func DocumentSpans(doc []int32) (start, end []int32, ok bool) { return flash.DocumentSpans(doc) }

// ArchFallback says, for a GPU arch fac knows, when it runs another arch's
// code path rather than its own (sm_89 and the archs past Hopper run
// sm_80's mma.sync path; sm_90 runs without wgmma): "" when the arch runs
// its own, or is unknown.
func ArchFallback(arch string) string { return flash.ArchFallback(arch) }
