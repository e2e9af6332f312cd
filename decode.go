package fac

import "github.com/fac-compiler/fac/flash"

// Decoding (docs/decoding.md): a forward call whose grid of q tiles is too
// small to fill the GPU (few query positions, long keys) runs
// flash_fwd_splitkv, which splits each tile's kv blocks over
// Options.NumSplits programs and packs the query heads of a GQA group into
// one tile (Options.PackGQA), then flash_fwd_combine, which merges the
// splits. Forward.Plan says which kernels a call runs.

// PackGQA chooses whether the query heads that share a kv head are packed
// into one tile's rows (one program reads each K/V block once for the
// whole group).
type PackGQA = flash.PackGQA

const (
	// PackGQAAuto packs when the query is short (SeqQ ≤ MaxPackSeqQ) and
	// there is more than one query head per kv head.
	PackGQAAuto = flash.PackGQAAuto
	// PackGQAOn always runs flash_fwd_splitkv with the group packed (for
	// Heads = KVHeads: the split kernel, one head per tile).
	PackGQAOn = flash.PackGQAOn
	// PackGQAOff never packs.
	PackGQAOff = flash.PackGQAOff
)

const (
	// DefaultSMs is the multiprocessor count the automatic split choice
	// assumes where the device does not give one (the CPU device): an
	// H200's 132.
	DefaultSMs = flash.DefaultSMs
	// MaxSplits is the most splits flash_fwd_combine merges (its
	// MAX_SPLITS).
	MaxSplits = flash.MaxSplits
	// MaxPackSeqQ is the longest query that PackGQAAuto packs.
	MaxPackSeqQ = flash.MaxPackSeqQ
)

// ParsePackGQA reads "auto" (or ""), "on" (or "true") and "off" (or
// "false"), in any case.
func ParsePackGQA(s string) (PackGQA, error) { return flash.ParsePackGQA(s) }

// ParseNumSplits reads a split count as the command line spells it: "auto"
// (Options.NumSplits 0) or 1 (no split) to MaxSplits. "0" is refused: on
// the command line, auto is spelled auto.
func ParseNumSplits(s string) (int, error) { return flash.ParseNumSplits(s) }

// DecodePlan is how a forward call runs (Forward.Plan): SplitKV says
// whether it runs flash_fwd_splitkv and flash_fwd_combine (else flash_fwd
// or flash_fwd_sinks alone), with NumSplits splits, Pack query heads per
// tile, the split kernel's tile (BlockM, BlockN, QPerTile), its number of
// Programs and the SMs the choice assumed. Kernels lists the kernels it
// launches; Forward.Reason says why, in words. Fields: flash.DecodePlan.
type DecodePlan = flash.DecodePlan

// PagedShape is the shape of a paged decoding call (Forward.RunPagedCPU,
// RunPagedCUDA, LaunchPagedCUDA): Batch sequences of SeqQ query positions,
// Heads and KVHeads, and the cache's PageSize keys per page. Fields:
// flash.PagedShape.
type PagedShape = flash.PagedShape

// PagedInputs are a paged call's host tensors: Q [B, H, Sq, D], KCache
// [num_pages, page_size, Hkv, D], VCache [num_pages, page_size, Hkv, Dv],
// PageTable [B, max_pages] and CacheSeqlens [B], with the run-time
// parameters, softmax scale and, for a forward with sinks, Sinks [H]. A
// call that appends has KNew [B, Sq, Hkv, D] and VNew [B, Sq, Hkv, Dv]
// (and, to rotate them and q, Rotary, RotaryDim, RotaryCos and RotarySin
// [positions, RotaryDim/2]): it writes them at each sequence's length,
// attends over the grown caches and updates KCache, VCache and
// CacheSeqlens in place (docs/decoding.md#appending-to-the-cache).
// Fields: flash.PagedInputs.
type PagedInputs = flash.PagedInputs

// PagedVarlenShape is the shape of a ragged continuous batch over a paged
// cache (Forward.RunPagedVarlenCPU, RunPagedVarlenCUDA,
// LaunchPagedVarlenCUDA): Batch sequences, Heads and KVHeads, and the
// cache's PageSize keys per page; each sequence's query count comes from
// the inputs' CuSeqlensQ. Fields: flash.PagedVarlenShape.
type PagedVarlenShape = flash.PagedVarlenShape

// PagedVarlenInputs are a ragged paged call's host tensors: Q [total_q, H,
// D] packed by CuSeqlensQ [B + 1] (decode rows of one query and prefill
// chunks side by side), the paged cache as PagedInputs' (KCache, VCache,
// PageTable, CacheSeqlens), which already holds the queries' keys:
// sequence b's n_q queries are its last n_q positions, and the mods see
// those positions as q_idx, with seqlen_q = seqlen_k = CacheSeqlens[b]
// (docs/decoding.md#ragged-batches). Scalars, Scale and Sinks as
// PagedInputs'. Fields: flash.PagedVarlenInputs.
type PagedVarlenInputs = flash.PagedVarlenInputs

// RotaryForm is the rotary embedding an appending paged call applies to q
// and the new keys at their positions (PagedInputs.Rotary).
type RotaryForm = flash.RotaryForm

const (
	// RotaryNone rotates nothing.
	RotaryNone = flash.RotaryNone
	// RotaryNeoX is GPT-NeoX's form (half-split): column i < R/2 pairs
	// with i + R/2, R the rotary dim; FlashAttention's
	// rotary_interleaved=False.
	RotaryNeoX = flash.RotaryNeoX
	// RotaryGPTJ is GPT-J's form (interleaved): column 2i pairs with
	// 2i + 1; FlashAttention's rotary_interleaved=True.
	RotaryGPTJ = flash.RotaryGPTJ
)

// ParseRotaryForm reads "none" (or ""), "neox" (or "half") and "gptj" (or
// "interleaved"), in any case.
func ParseRotaryForm(s string) (RotaryForm, error) { return flash.ParseRotaryForm(s) }

// RotaryTables are RoPE's tables for PagedInputs.RotaryCos and RotarySin
// (on the GPU, in the kernel's DType): [positions, rotaryDim/2], the angle
// of position p and pair i being p · base^(−2i/rotaryDim) (base 10000 in
// GPT-NeoX and Llama 2, 500000 in Llama 3). Both rotary forms take the
// same tables.
func RotaryTables(positions, rotaryDim int, base float64) (cos, sin []float32) {
	return flash.RotaryTables(positions, rotaryDim, base)
}
