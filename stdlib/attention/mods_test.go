package attention_test

import (
	"strings"
	"testing"

	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/parser"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// TestModKinds: each stdlib mod value names a mod of its role declared in
// the stdlib, and each declared mask form an integer aux tensor of its
// mask (the span forms read SpanStart and SpanEnd).
func TestModKinds(t *testing.T) {
	prog, err := compiler.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	masks := []launch.ModKind{attention.MaskNone, attention.MaskCausal, attention.MaskCausalBottomRight,
		attention.MaskSlidingWindow, attention.MaskPrefixLM, attention.MaskDocument, attention.MaskDocumentSpans,
		attention.MaskDocumentSpansKV, attention.MaskChunked, attention.MaskAnd, attention.MaskOr, attention.MaskNot,
		attention.MaskNoop}
	scores := []launch.ModKind{attention.ScoreIdentity, attention.ScoreSoftcap, attention.ScoreAlibi}
	for role, kinds := range map[string][]launch.ModKind{"mask": masks, "score": scores} {
		for _, k := range kinds {
			d, ok := prog.Mod(string(k))
			if !ok || d.Kind != role || !strings.HasPrefix(d.Pos.Filename, "stdlib/") {
				t.Errorf("%q is no stdlib %s", k, role)
			}
		}
	}
	auxOf := func(mask launch.ModKind) map[string]string {
		e, err := parser.ParseExpr("<mask>", string(mask))
		if err != nil {
			t.Fatal(err)
		}
		m, err := prog.ResolveMod(e, "mask")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, a := range m.AuxParams() {
			out[a.Name] = a.Type()
		}
		return out
	}
	for mask, form := range attention.MaskForms {
		if got := auxOf(mask)[form.EqualIDs]; got != "tensor[i32]" {
			t.Errorf("mask %s declares ids %q, an aux tensor of type %q", mask, form.EqualIDs, got)
		}
	}
	for _, mask := range []launch.ModKind{attention.SpansByQuery, attention.SpansByKey} {
		aux := auxOf(mask)
		if len(aux) != 2 || aux[attention.SpanStart] != "tensor[i32]" || aux[attention.SpanEnd] != "tensor[i32]" {
			t.Errorf("span form %s reads %v", mask, aux)
		}
	}
}
