package lang

import (
	"errors"
	"fmt"
	"strings"
)

// Checking reports several errors per declaration (issue 46 item 18):
// when only checking (CheckDecl), an error in one statement of the body
// being checked is recorded and the checker goes on with the next
// statement, so that independent mistakes in one mod are reported
// together. The names a failed let or var would have bound are poisoned:
// a later statement that reads one is skipped without a message of its
// own, as its error would only repeat the first. Statements of the mods
// and functions it calls are not recovered in: an error there is one
// error of the calling statement.

// MaxErrorsPerDecl is the most errors checking one declaration reports.
const MaxErrorsPerDecl = 10

// errPoisoned is the failure of a statement that reads a poisoned name.
var errPoisoned = errors.New("reads a name whose declaration failed")

// collecting reports whether statements lowered now are those of the
// declaration being checked, where errors are collected.
func (l *lowerer) collecting() bool {
	return l.collect && l.modDepth == l.collectDepth && l.fnBody == nil
}

// stmtChecked lowers s; when collecting, a failure is recorded (or, past
// MaxErrorsPerDecl, ends the check with the errors so far) instead of
// ending the check, and the lowerer is put back as it was before s.
func (l *lowerer) stmtChecked(s *Stmt, inKernel bool) {
	if !l.collecting() {
		l.stmt(s, inKernel)
		return
	}
	l.tryStmt(s, func() { l.stmt(s, inKernel) })
}

// tryStmt runs lower, the lowering of statement s (nil: the last part of
// a mod, its return), recording its failure as stmtChecked says.
func (l *lowerer) tryStmt(s *Stmt, lower func()) {
	b, pos, scope := l.b, l.b.Pos, l.scope
	nStack, nInsts, depth := len(l.modStack), len(l.modInsts), l.modDepth
	fnStack, fnBody := l.fnStack, l.fnBody
	var names []string
	if s != nil {
		switch {
		case s.Let != nil:
			names = append([]string{s.Let.Name}, s.Let.More...)
		case s.Var != nil:
			names = append([]string{s.Var.Name}, s.Var.More...)
		}
	}
	// Names bound before s keep their binding: an error in s (such as
	// redefining one) says nothing against them.
	var fresh []string
	for _, n := range names {
		if l.rawLookup(n) == nil {
			fresh = append(fresh, n)
		}
	}
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		f, ok := r.(failure)
		if !ok || f.stop {
			panic(r)
		}
		// Constants being evaluated when s failed are not any more.
		for _, n := range l.modStack[nStack:] {
			if c, ok := strings.CutPrefix(n, "const "); ok {
				delete(l.constBusy, c)
			}
		}
		l.modStack, l.modInsts, l.modDepth = l.modStack[:nStack], l.modInsts[:nInsts], depth
		l.b, l.scope, l.fnStack, l.fnBody = b, scope, fnStack, fnBody
		l.b.Pos = pos
		for _, n := range fresh {
			l.scope.vars[n] = &binding{v: val{poisoned: true}, mutable: s.Var != nil}
		}
		if f.err == errPoisoned {
			return
		}
		l.errs = append(l.errs, f.err)
		if len(l.errs) >= MaxErrorsPerDecl {
			errs := append(l.errs, fmt.Errorf("too many errors: checking stops after %d in one declaration", MaxErrorsPerDecl))
			l.errs = nil
			panic(failure{err: ErrorList(errs), stop: true})
		}
	}()
	lower()
}

// flushErrors ends the check with the errors collected, if any.
func (l *lowerer) flushErrors() {
	if len(l.errs) == 0 {
		return
	}
	errs := l.errs
	l.errs = nil
	if len(errs) == 1 {
		panic(failure{err: errs[0]})
	}
	panic(failure{err: ErrorList(errs)})
}

// rawLookup is lookup without the poison check.
func (l *lowerer) rawLookup(name string) *binding {
	for s := l.scope; s != nil; s = s.parent {
		if b, ok := s.vars[name]; ok {
			return b
		}
	}
	return nil
}
