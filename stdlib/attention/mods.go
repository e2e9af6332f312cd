package attention

import "github.com/fac-compiler/fac/launch"

// The stdlib's mods (masks.fa, scores.fa) as values: what the tuned sets'
// conditions name (launch.ModIs) and what MaskForms declares forms of.
// TestModKinds checks each against its declaration.
const (
	MaskNone              launch.ModKind = "none"
	MaskCausal            launch.ModKind = "causal"
	MaskCausalBottomRight launch.ModKind = "causal_bottom_right"
	MaskSlidingWindow     launch.ModKind = "sliding_window"
	MaskPrefixLM          launch.ModKind = "prefix_lm"
	MaskDocument          launch.ModKind = "document"
	MaskDocumentSpans     launch.ModKind = "document_spans"
	MaskDocumentSpansKV   launch.ModKind = "document_spans_kv"
	MaskChunked           launch.ModKind = "chunked"
	MaskAnd               launch.ModKind = "and_masks"
	MaskOr                launch.ModKind = "or_masks"
	MaskNot               launch.ModKind = "not_mask"
	MaskNoop              launch.ModKind = "noop_mask"

	ScoreIdentity launch.ModKind = "identity"
	ScoreSoftcap  launch.ModKind = "softcap"
	ScoreAlibi    launch.ModKind = "alibi"
)

// MaskForm is a property a mask declares about what it computes, which
// the runtime may rely on to run it in another form with the same result.
// The stdlib declares its masks' forms in MaskForms; a user declares their
// own masks' through the Go API (fac.Options.MaskForms).
type MaskForm struct {
	// EqualIDs, when set, names the mask's aux tensor of integer ids over
	// positions (1-D) and declares that the mask keeps exactly the pairs
	// whose ids are equal, ids[q_idx] == ids[kv_idx], reading nothing
	// else. Where a call's ids come as runs (each id one run of
	// consecutive positions, as packed documents do), the runtime runs the
	// mask as spans: MaskDocumentSpans (a range of keys per query) in the
	// forward, MaskDocumentSpansKV in the backward, on the aux tensors
	// doc_start and doc_end made from the ids, the block mask unchanged
	// (docs/runtime.md, Declared mask forms).
	EqualIDs string
}

// MaskForms are the stdlib masks' declared forms.
var MaskForms = map[launch.ModKind]MaskForm{
	MaskDocument: {EqualIDs: "doc"},
}

// The stdlib masks that a mask declared with MaskForm.EqualIDs runs as
// where its ids are runs: by query (the forward's rows) and by key (the
// backward's), both reading the aux tensors SpanStart and SpanEnd.
const (
	SpansByQuery = MaskDocumentSpans
	SpansByKey   = MaskDocumentSpansKV
	SpanStart    = "doc_start"
	SpanEnd      = "doc_end"
)
