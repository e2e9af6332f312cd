package fac

import (
	"fmt"
	"sync"

	"github.com/fac-compiler/fac/lang"
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
	maskFn, err := modFunc(f.res.Program, f.res.Mask, sh, in.Aux)
	if err != nil {
		return nil, nil, err
	}
	scoreFn, err := modFunc(f.res.Program, f.res.Score, sh, in.Aux)
	if err != nil {
		return nil, nil, err
	}
	var mask reference.MaskFunc
	var score reference.ScoreFunc
	// The reference calls the mods from several goroutines.
	var mu sync.Mutex
	var evalErr error
	note := func(err error) {
		mu.Lock()
		if evalErr == nil {
			evalErr = err
		}
		mu.Unlock()
	}
	if maskFn != nil {
		mask = func(b, h, i, j int) bool {
			r, err := maskFn(0, b, h, i, j)
			if err != nil {
				note(err)
			}
			return r != 0
		}
	}
	if scoreFn != nil {
		score = func(s float64, b, h, i, j int) float64 {
			r, err := scoreFn(float32(s), b, h, i, j)
			if err != nil {
				note(err)
			}
			return r
		}
	}
	scale := float64(f.problem(sh, in.Scale).SoftmaxScale())
	// The reference sees the inputs at the kernel's storage precision.
	q, k, v := roundTo(in.Q, f.dtype), roundTo(in.K, f.dtype), roundTo(in.V, f.dtype)
	o, lse = reference.Attention(q, k, v, reference.Shape{B: sh.Batch, H: sh.Heads, HKV: sh.KV(), Sq: sh.SeqQ, Sk: sh.SeqK, D: sh.Dim}, scale, mask, score)
	return o, lse, evalErr
}

func roundTo(xs []float32, e tir.Elem) []float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = float64(x)
	}
	return cpu.FromFloats("", e, v).Vals
}

// modFunc evaluates a mod on scalars through the interpreter; nil for the
// trivial mods (none, identity), which need no evaluation.
func modFunc(prog *lang.Program, m *lang.ModInst, sh Shape, aux map[string]any) (func(s float32, b, h, i, j int) (float64, error), error) {
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
	var extra []any
	for _, a := range m.AuxParams() {
		buf, err := auxBuffer(m.Kind()+"."+a.Name, a.Name, aux)
		if err != nil {
			return nil, err
		}
		extra = append(extra, buf, int32(len(buf.Vals)))
	}
	isScore := m.Kind() == "score"
	return func(s float32, b, h, i, j int) (float64, error) {
		args := make([]any, 0, 7+len(extra))
		if isScore {
			args = append(args, s)
		}
		args = append(args, int32(b), int32(h), int32(i), int32(j), int32(sh.SeqQ), int32(sh.SeqK))
		args = append(args, extra...)
		r, err := fn.Call(args...)
		if err != nil {
			return 0, err
		}
		return r[0].Vals[0], nil
	}, nil
}

// auxBuffer is the host aux tensor named full ("mask.doc") or short ("doc").
func auxBuffer(full, short string, aux map[string]any) (*cpu.Buffer, error) {
	t, ok := aux[full]
	if !ok {
		t, ok = aux[short]
	}
	if !ok {
		return nil, fmt.Errorf("missing aux tensor %q (parameter %s)", short, full)
	}
	switch t := t.(type) {
	case []int32:
		return cpu.FromI32(full, t), nil
	case []float32:
		return cpu.FromF32(full, t), nil
	}
	return nil, fmt.Errorf("aux tensor %q must be []int32 or []float32, got %T", short, t)
}

// CountPairs counts the (q, kv) pairs the mask keeps for batch 0, head 0,
// evaluating the mod on the reference device.
func (f *Forward) CountPairs(sh Shape, aux map[string]any) (int64, error) {
	maskFn, err := modFunc(f.res.Program, f.res.Mask, sh, aux)
	if err != nil {
		return 0, err
	}
	if maskFn == nil {
		return int64(sh.SeqQ) * int64(sh.SeqK), nil
	}
	var n int64
	for i := 0; i < sh.SeqQ; i++ {
		for j := 0; j < sh.SeqK; j++ {
			r, err := maskFn(0, 0, 0, i, j)
			if err != nil {
				return 0, err
			}
			if r != 0 {
				n++
			}
		}
	}
	return n, nil
}
