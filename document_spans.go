package fac

import (
	"slices"
	"strings"
	"sync"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/launch"
)

// Document masks as spans. The stdlib's document keeps the pairs whose ids
// match, doc[q_idx] == doc[kv_idx]: in a partial block, a load and a
// compare per key. When every document is one run of consecutive positions
// (packed sequences, the usual case), those are the pairs whose key lies in
// the query's run [start, end), and equally those whose query lies in the
// key's run; stated so, the mask-range pass makes the mask one range of
// columns per row. The runtime checks the ids on the host (O(n)) and then
// runs the mask with each stdlib document replaced by its span form:
// document_spans in the forward (rows are queries), document_spans_kv in
// the backward (rows are keys). Anything else runs the mask as written: ids
// on the device (LaunchCUDA), an id whose positions are not one run, an ids
// array shorter than the sequences, inputs that already name doc_start or
// doc_end, a split-KV plan, a kernel in no bundle or cache with no llc.

// The span forms of document: mask names in stdlib/attention/masks.fa.
const (
	spansByQuery = "document_spans"
	spansByKey   = "document_spans_kv"
)

// spansExpr is mask m's expression with every stdlib document replaced
// by form; ok is false when m calls no document.
func spansExpr(m *lang.ModInst, form string) (expr string, ok bool) {
	if m == nil {
		return "", false
	}
	if m.Name() == "document" && strings.HasPrefix(m.Decl.Pos.Filename, "stdlib/") {
		return form, true
	}
	if len(m.Args) == 0 {
		return m.String(), false
	}
	parts := make([]string, len(m.Args))
	for i, a := range m.Args {
		parts[i] = a.String()
		if a.Kind == lang.CMod {
			s, found := spansExpr(a.Mod, form)
			parts[i], ok = s, ok || found
		}
	}
	return m.Name() + "(" + strings.Join(parts, ", ") + ")", ok
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

// spansAux is aux with document's ids replaced by the runs of their
// first n (under the caller's key, "doc" or "mask.doc", as "doc_start"
// and "doc_end"; doc stays if the kernel also reads it elsewhere: reads,
// by short names); ok is false when the ids are not on the host, not
// integers that fit i32, fewer than n, or not runs, or when the names are
// taken.
func spansAux(aux map[string]any, n int, reads []string) (map[string]any, bool) {
	for _, prefix := range []string{"mask.", ""} {
		doc, found := aux[prefix+"doc"]
		if !found {
			continue
		}
		data, _, err := launch.HostData("i32", doc) // any integer slice, or an Array, that converts exactly
		ids, isI32 := data.([]int32)
		if err != nil || !isI32 || len(ids) < n || spanNamesTaken(aux) {
			return nil, false
		}
		start, end, ok := DocumentSpans(ids[:n])
		if !ok {
			return nil, false
		}
		out := map[string]any{}
		for k, v := range aux {
			out[k] = v
		}
		out[prefix+"doc_start"], out[prefix+"doc_end"] = start, end
		if !slices.Contains(reads, "doc") {
			delete(out, prefix+"doc")
		}
		return out, true
	}
	return nil, false
}

// spanNamesTaken reports whether aux already has a tensor under a name the
// span masks read: another mod's, which the binder could hand them.
func spanNamesTaken(aux map[string]any) bool {
	for _, k := range []string{"doc_start", "doc_end", "mask.doc_start", "mask.doc_end"} {
		if _, ok := aux[k]; ok {
			return true
		}
	}
	return false
}

// spanVariant is a kernel compiled once, on first use, with its mask's
// document in span form (ok false when the mask has none, or when that
// does not compile).
type spanVariant[T any] struct {
	once sync.Once
	v    T
	ok   bool
}

// of is the variant of opts whose mask instance is m, in form.
func (s *spanVariant[T]) of(m *lang.ModInst, form string, opts Options, compile func(Options) (T, error)) (T, bool) {
	s.once.Do(func() {
		expr, ok := spansExpr(m, form)
		if !ok {
			return
		}
		opts.Mask = expr
		v, err := compile(opts)
		s.v, s.ok = v, err == nil
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
	g, aux := withSpansOf(f, f.spanVariant, in.Aux, sh)
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
	g, aux := withSpansOf(bw, bw.spanVariant, in.Aux, sh)
	in.Aux = aux
	return g, in
}

// withSpansOf is k's span variant (variant) and the aux tensors with the
// ids as spans, for shape sh, where both can be had; else k and aux.
func withSpansOf[K interface{ AuxTensors() []string }](k K, variant func() (K, bool), aux map[string]any, sh Shape) (K, map[string]any) {
	if g, ok := variant(); ok {
		if a, ok := spansAux(aux, max(sh.SeqQ, sh.SeqK), g.AuxTensors()); ok {
			return g, a
		}
	}
	return k, aux
}
