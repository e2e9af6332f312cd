package passes

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fac-compiler/fac/tir"
)

// inline replaces every call by a copy of the callee's body, then deletes
// the functions that are no longer called, but the module's entry points:
// its kernels, or, in a module without kernels (a mod lowered alone for the
// block-mask builders), the functions nothing called. Callees are inlined
// into first, so each body is copied call-free exactly once per call.
func inline(m *tir.Module) error {
	calledBefore := callees(m)
	const (
		unvisited = iota
		active
		done
	)
	state := map[*tir.Func]int{}
	var visit func(f *tir.Func, stack []string) error
	visit = func(f *tir.Func, stack []string) error {
		switch state[f] {
		case done:
			return nil
		case active:
			i := slices.Index(stack, f.Name)
			return fmt.Errorf("recursive call: @%s -> @%s", strings.Join(stack[i:], " -> @"), f.Name)
		}
		state[f] = active
		stack = append(stack, f.Name)
		var err error
		f.Body.Walk(func(op *tir.Op) bool {
			if op.Kind == tir.OpCall && err == nil {
				callee := m.Func(calleeName(op))
				if callee == nil {
					err = fmt.Errorf("@%s calls undefined function @%s", f.Name, calleeName(op))
				} else {
					err = visit(callee, stack)
				}
			}
			return err == nil
		})
		if err == nil {
			err = inlineBlock(m, f.Body, map[*tir.Value]*tir.Value{})
		}
		state[f] = done
		return err
	}
	for _, f := range m.Funcs {
		if err := visit(f, nil); err != nil {
			return err
		}
	}

	// Nothing is called any more, but keep the rule general: drop only
	// functions that are neither entry points nor called.
	called := callees(m)
	kernels := slices.ContainsFunc(m.Funcs, func(f *tir.Func) bool { return f.Kernel })
	var keep []*tir.Func
	for _, f := range m.Funcs {
		entry := f.Kernel || !kernels && !calledBefore[f.Name]
		if entry || called[f.Name] {
			keep = append(keep, f)
		}
	}
	m.Funcs = keep
	return nil
}

// callees is the set of functions m calls.
func callees(m *tir.Module) map[string]bool {
	called := map[string]bool{}
	for _, f := range m.Funcs {
		f.Body.Walk(func(op *tir.Op) bool {
			if op.Kind == tir.OpCall {
				called[calleeName(op)] = true
			}
			return true
		})
	}
	return called
}

// inlineBlock inlines the calls in b and its regions. sub maps the results
// of inlined calls to the callee's returned values; uses always come after
// the call in this walk, so rewriting operands as we go is enough.
func inlineBlock(m *tir.Module, b *tir.Block, sub map[*tir.Value]*tir.Value) error {
	var ops []*tir.Op
	for _, op := range b.Ops {
		substitute(op, sub)
		for _, r := range op.Regions {
			if err := inlineBlock(m, r, sub); err != nil {
				return err
			}
		}
		if op.Kind != tir.OpCall {
			ops = append(ops, op)
			continue
		}
		callee := m.Func(calleeName(op))
		if len(op.Args) != len(callee.Params) {
			return fmt.Errorf("call of @%s with %d arguments, want %d", callee.Name, len(op.Args), len(callee.Params))
		}
		vm := map[*tir.Value]*tir.Value{}
		for i, p := range callee.Params {
			vm[p] = op.Args[i]
		}
		body := cloneBlock(callee.Body, vm)
		n := len(body.Ops)
		if n == 0 || body.Ops[n-1].Kind != tir.OpReturn || len(body.Ops[n-1].Args) != len(op.Results) {
			return fmt.Errorf("@%s does not end in a return of %d values", callee.Name, len(op.Results))
		}
		ops = append(ops, body.Ops[:n-1]...)
		for i, r := range op.Results {
			sub[r] = body.Ops[n-1].Args[i]
		}
	}
	b.Ops = ops
	return nil
}
