package blockmask

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/launch"
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

// Positions of the standard parameters of a mask lowered alone (see
// lang.ModInputs); a pointer and a length per aux tensor follow, then the
// run-time parameters.
const (
	paramB = iota
	paramH
	paramQ
	paramKV
	paramSeqQ
	paramSeqK
	paramBatch
	paramHeads
	numStdParams
)

// auxParam is the position of aux tensor i's pointer (its length follows).
func auxParam(i int) int { return numStdParams + 2*i }

// modFunc lowers a mask alone (scalar positions, or bq×bk tiles when bq > 0)
// with the given parameters replaced by constants (by position, e.g.
// paramSeqQ: an int64, a float64 or a bool, as the parameter's type
// takes), and runs the mask-analysis pipeline on it, so the mods it calls
// are inlined, compile-time conditions fold and dead code goes. The
// function keeps its parameters.
func modFunc(prog *lang.Program, inst *lang.ModInst, bq, bk int, consts map[int]any) (*tir.Module, *tir.Func, error) {
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
		c := tir.NewOp(tir.OpConst, nil, tir.Scalar(f.Params[i].Type.Elem))
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
// (head): block masks then have B = 1 (H = 1). A mask reading batch
// (num_heads) counts as reading b (h): a builder that evaluates it for a
// B of 1 (an H of 1) would give it the wrong size.
func UsesBH(prog *lang.Program, inst *lang.ModInst, seqQ, seqK int) (usesB, usesH bool, err error) {
	_, f, err := modFunc(prog, inst, 0, 0, map[int]any{paramSeqQ: int64(seqQ), paramSeqK: int64(seqK)})
	if err != nil {
		return false, false, err
	}
	usesB = hasUses(f, f.Params[paramB]) || hasUses(f, f.Params[paramBatch])
	usesH = hasUses(f, f.Params[paramH]) || hasUses(f, f.Params[paramHeads])
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

// inputArgs turns the caller's values into interpreter arguments for the
// mask's inputs after the standard parameters: a pointer and a length per
// aux tensor, then a value per run-time parameter. vals holds both by name
// ("doc" or "mask.doc", "offset" or "mask.offset"): aux tensors as
// launch.HostData takes them (a flat slice, a launch.Array) or a
// *cpu.Buffer, each checked against its declared shape for sh; run-time
// parameters as lang.ScalarParam.Convert takes them. Names the mask does
// not read are ignored.
func inputArgs(inst *lang.ModInst, sh Shape, vals map[string]any) ([]any, error) {
	var out []any
	sz := lang.Sizes{Batch: sh.B, Heads: sh.H, SeqQ: sh.SeqQ, SeqK: sh.SeqK}
	for _, p := range inst.AuxParams() {
		v, ok := lookup(vals, p.Name)
		if !ok {
			return nil, fmt.Errorf("blockmask: mask %s reads aux tensor %s (%s): pass it in aux[%q] (e.g. a []int32)", inst, p.Name, p.Type(), p.Name)
		}
		buf, shape, err := toBuffer(p.Name, p.Elem, v)
		if err == nil {
			err = p.CheckShape(shape, len(buf.Vals), sz)
		}
		if err != nil {
			return nil, fmt.Errorf("blockmask: mask %s: %w", inst, err)
		}
		out = append(out, buf, len(buf.Vals))
	}
	for _, p := range inst.ScalarParams() {
		v, ok := lookup(vals, p.Name)
		if !ok {
			return nil, fmt.Errorf("blockmask: mask %s reads run-time parameter %s: give its value by name (%q)", inst, p.Name, p.Name)
		}
		x, err := p.Convert(v)
		if err != nil {
			return nil, fmt.Errorf("blockmask: mask %s: %w", inst, err)
		}
		out = append(out, x)
	}
	return out, nil
}

// lookup finds a mask input by its name or "mask.<name>".
func lookup(vals map[string]any, name string) (any, bool) {
	if v, ok := vals[name]; ok {
		return v, true
	}
	v, ok := vals["mask."+name]
	return v, ok
}

// scalarConsts are the run-time parameters' values as constants for
// modFunc, at their positions after n aux tensors.
func scalarConsts(inst *lang.ModInst, vals map[string]any, consts map[int]any) error {
	base := auxParam(len(inst.AuxParams()))
	for i, p := range inst.ScalarParams() {
		v, ok := lookup(vals, p.Name)
		if !ok {
			return fmt.Errorf("blockmask: mask %s reads run-time parameter %s: give its value by name (%q)", inst, p.Name, p.Name)
		}
		x, err := p.Convert(v)
		if err != nil {
			return fmt.Errorf("blockmask: mask %s: %w", inst, err)
		}
		switch x := x.(type) {
		case int32:
			consts[base+i] = int64(x)
		case float32:
			consts[base+i] = float64(x)
		default:
			consts[base+i] = x
		}
	}
	return nil
}

// toBuffer makes the interpreter buffer of an aux tensor of e, and gives
// the shape of a launch.Array (nil for a flat slice or a buffer).
func toBuffer(name string, e tir.Elem, v any) (*cpu.Buffer, []int, error) {
	if x, ok := v.(*cpu.Buffer); ok {
		if x.Elem != e {
			return nil, nil, fmt.Errorf("aux tensor %s: buffer holds %s, want %s", name, x.Elem, e)
		}
		return x, nil, nil
	}
	data, shape, err := launch.HostData(e.String(), v)
	if err != nil {
		return nil, nil, fmt.Errorf("aux tensor %s: %w", name, err)
	}
	b := cpu.FromHost(name, e, data)
	if len(b.Vals) >= 1<<31 {
		return nil, nil, fmt.Errorf("aux tensor %s: %d elements is too many", name, len(b.Vals))
	}
	return b, shape, nil
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
