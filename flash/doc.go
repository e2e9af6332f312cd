// Package flash implements fac's Go API: it compiles the stdlib's
// FlashAttention kernels with the caller's mask_mod and score_mod inlined,
// binds calls under the kernels' launch contracts and runs them on the CPU
// reference device (runtime/cpu) or on NVIDIA GPUs (runtime/gpu).
//
// Programs import the root package fac, which names every exported type,
// function and constant of this package (its types are aliases of these,
// so methods and fields are documented here). This package is one piece:
// the forward, backward, varlen, split-KV and paged paths share the block
// masks and their checks, the checks of the mods' aux tensors and run-time
// parameters, the recompiles tuned per GPU arch and the span forms of
// document masks.
//
// Where things are:
//   - variant.go, variant_cuda.go: every kernel variant
//     (stdlib/attention.Variant) compiled, bound, run on the CPU device,
//     uploaded and launched on a GPU the same way; the files below hold
//     each variant's calling convention (inputs, checks, block mask, plan).
//   - forward.go: Options, Inputs, Forward (CompileForward, RunCPU, block
//     masks and their checks); decode.go, decode_cuda.go: split-KV and
//     PackGQA (Forward.Plan, flash_fwd_splitkv + flash_fwd_combine);
//     paged.go, paged_cuda.go: the paged KV cache (flash_fwd_paged);
//     paged_append.go: appending to it, with rotary embeddings (kv_append
//     first, then the paged kernels).
//   - backward.go, backward_cuda.go: Backward (flash_bwd_preprocess,
//     flash_bwd, flash_bwd_postprocess or flash_bwd_dq, flash_bwd_sinks).
//   - varlen.go, varlen_blockmask.go, varlen_cuda.go, backward_varlen.go:
//     packed sequences (ForwardVarlen, BackwardVarlen, VarlenBlockMask).
//   - cuda.go: the GPU (CUDA, RunCUDA, LaunchCUDA, device block masks,
//     per-arch tuned recompiles, bundles).
//   - reference.go, referencerows.go, backward_reference.go: float64
//     references with the same mods, for checking any device.
//   - document_spans.go: masks run as spans where their ids are runs
//     (MaskForm); createblockmask.go: CreateBlockMask.
//   - environment.go: the one place that reads environment variables;
//     options_check.go: the checks of Options; halfslices.go: bf16/f16.
package flash
