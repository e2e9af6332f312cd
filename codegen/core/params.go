package core

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/tir"
)

// Parameters that the code generator adds after the tile-IR ones: today
// TMA tensor maps (a CUtensorMap passed by value as a grid-constant
// parameter, which the runtime encodes from the Param's TMA spec).

// extraParam is a parameter a phase added before lower-llvm.
type extraParam struct {
	p  Param
	lt types.Type
	v  *ir.Param   // set by lowerKernel
	g  value.Value // its generic address (entry block), once asked for
}

// tensorMapType is a CUtensorMap: 128 opaque bytes, 64-byte aligned.
var tensorMapType = types.NewArray(128, types.I8)

// AddTensorMapParam appends a tensor-map parameter (before lower-llvm)
// for a tensor of elem, and returns its index among the added parameters
// (TensorMapParam): an existing one when it maps the same. The name is
// made unique.
func (pl *Plan) AddTensorMapParam(name string, elem tir.Elem, spec *artifact.TMA) int {
	for i, e := range pl.extra {
		if e.p.Kind == ParamTensorMap && e.p.Type.Elem == elem && reflect.DeepEqual(e.p.TMA, spec) {
			return i // the same map (the overlapped forward's last V tile)
		}
	}
	base, n := name, 1
	for pl.paramNamed(name) {
		n++
		name = fmt.Sprintf("%s_%d", base, n)
	}
	pl.extra = append(pl.extra, &extraParam{p: Param{Name: name, Type: tir.Type{Elem: elem}, Kind: ParamTensorMap, TMA: spec},
		lt: types.NewPointer(tensorMapType)})
	return len(pl.extra) - 1
}

func (pl *Plan) paramNamed(name string) bool {
	for _, p := range pl.f.Params {
		if p.Name == name {
			return true
		}
	}
	for _, e := range pl.extra {
		if e.p.Name == name {
			return true
		}
	}
	return false
}

// TensorMapParam is the generic address (i64) of added parameter i, the
// operand TMA instructions take (cvta.param of the grid-constant
// parameter).
func (em *Emitter) TensorMapParam(i int) value.Value {
	e := em.plan.extra[i]
	if e.v == nil {
		Fail("internal error: tensor map parameter %s used before lower-llvm", e.p.Name)
	}
	if e.g == nil {
		e.g = em.entry.NewPtrToInt(e.v, types.I64)
	}
	return e.g
}

// lowerExtraParams declares the added parameters after the tile-IR ones.
func (em *Emitter) lowerExtraParams() []*ir.Param {
	var out []*ir.Param
	for _, e := range em.plan.extra {
		p := ir.NewParam(sanitize(e.p.Name), e.lt)
		if e.p.Kind == ParamTensorMap {
			p.Attrs = append(p.Attrs, ir.Byval{Typ: tensorMapType}, ir.Align(64))
		}
		e.v = p
		out = append(out, p)
		em.params = append(em.params, e.p)
	}
	return out
}

// gridConstants is the nvvm annotation marking the tensor-map parameters
// grid constants (1-based indices), or "" when there are none.
func (em *Emitter) gridConstants() string {
	var idx []string
	for i, e := range em.plan.extra {
		if e.p.Kind == ParamTensorMap {
			idx = append(idx, fmt.Sprintf("i32 %d", len(em.f.Params)+i+1))
		}
	}
	if len(idx) == 0 {
		return ""
	}
	return "{" + strings.Join(idx, ", ") + "}"
}
