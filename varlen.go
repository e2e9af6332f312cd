package fac

import "github.com/fac-compiler/fac/flash"

// Packed sequences of different lengths, FlashAttention's varlen API
// (docs/varlen.md): Q is [total_q, Heads, Dim], K [total_k, KVHeads, Dim],
// V [total_k, KVHeads, DimV] (Options.DimV, else Dim), and cu_seqlens say
// where each sequence starts.

// ForwardVarlen is a compiled flash_fwd_varlen: attention over packed
// sequences of different lengths. Mods see positions within their
// sequence, b = the sequence index, and that sequence's seqlen_q and
// seqlen_k. It is block-sparse per sequence: each sequence has its own
// block mask (VarlenBlockMask), so empty blocks are skipped and the mask is
// evaluated on partial blocks only. Its methods: RunCPU, RunCPUContext (O
// [total_q, Heads, DimV] and LSE [Heads, total_q]), RunCUDA, RunCUDAContext,
// BenchCUDA, BlockMask, Reference, AuxTensors, RuntimeParams, Result and
// BundleKernels, documented at flash.ForwardVarlen.
type ForwardVarlen = flash.ForwardVarlen

// CompileForwardVarlen compiles flash_fwd_varlen for head dimension dim
// (V's: opts.DimV, or dim). opts.Sinks is not supported yet, nor are aux tensors shaped by the
// sequence lengths. SPARSE_Q and SPARSE_K (opts.Consts, default 128) are
// the blocks of each sequence's block mask.
func CompileForwardVarlen(opts Options, dim int) (*ForwardVarlen, error) {
	return flash.CompileForwardVarlen(opts, dim)
}

// BackwardVarlen is the backward pass of ForwardVarlen: flash_bwd_preprocess
// and flash_bwd_postprocess on the packed tensors seen as one batch of
// total_q positions, and between them flash_bwd_varlen, flash_bwd's
// block-sparse walk over each sequence's transposed block mask (the same
// VarlenBlockMask as the forward's). dQ goes through f32 atomics; there is
// no DETERMINISTIC mode yet. Its methods: RunCPU, RunCPUContext,
// RunCUDAGrads, BlockMask, Reference, AuxTensors, AuxGrads, Kernels and
// BundleKernels, documented at flash.BackwardVarlen.
type BackwardVarlen = flash.BackwardVarlen

// CompileBackwardVarlen compiles the varlen backward kernels for head
// dimension dim (V's: opts.DimV, or dim), with the forward's opts (Mask,
// Score, Sources, DType, DimV, Passes; Consts to the kernels that declare
// them). SPARSE_Q × SPARSE_K
// must be the forward's for one VarlenBlockMask to serve both.
func CompileBackwardVarlen(opts Options, dim int) (*BackwardVarlen, error) {
	return flash.CompileBackwardVarlen(opts, dim)
}

// VarlenInputs are a varlen call's tensors, contiguous row-major: Q is
// [total_q, Heads, Dim], K [total_k, KVHeads, Dim] and V [total_k,
// KVHeads, DimV] (Options.DimV, else Dim); sequence b is
// rows CuSeqlensQ[b] .. CuSeqlensQ[b+1] of Q (CuSeqlensK for K and V),
// both [num_seqs + 1], from 0, non-decreasing. Aux, Scalars and Scale are
// Inputs'; mods index aux tensors with positions within the sequence.
// BlockMask, when set, is the call's block mask (ForwardVarlen.BlockMask
// for the same cu_seqlens, heads, mask and run-time parameters, reused
// across calls); nil builds one per call.
type VarlenInputs = flash.VarlenInputs

// VarlenBackwardInputs are a varlen backward call's tensors: the forward's
// inputs (VarlenInputs), O ([total_q, H, DimV]) and LSE ([H, total_q]) as the
// forward returned them, and DO = dL/dO, shaped like O.
type VarlenBackwardInputs = flash.VarlenBackwardInputs

// VarlenBlockMask is the block mask of a varlen call: every sequence's own,
// built for its lengths and concatenated, in both directions (for the
// forward and the backward), in O(blocks) host work. It records what it
// was built for (cu_seqlens, heads, mask, block sizes, the mask's run-time
// parameters), and a call with anything else refuses it. Counts, Blocks
// and EvaluatedSequences describe it; see flash.VarlenBlockMask.
type VarlenBlockMask = flash.VarlenBlockMask

// VarlenShape checks cu_seqlens against the packed lengths (totalQ and
// totalK tokens) and gives the problem's shape: Batch sequences, SeqQ and
// SeqK the longest (at least 1, which a shape needs). It allocates nothing, so
// callers check a call with it before they allocate its tensors: heads,
// kv heads and dim must be positive, and the packed tensors
// ([total, heads, dim]) and the padded problem ([num_seqs, heads,
// longest, dim]) addressable with 32-bit offsets. V's head dim is dim: a
// call with another (Options.DimV) sets the shape's DimV.
func VarlenShape(cuQ, cuK []int32, totalQ, totalK, heads, kvHeads, dim int) (Shape, error) {
	return flash.VarlenShape(cuQ, cuK, totalQ, totalK, heads, kvHeads, dim)
}
