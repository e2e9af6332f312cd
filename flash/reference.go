package flash

import (
	"fmt"
	"sync"

	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/reference"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// Reference computes naive float64 attention with the same mods, evaluated
// element by element on the CPU device, for checking any device's output.
func (f *Forward) Reference(in Inputs, sh Shape) (o, lse []float64, err error) {
	if err := sh.Validate(); err != nil {
		return nil, nil, err
	}
	if err := f.checkInputs(in, sh); err != nil {
		return nil, nil, err
	}
	var evalErr firstError
	mask, score, err := f.refModsFor(sh, in.modValues(), -1, &evalErr)
	if err != nil {
		return nil, nil, err
	}
	scale := float64(f.problem(sh, in.Scale).SoftmaxScale())
	// The reference sees the inputs at the kernel's storage precision.
	q, k, v := roundTo(in.Q, f.dtype), roundTo(in.K, f.dtype), roundTo(in.V, f.dtype)
	o, lse = reference.AttentionSinks(q, k, v, refShape(sh), scale, mask, score, float64s(in.Sinks))
	return o, lse, evalErr.get()
}

// refShape is sh as the float64 reference takes it.
func refShape(sh Shape) reference.Shape {
	return reference.Shape{B: sh.Batch, H: sh.Heads, HKV: sh.KV(), Sq: sh.SeqQ, Sk: sh.SeqK, D: sh.Dim, DV: sh.VDim()}
}

func roundTo(xs []float32, e tir.Elem) []float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = float64(x)
	}
	return cpu.FromFloats("", e, v).Vals
}

// modFunc evaluates a mod on scalars through the interpreter; nil for the
// trivial mods (none, identity), which need no evaluation. vals holds the
// mod's aux tensors (checked against their declared shapes for sh) and
// run-time parameters by name ("doc" or "mask.doc").
// modFixedArgs are a mod's arguments after the positions: seqlen_q,
// seqlen_k, batch, num_heads, then its inputs (lang.ModInputs): each aux
// tensor and its length, each run-time parameter.
func modFixedArgs(m *lang.ModInst, sh Shape, vals map[string]any) ([]any, error) {
	fixed := []any{int32(sh.SeqQ), int32(sh.SeqK), int32(sh.Batch), int32(sh.Heads)}
	for _, a := range m.AuxParams() {
		buf, err := auxBuffer(m, a, sh, vals)
		if err != nil {
			return nil, err
		}
		fixed = append(fixed, buf, int32(len(buf.Vals)))
	}
	for _, p := range m.ScalarParams() {
		v, ok := lookupInput(vals, m.Kind(), p.Name)
		if !ok {
			return nil, fmt.Errorf("missing run-time parameter %q (parameter %s.%s)", p.Name, m.Kind(), p.Name)
		}
		x, err := p.Convert(v)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", m.Kind(), m, err)
		}
		fixed = append(fixed, x)
	}
	return fixed, nil
}

func modFunc(prog *lang.Program, m *lang.ModInst, sh Shape, vals map[string]any) (func(s float32, b, h, i, j int) (float64, error), error) {
	if m == nil || m.Name() == "none" || m.Name() == "identity" {
		return nil, nil
	}
	mod, err := prog.LowerMod(m)
	if err != nil {
		return nil, err
	}
	fn, err := cpu.Prepare(mod, m.Kind())
	if err != nil {
		return nil, err
	}
	fixed, err := modFixedArgs(m, sh, vals)
	if err != nil {
		return nil, err
	}
	isScore := m.Kind() == "score"
	return func(s float32, b, h, i, j int) (float64, error) {
		args := make([]any, 0, 5+len(fixed))
		if isScore {
			args = append(args, s)
		}
		args = append(args, int32(b), int32(h), int32(i), int32(j))
		args = append(args, fixed...)
		r, err := fn.Call(args...)
		if err != nil {
			return 0, err
		}
		return r[0].Vals[0], nil
	}, nil
}

// lookupInput finds a mod input by "<kind>.<name>" or its short name.
func lookupInput(vals map[string]any, kind, name string) (any, bool) {
	if v, ok := vals[kind+"."+name]; ok {
		return v, true
	}
	v, ok := vals[name]
	return v, ok
}

// auxBuffer is mod m's host aux tensor a, named "<kind>.<name>" or by its
// short name, as an interpreter buffer, checked against its declaration.
func auxBuffer(m *lang.ModInst, a lang.AuxParam, sh Shape, vals map[string]any) (*cpu.Buffer, error) {
	full := m.Kind() + "." + a.Name
	t, ok := lookupInput(vals, m.Kind(), a.Name)
	if !ok {
		return nil, fmt.Errorf("missing aux tensor %q (parameter %s)", a.Name, full)
	}
	if err := checkAuxValue(m, a, t, sh); err != nil {
		return nil, err
	}
	if b, ok := t.(*cpu.Buffer); ok {
		return b, nil
	}
	data, _, err := launch.HostData(elemName(a.Elem), t)
	if err != nil {
		return nil, err
	}
	return cpu.FromHost(full, a.Elem, data), nil
}

// CountPairs counts the (q, kv) pairs the mask keeps for batch 0, head 0.
// aux holds the mask's aux tensors and run-time parameters by name. It
// counts through the block mask (blockmask.KeptPairs): full blocks by
// their area, partial blocks row by row with the analytic bounds, or, for
// masks they cannot bound (aux tensors, floats), by evaluating the partial
// blocks on the CPU device: O(blocks), not O(SeqQ·SeqK).
func (f *Forward) CountPairs(sh Shape, aux map[string]any) (int64, error) {
	if f.res.Mask == nil || f.res.Mask.Name() == "none" {
		return int64(sh.SeqQ) * int64(sh.SeqK), nil
	}
	sq, sk := f.sparse()
	n, _, _, err := blockmask.KeptPairs(f.res.Program, f.res.Mask, blockmask.Shape{B: sh.Batch, H: sh.Heads, SeqQ: sh.SeqQ, SeqK: sh.SeqK},
		blockmask.Options{BlockQ: sq, BlockK: sk}, aux)
	if err != nil {
		return 0, err
	}
	return n[0], nil
}

// modEval is a mod evaluated on scalars through the interpreter (modFunc).
type modEval = func(s float32, b, h, i, j int) (float64, error)

// firstError keeps the first error of mods that the reference evaluates
// from several goroutines.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (e *firstError) note(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
}

func (e *firstError) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// refModsFor is refMods of f's mask and score interpreted for shape sh
// (one sequence's lengths in a per-sequence call) with inputs vals.
func (f *Forward) refModsFor(sh Shape, vals map[string]any, batch int, errs *firstError) (reference.MaskFunc, reference.ScoreFunc, error) {
	maskFn, err := modFunc(f.res.Program, f.res.Mask, sh, vals)
	if err != nil {
		return nil, nil, err
	}
	scoreFn, err := modFunc(f.res.Program, f.res.Score, sh, vals)
	if err != nil {
		return nil, nil, err
	}
	mask, score := refMods(maskFn, scoreFn, batch, errs)
	return mask, score, nil
}

// refMods wraps interpreted mods as the float64 reference's callbacks
// (nil where the mod is trivial); batch ≥ 0 replaces the reference's batch
// index (varlen: the sequence's index). Evaluation errors go to errs.
func refMods(maskFn, scoreFn modEval, batch int, errs *firstError) (reference.MaskFunc, reference.ScoreFunc) {
	var mask reference.MaskFunc
	var score reference.ScoreFunc
	pick := func(b int) int {
		if batch >= 0 {
			return batch
		}
		return b
	}
	if maskFn != nil {
		mask = func(b, h, i, j int) bool {
			r, err := maskFn(0, pick(b), h, i, j)
			if err != nil {
				errs.note(err)
			}
			return r != 0
		}
	}
	if scoreFn != nil {
		score = func(s float64, b, h, i, j int) float64 {
			r, err := scoreFn(float32(s), pick(b), h, i, j)
			if err != nil {
				errs.note(err)
			}
			return r
		}
	}
	return mask, score
}

// float64s is xs widened (nil stays nil: no sinks).
func float64s(xs []float32) []float64 {
	if xs == nil {
		return nil
	}
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}
