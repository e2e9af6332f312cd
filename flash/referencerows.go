package flash

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/reference"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// RefRow names one query row of a problem: batch B, head H, position I.
type RefRow = reference.Row

// refChunk is how many keys ReferenceRows hands the mods at once.
const refChunk = 1024

// ReferenceRows is Reference on some query rows only: O's row (DimV values)
// and LSE of each of rows, in order, exactly the values Reference gives for
// them. A row costs O(SeqK·Dim) and no O(SeqQ·SeqK) memory, so a check can
// sample rows of a problem whose full reference would take hours (a
// million positions). The mods are evaluated on the CPU device a chunk of
// keys at a time (lowered for tiles of 1×1024), rows in parallel.
func (f *Forward) ReferenceRows(in Inputs, sh Shape, rows []RefRow) (o, lse []float64, err error) {
	if err := sh.Validate(); err != nil {
		return nil, nil, err
	}
	if err := f.checkInputs(in, sh); err != nil {
		return nil, nil, err
	}
	for _, r := range rows {
		if r.B < 0 || r.B >= sh.Batch || r.H < 0 || r.H >= sh.Heads || r.I < 0 || r.I >= sh.SeqQ {
			return nil, nil, fmt.Errorf("reference row (b=%d, h=%d, q=%d) is outside batch %d, heads %d, seqlen_q %d", r.B, r.H, r.I, sh.Batch, sh.Heads, sh.SeqQ)
		}
	}
	maskFn, err := modTileFunc(f.res.Program, f.res.Mask, sh, in.modValues(), refChunk)
	if err != nil {
		return nil, nil, err
	}
	scoreFn, err := modTileFunc(f.res.Program, f.res.Score, sh, in.modValues(), refChunk)
	if err != nil {
		return nil, nil, err
	}
	scale := float64(f.problem(sh, in.Scale).SoftmaxScale())
	d, dv, group := sh.Dim, sh.VDim(), sh.Heads/sh.KV()
	o, lse = make([]float64, len(rows)*dv), make([]float64, len(rows))
	var errs firstError
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range min(runtime.GOMAXPROCS(0), len(rows)) {
		wg.Go(func() {
			s, keep := make([]float64, sh.SeqK), make([]bool, sh.SeqK)
			qrow, krow, vbuf, tile := make([]float64, d), make([]float64, d), make([]float64, dv), make([]float64, refChunk)
			for {
				mu.Lock()
				n := next
				next++
				mu.Unlock()
				if n >= len(rows) || errs.get() != nil {
					return
				}
				r := rows[n]
				hk := r.H / group
				kvBase := (r.B*sh.KV() + hk) * sh.SeqK
				toF64(qrow, in.Q[((r.B*sh.Heads+r.H)*sh.SeqQ+r.I)*d:][:d], f.dtype)
				for j0 := 0; j0 < sh.SeqK; j0 += refChunk {
					m := min(refChunk, sh.SeqK-j0)
					if maskFn != nil {
						vals, err := maskFn(nil, r.B, r.H, r.I, j0)
						if err != nil {
							errs.note(err)
							return
						}
						for t := range m {
							keep[j0+t] = vals[t] != 0
						}
					} else {
						for t := range m {
							keep[j0+t] = true
						}
					}
					for j := j0; j < j0+m; j++ {
						if keep[j] {
							toF64(krow, in.K[(kvBase+j)*d:][:d], f.dtype)
							s[j] = reference.Dot(qrow, krow) * scale
						}
					}
					if scoreFn != nil {
						clear(tile)
						for t := range m {
							if keep[j0+t] {
								tile[t] = float64(float32(s[j0+t])) // the score mod takes f32
							}
						}
						vals, err := scoreFn(tile, r.B, r.H, r.I, j0)
						if err != nil {
							errs.note(err)
							return
						}
						for t := range m {
							if keep[j0+t] {
								s[j0+t] = vals[t]
							}
						}
					}
				}
				sink := math.Inf(-1)
				if in.Sinks != nil {
					sink = float64(in.Sinks[r.H])
				}
				vrow := func(j int) []float64 {
					toF64(vbuf, in.V[(kvBase+j)*dv:][:dv], f.dtype)
					return vbuf
				}
				lse[n] = reference.SoftmaxRow(s, keep, sink, vrow, o[n*dv:][:dv])
			}
		})
	}
	wg.Wait()
	if err := errs.get(); err != nil {
		return nil, nil, err
	}
	return o, lse, nil
}

// toF64 converts a row to float64 at the kernel's storage precision (as
// Reference sees its inputs).
func toF64(dst []float64, src []float32, e tir.Elem) {
	for i, x := range src {
		dst[i] = float64(x)
	}
	cpu.Round(e, dst)
}

// modTileFunc evaluates a mod for one query and n consecutive keys from
// j0 (keys past seqlen_k repeat the last one; their values are to be
// ignored), lowered for [1, n] tiles; s is the score tile (nil for a
// mask). nil for the trivial mods (none, identity). vals holds the mod's aux
// tensors and run-time parameters by name, as for modFunc.
func modTileFunc(prog *lang.Program, m *lang.ModInst, sh Shape, vals map[string]any, n int) (func(s []float64, b, h, i, j0 int) ([]float64, error), error) {
	if m == nil || m.Name() == "none" || m.Name() == "identity" {
		return nil, nil
	}
	mod, err := prog.LowerModTile(m, 1, n)
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
	qt, kt, st := tir.Tensor(tir.I32, 1, 1), tir.Tensor(tir.I32, 1, n), tir.Tensor(tir.F32, 1, n)
	return func(s []float64, b, h, i, j0 int) ([]float64, error) {
		kv := make([]float64, n)
		for t := range kv {
			kv[t] = float64(min(j0+t, sh.SeqK-1))
		}
		args := make([]any, 0, 5+len(fixed))
		if isScore {
			args = append(args, cpu.Tensor{Type: st, Vals: s})
		}
		args = append(args, int32(b), int32(h), cpu.Tensor{Type: qt, Vals: []float64{float64(i)}}, cpu.Tensor{Type: kt, Vals: kv})
		args = append(args, fixed...)
		r, err := fn.Call(args...)
		if err != nil {
			return nil, fmt.Errorf("%s %s at (b=%d, h=%d, q=%d, kv from %d): %w", m.Kind(), m, b, h, i, j0, err)
		}
		return r[0].Vals, nil
	}, nil
}
