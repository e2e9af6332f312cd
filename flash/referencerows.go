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
	err = eachRow(len(rows), func() func(n int) error {
		rb := newRowBufs(sh.SeqK, d, dv)
		qrow := make([]float64, d)
		return func(n int) error {
			r := rows[n]
			kvBase := (r.B*sh.KV() + r.H/group) * sh.SeqK
			toF64(qrow, in.Q[((r.B*sh.Heads+r.H)*sh.SeqQ+r.I)*d:][:d], f.dtype)
			krow := func(j int) []float64 {
				toF64(rb.k, in.K[(kvBase+j)*d:][:d], f.dtype)
				return rb.k
			}
			vrow := func(j int) []float64 {
				toF64(rb.v, in.V[(kvBase+j)*dv:][:dv], f.dtype)
				return rb.v
			}
			sink := math.Inf(-1)
			if in.Sinks != nil {
				sink = float64(in.Sinks[r.H])
			}
			var err error
			lse[n], err = rb.row(qrow, sh.SeqK, krow, vrow, maskFn, scoreFn, r.B, r.H, r.I, scale, sink, o[n*dv:][:dv])
			return err
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return o, lse, nil
}

// tileFn is a mod evaluated for one query and a chunk of keys
// (modTileFunc).
type tileFn = func(s []float64, b, h, i, j0 int) ([]float64, error)

// eachRow runs rows 0 … n-1 on GOMAXPROCS workers, each made by worker
// (its buffers) and run on the rows it takes; it stops at the first
// error and returns it.
func eachRow(n int, worker func() func(row int) error) error {
	var errs firstError
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			run := worker()
			for {
				mu.Lock()
				r := next
				next++
				mu.Unlock()
				if r >= n || errs.get() != nil {
					return
				}
				if err := run(r); err != nil {
					errs.note(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errs.get()
}

// rowBufs are one worker's buffers for reference rows of up to sk keys:
// the scores, which keys are kept, a mod tile, a K and a V row.
type rowBufs struct {
	s, tile, k, v []float64
	keep          []bool
}

func newRowBufs(sk, d, dv int) *rowBufs {
	return &rowBufs{s: make([]float64, sk), keep: make([]bool, sk), tile: make([]float64, refChunk), k: make([]float64, d), v: make([]float64, dv)}
}

// row is one query row of the float64 reference: qrow against sk keys
// (krow, vrow give key j's rows, at the storage precision), the mods
// evaluated a chunk of keys at a time at (b, h, i), scaled by scale, a
// sink logit (-inf: none). It writes O into orow (zeroed) and returns the
// LSE, exactly as Reference computes that row.
func (rb *rowBufs) row(qrow []float64, sk int, krow, vrow func(j int) []float64, maskFn, scoreFn tileFn, b, h, i int, scale, sink float64, orow []float64) (float64, error) {
	s, keep, tile := rb.s[:sk], rb.keep[:sk], rb.tile
	for j0 := 0; j0 < sk; j0 += refChunk {
		m := min(refChunk, sk-j0)
		if maskFn != nil {
			vals, err := maskFn(nil, b, h, i, j0)
			if err != nil {
				return 0, err
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
				s[j] = reference.Dot(qrow, krow(j)) * scale
			}
		}
		if scoreFn != nil {
			clear(tile)
			for t := range m {
				if keep[j0+t] {
					tile[t] = float64(float32(s[j0+t])) // the score mod takes f32
				}
			}
			vals, err := scoreFn(tile, b, h, i, j0)
			if err != nil {
				return 0, err
			}
			for t := range m {
				if keep[j0+t] {
					s[j0+t] = vals[t]
				}
			}
		}
	}
	return reference.SoftmaxRow(s, keep, sink, vrow, orow), nil
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
