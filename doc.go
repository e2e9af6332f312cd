// Package fac compiles FlashAttention kernels whose masks are your code,
// and runs them. A mask_mod (and optionally a score_mod) is written in
// fac's tile language with FlexAttention's semantics, or taken from the
// stdlib (causal, sliding_window(left, right), document, prefix_lm(n),
// chunked(n), softcap(c), alibi, ...). CompileForward inlines it into the
// stdlib's flash_fwd kernel and optimizes the result; a Forward runs on
// the CPU reference device (RunCPU, an interpreter of the tile IR) or on
// an NVIDIA GPU (RunCUDA with host slices, LaunchCUDA with device
// pointers), compiled through LLVM's NVPTX back end or loaded from an AOT
// bundle.
//
//	fwd, err := fac.CompileForward(fac.Options{Mask: "sliding_window(255, 0)"}, 64)
//	if err != nil {
//		return err
//	}
//	sh := fac.Shape{Batch: 1, Heads: 4, SeqQ: 512, SeqK: 512, Dim: 64}
//	// q, k, v: []float32 of [Batch, Heads, Seq, Dim], row-major.
//	o, lse, err := fwd.RunCPU(fac.Inputs{Q: q, K: k, V: v}, sh)
//
// The rest of the API follows that pattern:
//   - CompileBackward: dQ, dK, dV, and the gradients of a score's aux
//     tensors and of sinks (docs/backward.md).
//   - CompileForwardVarlen, CompileBackwardVarlen: packed sequences of
//     different lengths, FlashAttention's varlen API (docs/varlen.md).
//   - Options.NumSplits and Options.PackGQA: decoding with split-KV,
//     chosen per call by Forward.Plan (docs/decoding.md).
//   - Options.Sinks: learnable per-head attention sinks.
//   - Block masks: CreateBlockMask, Forward.BuildBlockMask,
//     Inputs.BlockMask (docs/blockmask.md).
//   - Forward.Reference, Backward.Reference: float64 attention with the
//     same mods, the yardstick for any device's output.
//   - OpenCUDA, Env: the GPU and the environment variables
//     (docs/runtime.md).
//
// Mods from the caller's own source go in Options.Sources; the language is
// described in docs/language.md, and examples/ holds whole programs.
//
// This package names the API and documents it in outline. Its types are
// aliases of package flash's (github.com/fac-compiler/fac/flash), which
// implements it and documents every method and field; its functions call
// flash's.
package fac
