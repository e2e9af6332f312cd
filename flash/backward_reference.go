package flash

import (
	"fmt"
	"sync"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/passes"
	"github.com/fac-compiler/fac/reference"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// Reference computes the float64 gradients of naive attention with the
// backward's mods (reference.AttentionGrad): the mask and score evaluated
// element by element on the CPU device, as Forward.Reference does, and the
// score's derivative (∂score/∂s, and ∂score/∂aux for the aux tensors of
// AuxGrads) from the score mod's tile IR differentiated and evaluated
// there too. Q, K, V and DO are read at the kernels' storage precision; O
// and LSE are recomputed, so in.O and in.LSE may be nil. DAux holds the
// aux gradients by name; with Options.Sinks, the softmax includes in.Sinks
// and DSinks holds their gradients (reference.AttentionGradSinks).
//
// The aux derivatives cost one pass over each aux tensor per kept pair
// (the derivative adds into a scratch copy, which is then read back), so
// keep aux tensors small or problems short.
func (bw *Backward) Reference(in BackwardInputs, sh Shape) (reference.Grads, error) {
	if err := sh.Validate(); err != nil {
		return reference.Grads{}, err
	}
	if err := bw.masker.checkAux(in.Aux, sh); err != nil {
		return reference.Grads{}, err
	}
	if err := bw.masker.checkScalars(in.Scalars); err != nil {
		return reference.Grads{}, err
	}
	if err := bw.checkSinks(in.Sinks, sh); err != nil {
		return reference.Grads{}, err
	}
	fin := in.forwardInputs()
	for _, t := range []struct {
		name string
		xs   []float32
		n    int
	}{{"Q", in.Q, sh.Batch * sh.Heads * sh.SeqQ * sh.Dim}, {"K", in.K, sh.Batch * sh.KV() * sh.SeqK * sh.Dim},
		{"V", in.V, sh.Batch * sh.KV() * sh.SeqK * sh.VDim()}, {"DO", in.DO, sh.Batch * sh.Heads * sh.SeqQ * sh.VDim()}} {
		if len(t.xs) != t.n {
			return reference.Grads{}, fmt.Errorf("tensor %s has %d elements, shape %+v needs %d", t.name, len(t.xs), sh, t.n)
		}
	}
	res := bw.main.res
	vals := fin.modValues()
	maskFn, err := modFunc(res.Program, res.Mask, sh, vals)
	if err != nil {
		return reference.Grads{}, err
	}
	scoreFn, err := modFunc(res.Program, res.Score, sh, vals)
	if err != nil {
		return reference.Grads{}, err
	}
	// The reference calls the mods from several goroutines.
	var evalErr firstError
	note := evalErr.note
	var deriv reference.ScoreDerivFunc
	gradLens := map[string]int{}
	if scoreFn != nil {
		var grads []string
		if deriv, grads, err = scoreDeriv(res.Program, res.Score, sh, vals, bw.AuxGrads(), note); err != nil {
			return reference.Grads{}, err
		}
		lens, err := auxLens(in.Aux)
		if err != nil {
			return reference.Grads{}, err
		}
		for _, a := range grads {
			if n, ok := lookupLen(lens, a); ok {
				gradLens[a] = n
			}
		}
	}
	mask, score := refMods(maskFn, scoreFn, -1, &evalErr)
	scale := float64(launch.Problem{Shape: sh, Scale: in.Scale}.SoftmaxScale())
	q, k, v, do := roundTo(in.Q, bw.dtype), roundTo(in.K, bw.dtype), roundTo(in.V, bw.dtype), roundTo(in.DO, bw.dtype)
	var sinks []float64
	if in.Sinks != nil {
		sinks = make([]float64, len(in.Sinks))
		for i, x := range in.Sinks {
			sinks[i] = float64(x)
		}
	}
	g := reference.AttentionGradSinks(q, k, v, do, refShape(sh), scale, mask, score, deriv, gradLens, sinks)
	return g, evalErr.get()
}

// scoreDeriv is score mod m's derivative evaluated on the CPU device: the
// mod lowered alone (lang.Program.LowerMod) and differentiated by
// passes.Differentiate, as the kernels' grad(score, ...) is. It returns
// ∂score/∂s and reports ∂score/∂t[i] for each float aux tensor t named in
// grads (by short name); names are the aux tensors it reports. An
// evaluation error goes to note (the derivative is then 0).
func scoreDeriv(prog *lang.Program, m *lang.ModInst, sh Shape, vals map[string]any, grads []string, note func(error)) (reference.ScoreDerivFunc, []string, error) {
	mod, err := prog.LowerMod(m)
	if err != nil {
		return nil, nil, err
	}
	f := mod.Func(m.Kind())
	if f == nil {
		return nil, nil, fmt.Errorf("internal error: lowered score %s has no function %s", m, m.Kind())
	}
	// Fixed arguments after the positions, as modFunc passes them; the
	// float aux tensors that get gradients are Differentiate's Memory.
	fixed := []any{int32(sh.SeqQ), int32(sh.SeqK), int32(sh.Batch), int32(sh.Heads)}
	type memAux struct {
		name string
		n    int
	}
	var mem []int
	var memAuxes []memAux
	want := map[string]bool{}
	for _, a := range grads {
		want[a] = true
	}
	param := 9 // s, b, h, q_idx, kv_idx, seqlen_q, seqlen_k, batch, num_heads
	for _, a := range m.AuxParams() {
		buf, err := auxBuffer(m, a, sh, vals)
		if err != nil {
			return nil, nil, err
		}
		fixed = append(fixed, buf, int32(len(buf.Vals)))
		if a.Elem.IsFloat() && want[a.Name] {
			if param >= len(f.Params) || !f.Params[param].Type.Ptr {
				return nil, nil, fmt.Errorf("internal error: score %s: parameter %d is not aux tensor %s", m, param, a.Name)
			}
			mem = append(mem, param)
			memAuxes = append(memAuxes, memAux{a.Name, len(buf.Vals)})
		}
		param += 2
	}
	for _, p := range m.ScalarParams() {
		v, ok := lookupInput(vals, m.Kind(), p.Name)
		if !ok {
			return nil, nil, fmt.Errorf("missing run-time parameter %q (parameter %s.%s)", p.Name, m.Kind(), p.Name)
		}
		x, err := p.Convert(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", m.Kind(), m, err)
		}
		fixed = append(fixed, x)
	}
	g, err := passes.Differentiate(mod, f, passes.GradSpec{Name: "grad." + m.Kind(), WRT: 0, Memory: mem})
	if err != nil {
		return nil, nil, fmt.Errorf("grad of score %s: %w", m, err)
	}
	mod.Funcs = append(mod.Funcs, g)
	fn, err := cpu.Prepare(mod, g.Name)
	if err != nil {
		return nil, nil, err
	}
	// Scratch gradient buffers, one set per concurrent caller.
	pool := sync.Pool{New: func() any {
		bufs := make([]*cpu.Buffer, len(memAuxes))
		for i, a := range memAuxes {
			bufs[i] = cpu.NewBuffer(a.name+".grad", tir.F32, a.n)
		}
		return bufs
	}}
	var names []string
	for _, a := range memAuxes {
		names = append(names, a.name)
	}
	return func(s float64, b, h, i, j int, aux func(string, int, float64)) float64 {
		bufs := pool.Get().([]*cpu.Buffer)
		defer pool.Put(bufs)
		args := make([]any, 0, 6+len(fixed)+len(bufs))
		args = append(args, float32(1), float32(s), int32(b), int32(h), int32(i), int32(j))
		args = append(args, fixed...)
		for _, buf := range bufs {
			args = append(args, buf)
		}
		r, err := fn.Call(args...)
		if err != nil {
			note(fmt.Errorf("derivative of score %s: %w", m, err))
			return 0
		}
		for bi, buf := range bufs {
			for idx, d := range buf.Vals {
				if d != 0 {
					aux(memAuxes[bi].name, idx, d)
					buf.Vals[idx] = 0
				}
			}
		}
		return r[0].Vals[0]
	}, names, nil
}
