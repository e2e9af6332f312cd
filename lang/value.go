package lang

import (
	"fmt"
	"math"
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

	// prog is the program the instance was made in; it resolves the mods
	// the instance calls, whose inputs become the instance's (Inputs).
	prog *Program
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

// AuxParams lists the aux tensors the mod reads: its own, then those of
// the mods it calls (by name: one tensor per name), in the order of the
// parameters of the mod lowered alone (see ModInputs).
func (m *ModInst) AuxParams() []AuxParam { return m.Inputs().Aux }

// ScalarParams lists the run-time parameters the mod reads, its own and
// those of the mods it calls, in parameter order (see ModInputs).
func (m *ModInst) ScalarParams() []ScalarParam { return m.Inputs().Scalars }

// Inputs is what the mod reads besides its positions. It is found by
// lowering the mod (once per program and instance); for an instance made
// outside a program, or one that does not lower, it is what the mod
// declares.
func (m *ModInst) Inputs() ModInputs {
	if m.prog != nil {
		if in, err := m.prog.modInputs(m); err == nil {
			return in
		}
	}
	return m.declaredInputs()
}

// declaredInputs reads the declaration alone: aux tensors without their
// shapes, and run-time parameters.
func (m *ModInst) declaredInputs() ModInputs {
	var in ModInputs
	for _, p := range m.Decl.Params[m.numStd():] {
		switch {
		case p.Type != nil && p.Type.Name == "tensor" && p.Type.Elem != nil:
			e, _ := elemByLangName(p.Type.Elem.Name)
			in.Aux = append(in.Aux, AuxParam{Name: p.Name, Elem: e, Mod: m.Name()})
		case p.Type != nil && p.Type.Elem == nil:
			if e, ok := elemByLangName(p.Type.Name); ok {
				in.Scalars = append(in.Scalars, ScalarParam{Name: p.Name, Elem: e, Mod: m.Name()})
			}
		}
	}
	return in
}

func (m *ModInst) numStd() int {
	n := 4
	if m.Decl.Kind == "score" {
		n = 5
	}
	return min(n, len(m.Decl.Params))
}

// ModInputs is what a mod reads besides its positions. A mod lowered alone
// (Program.LowerMod, LowerModTile) takes, after its positions (s first for
// a score), seqlen_q, seqlen_k, batch and num_heads (i32 scalars), then a
// pointer and a length (i32) per aux tensor in Aux order, then one value
// per run-time parameter in Scalars order.
type ModInputs struct {
	Aux     []AuxParam
	Scalars []ScalarParam
	// Batch and Heads say whether the mod reads batch and num_heads (a
	// kernel then gets i32 parameters of these names).
	Batch, Heads bool
}

// AuxParam is one aux tensor a mod reads, such as document ids.
type AuxParam struct {
	Name string
	Elem tir.Elem
	// Dims is the declared shape (tensor[T][d0, d1, ...]), nil for a 1-D
	// tensor of any length (tensor[T]).
	Dims []Dim
	// Mod is the name of the mod that declares it.
	Mod string
}

// Type prints the declared type: `tensor[i32]`, `tensor[f32][num_heads, 64]`.
func (a AuxParam) Type() string {
	s := "tensor[" + elemLangName(a.Elem) + "]"
	if a.Dims != nil {
		s += dimsString(a.Dims)
	}
	return s
}

// Sizes are the problem sizes a declared aux shape depends on.
type Sizes struct {
	Batch, Heads, SeqQ, SeqK int
}

// CheckShape checks an aux tensor's data, of n elements, against the
// declared type for a problem of the given sizes: with shape (from an N-D
// array) dimension by dimension, without (a flat slice) by the number of
// elements the declared shape has. A tensor declared without a shape
// takes any 1-D data. Errors name the tensor and the dimension: "aux
// tensor doc (tensor[i32][batch, seqlen_q]) has 3 rows (dimension 0,
// batch), the call has batch 2".
func (a AuxParam) CheckShape(shape []int, n int, sz Sizes) error {
	what := fmt.Sprintf("aux tensor %s (%s)", a.Name, a.Type())
	if n > math.MaxInt32 {
		return fmt.Errorf("%s has %d elements, more than 32-bit offsets address", what, n)
	}
	if a.Dims == nil {
		if shape != nil && len(shape) != 1 {
			return fmt.Errorf("%s is 1-D, got shape %v (declare its shape, e.g. tensor[T][num_heads, seqlen_q], or pass a flat array)", what, shape)
		}
		return nil
	}
	want := make([]int64, len(a.Dims))
	total := int64(1)
	for i, d := range a.Dims {
		want[i] = d.Eval(sz.Batch, sz.Heads, sz.SeqQ, sz.SeqK)
		if want[i] <= 0 {
			return fmt.Errorf("%s: dimension %d, %s, is %d for this call; a dimension must be positive", what, i, d, want[i])
		}
		if total > math.MaxInt32/want[i] {
			return fmt.Errorf("%s is %v for this call: more elements than 32-bit offsets address", what, want)
		}
		total *= want[i]
	}
	if shape == nil {
		if int64(n) != total {
			return fmt.Errorf("%s has %d elements; for this call it is %v, %d elements", what, n, want, total)
		}
		return nil
	}
	if len(shape) != len(want) {
		return fmt.Errorf("%s has shape %v; it is %d-D: %v for this call", what, shape, len(want), want)
	}
	for i, d := range a.Dims {
		if int64(shape[i]) == want[i] {
			continue
		}
		unit := "entries"
		switch {
		case len(want) == 1:
			unit = "elements"
		case i == 0:
			unit = "rows"
		case i == len(want)-1:
			unit = "columns"
		}
		call := fmt.Sprintf("%s = %d", d, want[i])
		switch {
		case d.isConst():
			call = fmt.Sprintf("it declares %d", want[i])
		case d == Dim{Batch: 1}, d == Dim{Heads: 1}, d == Dim{SeqQ: 1}, d == Dim{SeqK: 1}:
			call = fmt.Sprintf("%s %d", d, want[i])
		}
		return fmt.Errorf("%s has %d %s (dimension %d, %s), the call has %s", what, shape[i], unit, i, d, call)
	}
	return nil
}

// ScalarParam is one run-time parameter of a mod: a scalar given at
// launch, such as a decode offset.
type ScalarParam struct {
	Name string
	Elem tir.Elem // I32, F32 or I1
	Mod  string   // the mod that declares it
}

// Convert checks a value given for the parameter (int, int32, int64,
// float32, float64 or bool) and returns it as the Go type of its element
// type: int32, float32 or bool. Integers must fit; an f32 parameter takes
// integers and floats.
func (p ScalarParam) Convert(v any) (any, error) {
	what := fmt.Sprintf("run-time parameter %s (%s)", p.Name, elemLangName(p.Elem))
	switch p.Elem {
	case tir.I1:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case tir.I32:
		var i int64
		switch x := v.(type) {
		case int:
			i = int64(x)
		case int32:
			i = int64(x)
		case int64:
			i = x
		default:
			return nil, fmt.Errorf("%s takes an integer, got %T", what, v)
		}
		if i < math.MinInt32 || i > math.MaxInt32 {
			return nil, fmt.Errorf("%s = %d does not fit i32", what, i)
		}
		return int32(i), nil
	case tir.F32:
		switch x := v.(type) {
		case float32:
			return x, nil
		case float64:
			return float32(x), nil
		case int:
			return float32(x), nil
		case int32:
			return float32(x), nil
		case int64:
			return float32(x), nil
		}
	}
	return nil, fmt.Errorf("%s cannot take %T", what, v)
}

// Dim is a declared dimension of an aux tensor: an integer combination of
// the problem's sizes, Const + Batch·batch + Heads·num_heads +
// SeqQ·seqlen_q + SeqK·seqlen_k.
type Dim struct {
	Const, Batch, Heads, SeqQ, SeqK int64
}

// Eval is the dimension's size for a problem.
func (d Dim) Eval(batch, heads, seqQ, seqK int) int64 {
	return d.Const + d.Batch*int64(batch) + d.Heads*int64(heads) + d.SeqQ*int64(seqQ) + d.SeqK*int64(seqK)
}

// String prints the dimension as it is written: "batch",
// "seqlen_q + seqlen_k - 1", "64".
func (d Dim) String() string {
	var b strings.Builder
	term := func(c int64, name string) {
		if c == 0 {
			return
		}
		switch {
		case b.Len() == 0 && c < 0:
			b.WriteString("-")
		case b.Len() > 0 && c < 0:
			b.WriteString(" - ")
		case b.Len() > 0:
			b.WriteString(" + ")
		}
		a := c
		if a < 0 {
			a = -a
		}
		switch {
		case name == "":
			b.WriteString(strconv.FormatInt(a, 10))
		case a == 1:
			b.WriteString(name)
		default:
			b.WriteString(strconv.FormatInt(a, 10) + " * " + name)
		}
	}
	term(d.Batch, "batch")
	term(d.Heads, "num_heads")
	term(d.SeqQ, "seqlen_q")
	term(d.SeqK, "seqlen_k")
	term(d.Const, "")
	if b.Len() == 0 {
		return "0"
	}
	return b.String()
}

func dimsString(ds []Dim) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func elemLangName(e tir.Elem) string {
	if e == tir.I1 {
		return "bool"
	}
	return e.String()
}

// val is what an expression evaluates to while lowering.
type val struct {
	c   *Const     // compile-time value, or
	v   *tir.Value // run-time value, or
	aux *auxTensor // an aux tensor (only indexable)
	pos lexer.Position
	// noValue names the function whose call this is, when it returned
	// nothing (for the error where a value is needed).
	noValue string
	// poisoned marks the binding of a name whose let or var failed while
	// checking (see tryStmt).
	poisoned bool
}

type auxTensor struct {
	key      string // the mod's name for it: "doc"
	name     string // in messages and gradients: key, or the kernel's "mask.doc"
	ptr, len *tir.Value
	elem     tir.Elem
	dims     []Dim  // declared shape; nil: 1-D of any length
	mod      string // the mod that declares it
}

func (a *auxTensor) param() AuxParam {
	return AuxParam{Name: a.name, Elem: a.elem, Dims: a.dims, Mod: a.mod}
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
		return fmt.Sprintf("aux tensor %s: %s", v.aux.name, v.aux.param().Type())
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
