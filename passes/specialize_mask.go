package passes

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fac-compiler/fac/tir"
)

// specializeMask adds, for each kernel that calls a mask mod (a func with
// role = mask) directly or through other funcs, a clone named <kernel>.full
// in which the mask is the constant true: the runtime launches it on blocks
// the mask keeps entirely, so it skips evaluating the mask. The original is
// marked mask_variant = partial, the clone mask_variant = full.
//
// Functions between a kernel and a mask get .full clones too, so the mask
// is known true however deep it is called; inline then removes them all.
func specializeMask(m *tir.Module) error {
	s := &specializer{m: m, reaches: map[string]bool{}, full: map[string]*tir.Func{}}
	var out []*tir.Func
	for _, f := range m.Funcs {
		out = append(out, f)
		if !f.Kernel || f.Attr("mask_variant") != nil {
			continue // already specialized: running the pass twice changes nothing
		}
		r, err := s.reachesMask(f.Name, nil)
		if err != nil {
			return err
		}
		if !r {
			continue
		}
		full, err := s.fullVariant(f)
		if err != nil {
			return err
		}
		f.SetAttr("mask_variant", tir.Ident("partial"))
		full.SetAttr("mask_variant", tir.Ident("full"))
		out = append(out, full)
	}
	// Cloned helper funcs go at the end; kernels keep their order.
	for _, f := range m.Funcs {
		if !f.Kernel && s.full[f.Name] != nil {
			out = append(out, s.full[f.Name])
		}
	}
	m.Funcs = out
	return nil
}

type specializer struct {
	m       *tir.Module
	reaches map[string]bool      // func name → calls a mask, memoized
	full    map[string]*tir.Func // func name → its .full clone
}

func isMask(f *tir.Func) bool { return f.Attr("role") == tir.Ident("mask") }

// reachesMask reports whether the func named name calls a mask func,
// directly or not. stack detects call cycles.
func (s *specializer) reachesMask(name string, stack []string) (bool, error) {
	if r, ok := s.reaches[name]; ok {
		return r, nil
	}
	if i := slices.Index(stack, name); i >= 0 {
		return false, fmt.Errorf("recursive call: @%s -> @%s", strings.Join(stack[i:], " -> @"), name)
	}
	f := s.m.Func(name)
	if f == nil {
		return false, fmt.Errorf("call of undefined function @%s", name)
	}
	r := false
	var err error
	f.Body.Walk(func(op *tir.Op) bool {
		if op.Kind != tir.OpCall || err != nil {
			return err == nil
		}
		callee := s.m.Func(calleeName(op))
		switch {
		case callee == nil:
			err = fmt.Errorf("call of undefined function @%s", calleeName(op))
		case isMask(callee):
			r = true
		default:
			var cr bool
			cr, err = s.reachesMask(callee.Name, append(stack, name))
			r = r || cr
		}
		return false
	})
	if err != nil {
		return false, err
	}
	s.reaches[name] = r
	return r, nil
}

// fullVariant returns f's clone with every mask call replaced by true and
// every call of a func that reaches a mask redirected to that func's clone.
func (s *specializer) fullVariant(f *tir.Func) (*tir.Func, error) {
	if g := s.full[f.Name]; g != nil {
		return g, nil
	}
	name := f.Name + ".full"
	if s.m.Func(name) != nil {
		return nil, fmt.Errorf("cannot add @%s: a function of that name exists", name)
	}
	g := cloneFunc(f, name)
	s.full[f.Name] = g
	var err error
	g.Body.Walk(func(op *tir.Op) bool {
		if op.Kind != tir.OpCall || err != nil {
			return err == nil
		}
		callee := s.m.Func(calleeName(op))
		if callee != nil && isMask(callee) {
			err = makeTrue(op, callee)
			return false
		}
		// Memoized: reachesMask already walked everything f calls.
		var r bool
		if r, err = s.reachesMask(calleeName(op), nil); r {
			var cf *tir.Func
			if cf, err = s.fullVariant(callee); err == nil {
				op.SetAttr("callee", tir.Ident("@"+cf.Name))
			}
		}
		return false
	})
	return g, err
}

// makeTrue turns a mask call into the constant true, in place, so that its
// result keeps its uses.
func makeTrue(op *tir.Op, mask *tir.Func) error {
	if len(op.Results) != 1 || op.Result().Type.Elem != tir.I1 || op.Result().Type.Ptr {
		return fmt.Errorf("mask function @%s must return one i1 value", mask.Name)
	}
	op.Kind, op.Args, op.Regions = tir.OpConst, nil, nil
	op.Attrs = []tir.Attr{{Key: "value", Val: true}}
	return nil
}
