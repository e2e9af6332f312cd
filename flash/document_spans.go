package flash

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// Document masks as spans. A mask declared with MaskForm.EqualIDs (the
// stdlib's document: attention.MaskForms; a user's own:
// Options.MaskForms) keeps the pairs whose ids match, ids[q_idx] ==
// ids[kv_idx]: in a partial block, a load and a compare per key. When
// every id is one run of consecutive positions (packed sequences, the
// usual case), those are the pairs whose key lies in the query's run
// [start, end), and equally those whose query lies in the key's run;
// stated so, the mask-range pass makes the mask one range of columns per
// row. The runtime checks the ids on the host (O(n)) and then runs the
// mask with each declared mask replaced by its span form: document_spans
// in the forward (rows are queries), document_spans_kv in the backward
// (rows are keys). Anything else runs the mask as written: ids on the
// device (LaunchCUDA), an id whose positions are not one run, an ids
// array shorter than the sequences, declared masks of two ids tensors in
// one mask, inputs that already name doc_start or doc_end, a split-KV
// plan, a kernel in no bundle or cache with no llc.

// MaskForm is a form a mask declares, which the runtime may rely on to run
// it otherwise with the same result: a mask with EqualIDs runs as spans
// where its ids are runs, as the stdlib's document does.
type MaskForm = attention.MaskForm

// The span forms of an EqualIDs mask.
const (
	spansByQuery = attention.SpansByQuery
	spansByKey   = attention.SpansByKey
)

// declaredForm is the form mask m declares: in attention.MaskForms for a
// stdlib mask, in user (Options.MaskForms) for the caller's own.
func declaredForm(m *lang.ModInst, user map[string]MaskForm) MaskForm {
	if strings.HasPrefix(m.Decl.Pos.Filename, "stdlib/") {
		return attention.MaskForms[launch.ModKind(m.Name())]
	}
	return user[m.Name()]
}

// spansExpr is mask m's expression with every mask that declares EqualIDs
// (user: the caller's declarations) replaced by form, and the name of
// their ids tensor; ok is false when m calls no such mask or they read
// ids of two names.
func spansExpr(m *lang.ModInst, form launch.ModKind, user map[string]MaskForm) (expr, ids string, ok bool) {
	found := map[string]bool{}
	expr = spansExprOf(m, string(form), user, found)
	if len(found) != 1 {
		return "", "", false
	}
	for ids = range found {
	}
	return expr, ids, true
}

// spansExprOf is spansExpr's rewrite, adding the ids tensors of the masks
// it replaces to found.
func spansExprOf(m *lang.ModInst, form string, user map[string]MaskForm, found map[string]bool) string {
	if m == nil {
		return ""
	}
	if ids := declaredForm(m, user).EqualIDs; ids != "" {
		found[ids] = true
		return form
	}
	if len(m.Args) == 0 {
		return m.String()
	}
	parts := make([]string, len(m.Args))
	for i, a := range m.Args {
		parts[i] = a.String()
		if a.Kind == lang.CMod {
			parts[i] = spansExprOf(a.Mod, form, user, found)
		}
	}
	return m.Name() + "(" + strings.Join(parts, ", ") + ")"
}

// checkMaskForms checks the caller's mask declarations (Options.MaskForms)
// against the program: each names a mask of the caller's, and one with
// EqualIDs reads an integer aux tensor of that name (checked where mask,
// the kernel's mask, calls it).
func checkMaskForms(forms map[string]MaskForm, prog *lang.Program, mask *lang.ModInst) error {
	for _, name := range slices.Sorted(maps.Keys(forms)) {
		d, ok := prog.Mod(name)
		switch {
		case !ok || d.Kind != "mask":
			return fmt.Errorf("Options.MaskForms: no mask %s", name)
		case strings.HasPrefix(d.Pos.Filename, "stdlib/"):
			return fmt.Errorf("Options.MaskForms: %s is a stdlib mask, whose forms the stdlib declares", name)
		}
	}
	var check func(m *lang.ModInst) error
	check = func(m *lang.ModInst) error {
		if m == nil {
			return nil
		}
		if ids := forms[m.Name()].EqualIDs; ids != "" && !strings.HasPrefix(m.Decl.Pos.Filename, "stdlib/") {
			if !slices.ContainsFunc(m.AuxParams(), func(a lang.AuxParam) bool {
				return a.Name == ids && a.Mod == m.Name() && a.Elem.IsInt() && len(a.Dims) <= 1
			}) {
				return fmt.Errorf("Options.MaskForms: mask %s declares ids %q, which is not a 1-D integer aux tensor of it", m.Name(), ids)
			}
		}
		for _, a := range m.Args {
			if a.Kind == lang.CMod {
				if err := check(a.Mod); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return check(mask)
}

// DocumentSpans gives each position i of document ids doc the run of equal
// ids holding it, [start[i], end[i]): the aux tensors doc_start and doc_end
// of the stdlib's document_spans and document_spans_kv. ok is false when
// some id has positions in two runs (then doc[q] == doc[kv] is no span
// test).
func DocumentSpans(doc []int32) (start, end []int32, ok bool) {
	start, end = make([]int32, len(doc)), make([]int32, len(doc))
	seen := map[int32]bool{}
	for lo := 0; lo < len(doc); {
		id := doc[lo]
		if seen[id] {
			return nil, nil, false
		}
		seen[id] = true
		hi := lo + 1
		for hi < len(doc) && doc[hi] == id {
			hi++
		}
		for i := lo; i < hi; i++ {
			start[i], end[i] = int32(lo), int32(hi)
		}
		lo = hi
	}
	return start, end, true
}

// spansAux is aux with ids (a declared mask's ids tensor) replaced by the
// runs of their first n (under the caller's key, "doc" or "mask.doc", as
// "doc_start" and "doc_end"; the ids stay if the kernel also reads them
// elsewhere: reads, by short names); ok is false when the ids are not on
// the host, not integers that fit i32, fewer than n, or not runs, or when
// the names are taken.
func spansAux(aux map[string]any, ids string, n int, reads []string) (map[string]any, bool) {
	for _, prefix := range []string{"mask.", ""} {
		doc, found := aux[prefix+ids]
		if !found {
			continue
		}
		data, _, err := launch.HostData("i32", doc) // any integer slice, or an Array, that converts exactly
		vals, isI32 := data.([]int32)
		if err != nil || !isI32 || len(vals) < n || spanNamesTaken(aux) {
			return nil, false
		}
		start, end, ok := DocumentSpans(vals[:n])
		if !ok {
			return nil, false
		}
		out := map[string]any{}
		for k, v := range aux {
			out[k] = v
		}
		out[prefix+attention.SpanStart], out[prefix+attention.SpanEnd] = start, end
		if !slices.Contains(reads, ids) {
			delete(out, prefix+ids)
		}
		return out, true
	}
	return nil, false
}

// spanNamesTaken reports whether aux already has a tensor under a name the
// span masks read: another mod's, which the binder could hand them.
func spanNamesTaken(aux map[string]any) bool {
	for _, prefix := range []string{"", "mask."} {
		for _, k := range []string{attention.SpanStart, attention.SpanEnd} {
			if _, ok := aux[prefix+k]; ok {
				return true
			}
		}
	}
	return false
}

// spanVariant is a kernel compiled once, on first use, with its mask's
// declared EqualIDs masks in span form (ok false when the mask has none,
// or when that does not compile), and the name of their ids tensor.
type spanVariant[T any] struct {
	once sync.Once
	v    T
	ids  string
	ok   bool
}

// of is the variant of opts whose mask instance is m, in form.
func (s *spanVariant[T]) of(m *lang.ModInst, form launch.ModKind, opts Options, compile func(Options) (T, error)) (T, bool) {
	s.once.Do(func() {
		expr, ids, ok := spansExpr(m, form, opts.MaskForms)
		if !ok {
			return
		}
		opts.Mask = expr
		v, err := compile(opts)
		s.v, s.ids, s.ok = v, ids, err == nil
	})
	return s.v, s.ok
}

// spanVariant is f with its mask's document in span form, by query.
func (f *Forward) spanVariant() (*Forward, bool) {
	if strings.HasSuffix(f.res.Kernel, ".full") { // the mask-free variant runs no mask
		return nil, false
	}
	return f.spans.of(f.res.Mask, spansByQuery, f.opts, func(o Options) (*Forward, error) { return CompileForward(o, f.dim) })
}

// withSpans is the forward that runs in for shape sh, with its inputs:
// f's span variant where the ids allow, else f and in.
func (f *Forward) withSpans(in Inputs, sh Shape) (*Forward, Inputs) {
	g, aux := withSpansOf(f, f.spanVariant, &f.spans, in.Aux, sh)
	in.Aux = aux
	return g, in
}

// spanVariant is the backward's: its tiles' rows are keys, so the variant
// states the spans from the key's side.
func (bw *Backward) spanVariant() (*Backward, bool) {
	return bw.spans.of(bw.masker.res.Mask, spansByKey, bw.opts, func(o Options) (*Backward, error) { return CompileBackward(o, bw.dim) })
}

// withSpans is the backward that runs in for shape sh, with its inputs.
func (bw *Backward) withSpans(in BackwardInputs, sh Shape) (*Backward, BackwardInputs) {
	g, aux := withSpansOf(bw, bw.spanVariant, &bw.spans, in.Aux, sh)
	in.Aux = aux
	return g, in
}

// withSpansOf is k's span variant (variant, made in s) and the aux tensors
// with the ids as spans, for shape sh, where both can be had; else k and
// aux.
func withSpansOf[K interface{ AuxTensors() []string }](k K, variant func() (K, bool), s *spanVariant[K], aux map[string]any, sh Shape) (K, map[string]any) {
	if g, ok := variant(); ok {
		if a, ok := spansAux(aux, s.ids, max(sh.SeqQ, sh.SeqK), g.AuxTensors()); ok {
			return g, a
		}
	}
	return k, aux
}
