package lang

import (
	"fmt"

	"github.com/fac-compiler/fac/tir"
)

// CheckDecl type-checks one declaration. Mods are checked with scalar
// arguments (they are shape-polymorphic); kernels are instantiated with
// their defaults. Compile-time parameters without a default take a
// placeholder (16, 1.0, false, f32, the none/identity mods), so a file can
// be checked before it is used.
func (p *Program) CheckDecl(name string) error {
	l := p.newLowerer()
	var m *tir.Module
	err := l.catch(func() {
		switch {
		case p.consts[name] != nil:
			l.globalConst(p.consts[name], p.consts[name].Pos)
		case p.mods[name] != nil:
			md := p.mods[name]
			args := l.placeholders(md.CParams)
			l.push()
			inst := &ModInst{Decl: md, Args: l.bindCParams(md.Kind+" "+md.Name, md.CParams, args, md.Pos)}
			l.pop()
			mod, err := p.LowerMod(inst)
			if err != nil {
				panic(failure{err})
			}
			m = mod
		case p.kernels[name] != nil:
			kd := p.kernels[name]
			l.kernel(kd, l.placeholders(kd.CParams))
			m = l.mod
		default:
			panic(failure{fmt.Errorf("no declaration named %s", name)})
		}
	})
	if err != nil {
		return err
	}
	if m != nil {
		if err := tir.Verify(m); err != nil {
			return fmt.Errorf("internal compiler error: lowering %s: %w", name, err)
		}
	}
	return nil
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
				args[cp.Name] = Const{Kind: CMod, Mod: &ModInst{Decl: md}}
			}
		}
	}
	return args
}
