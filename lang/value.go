package lang

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/fac-compiler/fac/tir"
)

// ConstKind is the kind of a compile-time value.
type ConstKind uint8

// Compile-time value kinds; they are also the kinds of compile-time parameters.
const (
	CInt ConstKind = iota
	CFloat
	CBool
	CType
	CMod
)

var constKindNames = [...]string{CInt: "i32", CFloat: "f32", CBool: "bool", CType: "type", CMod: "mod"}

func (k ConstKind) String() string { return constKindNames[k] }

// Const is a compile-time value: a number, a bool, an element type or an
// instantiated mod. Numbers are untyped: they take the type of what they
// meet, like Go's constants.
type Const struct {
	Kind ConstKind
	I    int64
	F    float64
	B    bool
	T    tir.Elem
	Mod  *ModInst
}

// IntConst, FloatConst, BoolConst and TypeConst make compile-time values.
func IntConst(i int64) Const     { return Const{Kind: CInt, I: i} }
func FloatConst(f float64) Const { return Const{Kind: CFloat, F: f} }
func BoolConst(b bool) Const     { return Const{Kind: CBool, B: b} }
func TypeConst(e tir.Elem) Const { return Const{Kind: CType, T: e} }

func (c Const) String() string {
	switch c.Kind {
	case CInt:
		return strconv.FormatInt(c.I, 10)
	case CFloat:
		return tir.FormatFloat(c.F)
	case CBool:
		return strconv.FormatBool(c.B)
	case CType:
		return c.T.String()
	case CMod:
		return c.Mod.String()
	}
	return "?"
}

// float returns the numeric value as a float64.
func (c Const) float() float64 {
	if c.Kind == CInt {
		return float64(c.I)
	}
	return c.F
}

// ModInst is a mod with its compile-time arguments bound.
type ModInst struct {
	Decl *ModDecl
	Args []Const // one per Decl.CParams
}

// Kind is "mask" or "score".
func (m *ModInst) Kind() string { return m.Decl.Kind }

// Name is the mod's declared name.
func (m *ModInst) Name() string { return m.Decl.Name }

// String prints the instantiation as it would be written: `sliding_window(256, 0)`.
func (m *ModInst) String() string {
	if len(m.Args) == 0 {
		return m.Decl.Name
	}
	parts := make([]string, len(m.Args))
	for i, a := range m.Args {
		parts[i] = a.String()
	}
	return m.Decl.Name + "(" + strings.Join(parts, ", ") + ")"
}

// AuxParams lists the mod's aux tensor parameters (name and element type).
func (m *ModInst) AuxParams() []AuxParam {
	var out []AuxParam
	for _, p := range m.Decl.Params[m.numStd():] {
		if p.Type != nil && p.Type.Name == "tensor" && p.Type.Elem != nil {
			e, _ := tir.ElemByName(p.Type.Elem.Name)
			if p.Type.Elem.Name == "bool" {
				e = tir.I1
			}
			out = append(out, AuxParam{Name: p.Name, Elem: e})
		}
	}
	return out
}

func (m *ModInst) numStd() int {
	n := 4
	if m.Decl.Kind == "score" {
		n = 5
	}
	return min(n, len(m.Decl.Params))
}

// AuxParam is one aux tensor a mod reads, such as document ids.
type AuxParam struct {
	Name string
	Elem tir.Elem
}

// val is what an expression evaluates to while lowering.
type val struct {
	c   *Const     // compile-time value, or
	v   *tir.Value // run-time value, or
	aux *auxTensor // an aux tensor (only indexable)
	pos lexer.Position
}

type auxTensor struct {
	name     string
	ptr, len *tir.Value
	elem     tir.Elem
}

func constVal(c Const, pos lexer.Position) val { return val{c: &c, pos: pos} }

func (v val) describe() string {
	switch {
	case v.c != nil:
		switch v.c.Kind {
		case CInt:
			return "integer constant " + v.c.String()
		case CFloat:
			return "float constant " + v.c.String()
		case CBool:
			return "bool constant " + v.c.String()
		case CType:
			return "type " + v.c.String()
		case CMod:
			return "mod " + v.c.String()
		}
	case v.aux != nil:
		return fmt.Sprintf("aux tensor %s: tensor[%s]", v.aux.name, v.aux.elem)
	case v.v != nil:
		return typeName(v.v.Type)
	}
	return "nothing"
}

// typeName prints a type the way users write it in the language.
func typeName(t tir.Type) string {
	e := t.Elem.String()
	if t.Elem == tir.I1 {
		e = "bool"
	}
	if t.Ptr {
		e = "ptr[" + e + "]"
	}
	if t.IsScalar() {
		return e
	}
	return e + tir.ShapeString(t.Shape)
}
