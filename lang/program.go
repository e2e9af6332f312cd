package lang

import (
	"fmt"
	"sort"
	"sync"

	"github.com/alecthomas/participle/v2/lexer"
)

// Program is every declaration visible to a compile: the stdlib's and the
// user's files. Names are global and must be unique.
type Program struct {
	srcs    map[string]string // filename → source, for error excerpts
	consts  map[string]*ConstDecl
	mods    map[string]*ModDecl
	fns     map[string]*FnDecl
	kernels map[string]*KernelDecl
	where   map[string]lexer.Position

	constMu sync.Mutex // guards constVals and checked: programs may be lowered concurrently
	// constVals caches the values of global constants.
	constVals map[*ConstDecl]constResult
	// checked holds the mod functions CheckDecl lowered without error (see
	// checkedStub), with the height of their call trees.
	checked map[string]int
	// inputs caches what each mod instance reads (modInputs), by its
	// canonical string.
	inputs map[string]ModInputs
}

// NewProgram returns an empty program.
func NewProgram() *Program {
	return &Program{srcs: map[string]string{}, consts: map[string]*ConstDecl{}, mods: map[string]*ModDecl{},
		fns: map[string]*FnDecl{}, kernels: map[string]*KernelDecl{}, where: map[string]lexer.Position{}}
}

// Add registers a parsed file's declarations.
func (p *Program) Add(filename, src string, f *File) error {
	p.srcs[filename] = src
	var errs ErrorList
	for _, d := range f.Decls {
		var name string
		var pos lexer.Position
		switch {
		case d.Const != nil:
			name, pos = d.Const.Name, d.Const.Pos
		case d.Mod != nil:
			name, pos = d.Mod.Name, d.Mod.Pos
		case d.Fn != nil:
			name, pos = d.Fn.Name, d.Fn.Pos
		case d.Kernel != nil:
			name, pos = d.Kernel.Name, d.Kernel.Pos
		}
		if prev, dup := p.where[name]; dup {
			errs = append(errs, p.errorf(pos, "%s is already declared at %s:%d:%d", name, prev.Filename, prev.Line, prev.Column))
			continue
		}
		if builtinNames[name] {
			errs = append(errs, p.errorf(pos, "%s is a built-in name and cannot be redeclared", name))
			continue
		}
		p.where[name] = pos
		switch {
		case d.Const != nil:
			p.consts[name] = d.Const
		case d.Mod != nil:
			p.mods[name] = d.Mod
		case d.Fn != nil:
			p.fns[name] = d.Fn
		case d.Kernel != nil:
			p.kernels[name] = d.Kernel
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// Source returns the text of a registered file.
func (p *Program) Source(filename string) string { return p.srcs[filename] }

// Mod returns the mod declaration named name.
func (p *Program) Mod(name string) (*ModDecl, bool) { d, ok := p.mods[name]; return d, ok }

// Fn returns the function declaration named name.
func (p *Program) Fn(name string) (*FnDecl, bool) { d, ok := p.fns[name]; return d, ok }

// Fns lists function names, sorted.
func (p *Program) Fns() []string {
	var out []string
	for n := range p.fns {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Kernel returns the kernel declaration named name.
func (p *Program) Kernel(name string) (*KernelDecl, bool) { d, ok := p.kernels[name]; return d, ok }

// Mods lists the names of mods of the given kind ("mask" or "score"), sorted.
func (p *Program) Mods(kind string) []string {
	var out []string
	for n, d := range p.mods {
		if d.Kind == kind {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Kernels lists kernel names, sorted.
func (p *Program) Kernels() []string {
	var out []string
	for n := range p.kernels {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// DeclaredIn lists the names declared in one file, in a stable order.
func (p *Program) DeclaredIn(filename string) []string {
	var out []string
	for n, pos := range p.where {
		if pos.Filename == filename {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := p.where[out[i]], p.where[out[j]]
		return a.Offset < b.Offset
	})
	return out
}

type constResult struct {
	c      Const
	height int // the longest chain of constants it uses, itself included
}

func (p *Program) cachedConst(cd *ConstDecl) (Const, int, bool) {
	p.constMu.Lock()
	defer p.constMu.Unlock()
	r, ok := p.constVals[cd]
	return r.c, r.height, ok
}

func (p *Program) cacheConst(cd *ConstDecl, c Const, height int) {
	p.constMu.Lock()
	defer p.constMu.Unlock()
	if p.constVals == nil {
		p.constVals = map[*ConstDecl]constResult{}
	}
	p.constVals[cd] = constResult{c, height}
}

func (p *Program) checkedHeight(key string) (int, bool) {
	p.constMu.Lock()
	defer p.constMu.Unlock()
	h, ok := p.checked[key]
	return h, ok
}

func (p *Program) markChecked(key string, height int) {
	p.constMu.Lock()
	defer p.constMu.Unlock()
	if p.checked == nil {
		p.checked = map[string]int{}
	}
	p.checked[key] = height
}

func (p *Program) errorf(pos lexer.Position, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...), Src: p.srcs[pos.Filename]}
}
