package lang

import (
	"fmt"

	"github.com/fac-compiler/fac/tir"
)

// CheckDecl type-checks one declaration. Mods are checked with scalar
// arguments, and with tiles the way kernels call them (they are
// shape-polymorphic); kernels are instantiated with their defaults.
// Compile-time parameters without a default take a placeholder (16, 1.0,
// false, f32, the none/identity mods), so a file can be checked before it
// is used. Functions are checked alone for what does not depend on their
// arguments (checkFn), and in full in each kernel or mod that calls them.
func (p *Program) CheckDecl(name string) error {
	l := p.newLowerer()
	l.check = true
	var m, tiles *tir.Module
	err := l.catch(func() {
		switch {
		case p.consts[name] != nil:
			l.globalConst(p.consts[name], p.consts[name].Pos)
		case p.mods[name] != nil:
			md := p.mods[name]
			args := l.placeholders(md.CParams)
			l.push()
			inst := &ModInst{Decl: md, Args: l.bindCParams(md.Kind+" "+md.Name, md.CParams, args, md.Pos), prog: p}
			l.pop()
			mod, err := p.lowerMod(inst, true)
			if err != nil {
				panic(failure{err: err})
			}
			m = mod
			// Kernels call mods with a column of query positions and a row
			// of key positions (and a tile of scores). Check that too, so
			// that code that only works on scalars, like `if q_idx > 0`, is
			// reported now rather than when a kernel uses the mod.
			tl := p.newLowerer()
			tl.check = true
			if err := tl.catch(func() { tl.modFunc(inst, tileArgTypes(md.Kind), md.Pos) }); err != nil {
				panic(failure{err: err})
			}
			tiles = tl.mod
		case p.fns[name] != nil:
			// A function is checked where it is called, with its
			// arguments; alone, for what does not depend on them.
			if err := p.checkFn(p.fns[name]); err != nil {
				panic(failure{err: err})
			}
		case p.kernels[name] != nil:
			kd := p.kernels[name]
			l.collect, l.collectDepth = true, 0
			l.kernel(kd, l.placeholders(kd.CParams))
			m = l.mod
		default:
			panic(failure{err: fmt.Errorf("no declaration named %s", name)})
		}
	})
	if err != nil {
		return err
	}
	for _, mod := range []*tir.Module{m, tiles} {
		if mod == nil {
			continue
		}
		if err := tir.Verify(mod); err != nil {
			return fmt.Errorf("internal compiler error: lowering %s: %w", name, err)
		}
	}
	return nil
}

// tileArgTypes are the argument types of a mod called from a kernel with
// 16x16 tiles: b and h scalars, q_idx a column, kv_idx a row, s a tile.
func tileArgTypes(kind string) []tir.Type {
	types := []tir.Type{tir.Scalar(tir.I32), tir.Scalar(tir.I32), tir.Tensor(tir.I32, 16, 1), tir.Tensor(tir.I32, 1, 16)}
	if kind == "score" {
		types = append([]tir.Type{tir.Tensor(tir.F32, 16, 16)}, types...)
	}
	return types
}

func (l *lowerer) placeholders(cps []*CParam) map[string]Const {
	args := map[string]Const{}
	for _, cp := range cps {
		if cp.Default != nil {
			continue
		}
		switch l.cparamKind(cp) {
		case CInt:
			args[cp.Name] = IntConst(16)
		case CFloat:
			args[cp.Name] = FloatConst(1)
		case CBool:
			args[cp.Name] = BoolConst(false)
		case CType:
			args[cp.Name] = TypeConst(tir.F32)
		case CMod:
			name := "none"
			if cp.Kind == "score" {
				name = "identity"
			}
			if md, ok := l.p.mods[name]; ok {
				args[cp.Name] = Const{Kind: CMod, Mod: &ModInst{Decl: md, prog: l.p}}
			}
		}
	}
	return args
}
