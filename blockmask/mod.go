package blockmask

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/passes"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// Shape is the problem a block mask is built for. B and H of 0 mean 1.
type Shape struct {
	B, H       int
	SeqQ, SeqK int
}

// Options are the block sizes; 0 means DefaultBlock.
type Options struct {
	BlockQ, BlockK int
}

func (o Options) withDefaults() Options {
	if o.BlockQ == 0 {
		o.BlockQ = DefaultBlock
	}
	if o.BlockK == 0 {
		o.BlockK = DefaultBlock
	}
	return o
}

func (s Shape) withDefaults() Shape {
	if s.B == 0 {
		s.B = 1
	}
	if s.H == 0 {
		s.H = 1
	}
	return s
}

// Positions of the standard parameters of a mask lowered alone.
const (
	paramB = iota
	paramH
	paramQ
	paramKV
	paramSeqQ
	paramSeqK
	numStdParams
)

// modFunc lowers a mask alone (scalar positions, or bq×bk tiles when bq > 0)
// with the given standard parameters replaced by constants (by position,
// e.g. paramSeqQ), and runs the mask-analysis pipeline on it, so the mods it
// calls are inlined, compile-time conditions fold and dead code goes. The
// function keeps its parameters.
func modFunc(prog *lang.Program, inst *lang.ModInst, bq, bk int, consts map[int]int64) (*tir.Module, *tir.Func, error) {
	if inst == nil {
		return nil, nil, fmt.Errorf("blockmask: no mask mod given")
	}
	if inst.Kind() != "mask" {
		return nil, nil, fmt.Errorf("blockmask: %s is a %s mod, not a mask", inst, inst.Kind())
	}
	var m *tir.Module
	var err error
	if bq > 0 {
		m, err = prog.LowerModTile(inst, bq, bk)
	} else {
		m, err = prog.LowerMod(inst)
	}
	if err != nil {
		return nil, nil, err
	}
	f := m.Func("mask")
	if f == nil || len(f.Params) < numStdParams {
		return nil, nil, fmt.Errorf("blockmask: internal error: lowering %s gave no mask function", inst)
	}
	for _, i := range slices.Sorted(maps.Keys(consts)) {
		c := tir.NewOp(tir.OpConst, nil, tir.Scalar(tir.I32))
		c.SetAttr("value", consts[i])
		f.Body.ReplaceAllUses(f.Params[i], c.Result())
		f.Body.Ops = append([]*tir.Op{c}, f.Body.Ops...)
	}
	if err := passes.RunPipeline(m, passes.MaskAnalysisPipeline, passes.Options{}); err != nil {
		return nil, nil, err
	}
	return m, f, nil
}

// UsesBH reports whether a mask reads b and h, after its compile-time
// conditions are folded and dead code removed, for sequence lengths seqQ and
// seqK. A mask that does not read b (h) gives one mask for every batch
// (head): block masks then have B = 1 (H = 1).
func UsesBH(prog *lang.Program, inst *lang.ModInst, seqQ, seqK int) (usesB, usesH bool, err error) {
	_, f, err := modFunc(prog, inst, 0, 0, map[int]int64{paramSeqQ: int64(seqQ), paramSeqK: int64(seqK)})
	if err != nil {
		return false, false, err
	}
	usesB, usesH = hasUses(f, f.Params[paramB]), hasUses(f, f.Params[paramH])
	return usesB, usesH, nil
}

func hasUses(f *tir.Func, v *tir.Value) bool {
	found := false
	f.Body.Walk(func(op *tir.Op) bool {
		if slices.Contains(op.Args, v) {
			found = true
		}
		return !found
	})
	return found
}

// maskShape is the B and H of the block mask of a mask for sh.
func maskShape(prog *lang.Program, inst *lang.ModInst, sh Shape) (b, h int, err error) {
	usesB, usesH, err := UsesBH(prog, inst, sh.SeqQ, sh.SeqK)
	if err != nil {
		return 0, 0, err
	}
	b, h = 1, 1
	if usesB {
		b = sh.B
	}
	if usesH {
		h = sh.H
	}
	return b, h, nil
}

// auxArgs turns the caller's aux tensors into interpreter arguments for the
// mask's aux parameters (a pointer and a length each). aux is keyed by the
// parameter's name ("doc", or "mask.doc"); values are []int32, []int64,
// []int, []float32, []float64, []bool or *cpu.Buffer. Keys the mask does not
// read are ignored.
func auxArgs(inst *lang.ModInst, aux map[string]any) ([]any, error) {
	var out []any
	for _, p := range inst.AuxParams() {
		v, ok := aux[p.Name]
		if !ok {
			v, ok = aux["mask."+p.Name]
		}
		if !ok {
			return nil, fmt.Errorf("blockmask: mask %s reads aux tensor %s: pass it in aux[%q] (e.g. a []int32)", inst, p.Name, p.Name)
		}
		buf, err := toBuffer(p.Name, p.Elem, v)
		if err != nil {
			return nil, fmt.Errorf("blockmask: aux tensor %s of mask %s: %w", p.Name, inst, err)
		}
		out = append(out, buf, len(buf.Vals))
	}
	return out, nil
}

func toBuffer(name string, e tir.Elem, v any) (*cpu.Buffer, error) {
	var vals []float64
	switch x := v.(type) {
	case *cpu.Buffer:
		if x.Elem != e {
			return nil, fmt.Errorf("buffer holds %s, want %s", x.Elem, e)
		}
		return x, nil
	case []int32:
		vals = convert(x)
	case []int64:
		vals = convert(x)
	case []int:
		vals = convert(x)
	case []float32:
		vals = convert(x)
	case []float64:
		vals = x
	case []bool:
		vals = make([]float64, len(x))
		for i, b := range x {
			if b {
				vals[i] = 1
			}
		}
	default:
		return nil, fmt.Errorf("got %T, want a slice of numbers or a *cpu.Buffer", v)
	}
	if e.IsInt() || e == tir.I1 {
		for i, f := range vals {
			if f != float64(int64(f)) {
				return nil, fmt.Errorf("element %d is %v, not an integer (the tensor is %s)", i, f, e)
			}
			if e == tir.I32 && (f < -1<<31 || f >= 1<<31) {
				return nil, fmt.Errorf("element %d is %v, outside i32", i, f)
			}
		}
	}
	if len(vals) >= 1<<31 {
		return nil, fmt.Errorf("%d elements is too many", len(vals))
	}
	return cpu.FromFloats(name, e, vals), nil
}

func convert[T int32 | int64 | int | float32](xs []T) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// describeOp names an op for "cannot analyze" messages.
func describeOp(op *tir.Op) string {
	s := op.Kind.String()
	if len(op.Results) > 0 {
		s += " : " + op.Results[0].Type.String()
	}
	if op.Pos.Line != 0 {
		s += " at " + op.Pos.String()
	}
	return strings.TrimSpace(s)
}
