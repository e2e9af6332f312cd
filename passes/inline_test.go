package passes

import (
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

// TestInlineCopies checks that no op of a callee ends up in a caller (each
// call gets its own copy), that nothing is called afterwards and that only
// entry points remain: the kernels, or the functions nothing called in a
// module without kernels.
func TestInlineCopies(t *testing.T) {
	for _, in := range allInputs(t) {
		m := parseFile(t, in)
		kernels := slices.ContainsFunc(m.Funcs, func(f *tir.Func) bool { return f.Kernel })
		called := callees(m)
		callee := map[*tir.Op]bool{}
		entry := map[string]bool{}
		for _, f := range m.Funcs {
			if f.Kernel || !kernels && !called[f.Name] {
				entry[f.Name] = true
			} else {
				f.Body.Walk(func(op *tir.Op) bool { callee[op] = true; return true })
			}
		}
		if err := inline(m); err != nil {
			if !strings.Contains(err.Error(), "recursive") {
				t.Errorf("%s: %v", in, err)
			}
			continue
		}
		seen := map[*tir.Op]bool{}
		for _, f := range m.Funcs {
			if !entry[f.Name] {
				t.Errorf("%s: func @%s survived", in, f.Name)
			}
			delete(entry, f.Name)
			f.Body.Walk(func(op *tir.Op) bool {
				switch {
				case callee[op]:
					t.Errorf("%s: @%s holds an op of a callee: %s", in, f.Name, op)
				case seen[op]:
					t.Errorf("%s: op %s appears twice", in, op)
				case op.Kind == tir.OpCall:
					t.Errorf("%s: call left: %s", in, op)
				}
				seen[op] = true
				return true
			})
		}
		for name := range entry {
			t.Errorf("%s: entry point @%s was deleted", in, name)
		}
	}
}

func TestInlineErrors(t *testing.T) {
	k := &tir.Func{Name: "k", Kernel: true, Body: &tir.Block{}}
	b := &tir.Builder{Block: k.Body}
	b.Call("nope", nil)
	b.Return()
	m := &tir.Module{Funcs: []*tir.Func{k}}
	if err := inline(m); err == nil || !strings.Contains(err.Error(), "@k calls undefined function @nope") {
		t.Errorf("undefined callee: err = %v", err)
	}

	f := &tir.Func{Name: "f", Body: &tir.Block{}, Params: []*tir.Value{{Type: tir.Scalar(tir.I32), Name: "a"}}}
	(&tir.Builder{Block: f.Body}).Return()
	k = &tir.Func{Name: "k", Kernel: true, Body: &tir.Block{}}
	b = &tir.Builder{Block: k.Body}
	b.Call("f", nil)
	b.Return()
	m = &tir.Module{Funcs: []*tir.Func{f, k}}
	if err := inline(m); err == nil || !strings.Contains(err.Error(), "call of @f with 0 arguments, want 1") {
		t.Errorf("arity: err = %v", err)
	}
}
