package flash

import (
	"context"
	"fmt"

	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/reference"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// BackwardVarlen is the backward pass of ForwardVarlen (packed sequences
// of different lengths): flash_bwd_preprocess (Δ, a zeroed dQ
// accumulator) and flash_bwd_postprocess (dQ) on the packed tensors seen
// as one batch of total_q positions, and between them flash_bwd_varlen,
// flash_bwd's block-sparse walk over each sequence's transposed block mask
// (the same VarlenBlockMask as the forward's). dQ goes through f32
// atomics; there is no DETERMINISTIC mode yet.
type BackwardVarlen struct {
	opts      Options
	dim, dimV int     // Q's and K's head dim, V's and O's
	stages    []stage // preprocess, flash_bwd_varlen, postprocess
	// masker builds and checks block masks and the mods' inputs, with
	// flash_bwd_varlen's mods and block sizes.
	masker   *ForwardVarlen
	dtype    tir.Elem
	tunedFor perArch[*BackwardVarlen] // compiled with the tiles tuned for a GPU arch (tuned)
}

// CompileBackwardVarlen compiles the varlen backward kernels for head
// dimension dim (V's: opts.DimV, or dim), with the forward's opts (Mask,
// Score, Sources, DType, DimV, Passes; Consts to the kernels that declare
// them). SPARSE_Q × SPARSE_K
// must be the forward's for one VarlenBlockMask to serve both.
func CompileBackwardVarlen(opts Options, dim int) (*BackwardVarlen, error) {
	if v, ok := opts.Consts["DETERMINISTIC"]; ok {
		return nil, fmt.Errorf("DETERMINISTIC = %s: the varlen backward has no deterministic mode yet (dQ goes through atomics)", v)
	}
	stages, dimV, err := compileVariant(attention.BackwardVarlen, attention.VariantOptions{Sinks: opts.Sinks}, opts, dim)
	if err != nil {
		return nil, err
	}
	main := stages[attention.BackwardVarlen.Main]
	if err := checkVarlenAux(main); err != nil {
		return nil, err
	}
	bw := &BackwardVarlen{opts: opts, dim: dim, dimV: dimV, stages: stages, dtype: main.res.Func().Params[0].Type.Elem}
	bw.masker = &ForwardVarlen{f: &Forward{opts: opts, res: main.res, contract: main.contract, dim: dim, dimV: dimV, dtype: bw.dtype}}
	return bw, nil
}

// Kernels are the compiled kernels in launch order.
func (bw *BackwardVarlen) Kernels() []*compiler.Result { return results(bw.stages) }

// AuxTensors are the aux tensors the mods read; AuxGrads the float aux
// tensors of the score that get gradients (Grads.DAux).
func (bw *BackwardVarlen) AuxTensors() []string {
	in, _ := splitAux(bw.masker.f.AuxTensors())
	return in
}

func (bw *BackwardVarlen) AuxGrads() []string {
	_, g := splitAux(bw.masker.f.AuxTensors())
	return g
}

// BlockMask builds the block mask of a call, as ForwardVarlen.BlockMask
// (with this backward's block sizes; the same as the forward's by default).
func (bw *BackwardVarlen) BlockMask(in VarlenInputs, heads int) (*VarlenBlockMask, error) {
	return bw.masker.BlockMask(in, heads)
}

// VarlenBackwardInputs are a varlen backward call's tensors: the forward's
// inputs (Q, K, V, cu_seqlens, Aux, Scalars, Scale, BlockMask), O
// ([total_q, H, Dv], Dv V's head dim) and LSE ([H, total_q]) as the forward returned them,
// and DO = dL/dO, shaped like O.
type VarlenBackwardInputs struct {
	VarlenInputs
	O, LSE, DO []float32
}

// RunCPU runs the varlen backward on the CPU reference device: dQ like Q
// ([total_q, H, D]), dK and dV like K and V ([total_k, Hkv, D] and
// [total_k, Hkv, Dv]), and the score's aux gradients by name.
func (bw *BackwardVarlen) RunCPU(in VarlenBackwardInputs, heads, kvHeads int) (*Grads, error) {
	return bw.RunCPUContext(context.Background(), in, heads, kvHeads)
}

// RunCPUContext is RunCPU that gives up once ctx is done.
func (bw *BackwardVarlen) RunCPUContext(ctx context.Context, in VarlenBackwardInputs, heads, kvHeads int) (*Grads, error) {
	b, err := bw.bind(in, heads, kvHeads)
	if err != nil {
		return nil, err
	}
	if b.empty != nil {
		return b.empty, nil
	}
	host, daux := b.host, cpuGrads(b.gradLen)
	for key, buf := range daux {
		host[key] = buf
	}
	if host, err = runCPU(ctx, bw.stages, b.calls, host); err != nil {
		return nil, err
	}
	return hostGrads(host, daux, false), nil
}

// varlenBound is a varlen backward call bound: the stages' calls and aux
// gradients' lengths (bound), the host data by parameter name; empty
// holds the (zero) gradients of a call with no queries, which runs
// nothing.
type varlenBound struct {
	bound
	host  map[string]any
	empty *Grads
}

// bind checks a call and binds its three kernels.
func (bw *BackwardVarlen) bind(in VarlenBackwardInputs, heads, kvHeads int) (*varlenBound, error) {
	f, d, dv := bw.masker.f, bw.dim, bw.dimV
	sh, totalQ, totalK, err := f.varlenCall(in.VarlenInputs, heads, kvHeads)
	if err != nil {
		return nil, err
	}
	if no := totalQ * heads * dv; len(in.O) != no || len(in.DO) != no || len(in.LSE) != heads*totalQ {
		return nil, fmt.Errorf("O has %d elements, DO %d, LSE %d: want O and DO [%d, %d, %d] and LSE [%d, %d]",
			len(in.O), len(in.DO), len(in.LSE), totalQ, heads, dv, heads, totalQ)
	}
	if err := f.checkMods(in.Aux, in.Scalars, sh); err != nil {
		return nil, err
	}
	auxLen, err := auxLens(in.Aux)
	if err != nil {
		return nil, err
	}
	grads, err := gradLens(bw.AuxGrads(), auxLen)
	if err != nil {
		return nil, err
	}
	b := &varlenBound{bound: bound{gradLen: grads}}
	if totalQ == 0 { // no query: every gradient is zero, nothing to run
		b.empty = &Grads{DQ: []float32{}, DK: make([]float32, len(in.K)), DV: make([]float32, len(in.V)), DAux: map[string][]float32{}}
		for key, n := range b.gradLen {
			b.empty.DAux[auxGradName(key)] = make([]float32, n)
		}
		return b, nil
	}
	bm, err := bw.masker.varlenBlockMask(in.VarlenInputs, heads)
	if err != nil {
		return nil, err
	}
	b.host = map[string]any{"q": in.Q, "k": in.K, "v": in.V, "o": in.O, "dout": in.DO, "lse": in.LSE,
		"cu_seqlens_q": in.CuSeqlensQ, "cu_seqlens_k": in.CuSeqlensK}
	lens := map[string]int{}
	bm.addLists(attention.BackwardVarlen.Lists, b.host, lens)
	// The pre- and postprocess see one batch of totalQ positions: packed
	// [total_q, H, D] is [1, H, total_q, D] with these strides (and O, dO
	// with Dv for D).
	packed := launch.Request{Problem: launch.Problem{Shape: Shape{Batch: 1, Heads: heads, KVHeads: heads, SeqQ: totalQ, SeqK: 1, Dim: d, DimV: sh.DimV},
		Scale: in.Scale}, Strides: map[string][]int{"o": {totalQ * heads * dv, dv, heads * dv}, "dout": {totalQ * heads * dv, dv, heads * dv},
		"dq": {totalQ * heads * d, d, heads * d}}}
	main := launch.Request{Problem: launch.Problem{Shape: sh, Scale: in.Scale, TotalQ: totalQ, TotalK: totalK, Lens: lens}, Aux: auxLen, Scalars: in.Scalars}
	for i, st := range bw.stages {
		r, grads := packed, map[string]int(nil)
		if i == attention.BackwardVarlen.Main {
			r, grads = main, b.gradLen
		}
		calls, err := bindAll([]stage{st}, 0, r, grads)
		if err != nil {
			return nil, err
		}
		b.calls = append(b.calls, calls[0])
	}
	addCallData(bw.stages, b.calls, b.host, nil, in.Aux, b.gradLen)
	return b, nil
}

// Reference computes the float64 gradients sequence by sequence
// (reference.AttentionGrad on each sequence alone, with the mods and the
// score's derivative evaluated on the CPU device with its lengths and
// b = its index), in RunCPU's layouts. O and LSE are recomputed (in.O,
// in.LSE and in.BlockMask are not read).
func (bw *BackwardVarlen) Reference(in VarlenBackwardInputs, heads, kvHeads int) (reference.Grads, error) {
	f, d, dv := bw.masker.f, bw.dim, bw.dimV
	sh, totalQ, _, err := f.varlenCall(in.VarlenInputs, heads, kvHeads)
	if err != nil {
		return reference.Grads{}, err
	}
	hkv := sh.KV()
	if len(in.DO) != totalQ*heads*dv {
		return reference.Grads{}, fmt.Errorf("do has %d elements: want [%d, %d, %d], like O", len(in.DO), totalQ, heads, dv)
	}
	if err := f.checkMods(in.Aux, in.Scalars, sh); err != nil {
		return reference.Grads{}, err
	}
	lens, err := auxLens(in.Aux)
	if err != nil {
		return reference.Grads{}, err
	}
	vals := in.modValues()
	scale := float64(f.problem(sh, in.Scale).SoftmaxScale())
	q, k, v, do := roundTo(in.Q, bw.dtype), roundTo(in.K, bw.dtype), roundTo(in.V, bw.dtype), roundTo(in.DO, bw.dtype)
	// scatter puts a sequence's rows back where gatherSeq took them.
	scatter := func(dst, xs []float64, start, n, hs, d int) {
		for t := range n {
			for h := range hs {
				copy(dst[((start+t)*hs+h)*d:][:d], xs[(h*n+t)*d:][:d])
			}
		}
	}
	g := reference.Grads{DQ: make([]float64, len(in.Q)), DK: make([]float64, len(in.K)), DV: make([]float64, len(in.V)), DAux: map[string][]float64{}}
	gradLens := map[string]int{}
	for _, a := range bw.AuxGrads() {
		if n, ok := lookupLen(lens, a); ok {
			gradLens[a] = n
			g.DAux[a] = make([]float64, n)
		}
	}
	var evalErr firstError
	for b := 0; b < sh.Batch; b++ {
		qs, ks := int(in.CuSeqlensQ[b]), int(in.CuSeqlensK[b])
		sq, sk := int(in.CuSeqlensQ[b+1])-qs, int(in.CuSeqlensK[b+1])-ks
		if sq == 0 || sk == 0 {
			continue // no query, or no key: no gradient
		}
		seq := Shape{Batch: sh.Batch, Heads: heads, KVHeads: hkv, SeqQ: sq, SeqK: sk, Dim: d, DimV: sh.DimV}
		maskFn, err := modFunc(f.res.Program, f.res.Mask, seq, vals)
		if err != nil {
			return reference.Grads{}, err
		}
		scoreFn, err := modFunc(f.res.Program, f.res.Score, seq, vals)
		if err != nil {
			return reference.Grads{}, err
		}
		mask, score := refMods(maskFn, scoreFn, b, &evalErr)
		var deriv reference.ScoreDerivFunc
		if scoreFn != nil {
			ds, _, err := scoreDeriv(f.res.Program, f.res.Score, seq, vals, bw.AuxGrads(), evalErr.note)
			if err != nil {
				return reference.Grads{}, err
			}
			deriv = func(s float64, _, h, i, j int, aux func(string, int, float64)) float64 { return ds(s, b, h, i, j, aux) }
		}
		sg := reference.AttentionGrad(gatherSeq(q, qs, sq, heads, d), gatherSeq(k, ks, sk, hkv, d), gatherSeq(v, ks, sk, hkv, dv), gatherSeq(do, qs, sq, heads, dv),
			reference.Shape{B: 1, H: heads, HKV: hkv, Sq: sq, Sk: sk, D: d, DV: dv}, scale, mask, score, deriv, gradLens)
		scatter(g.DQ, sg.DQ, qs, sq, heads, d)
		scatter(g.DK, sg.DK, ks, sk, hkv, d)
		scatter(g.DV, sg.DV, ks, sk, hkv, dv)
		for a, xs := range sg.DAux {
			for i, x := range xs {
				g.DAux[a][i] += x
			}
		}
	}
	return g, evalErr.get()
}
