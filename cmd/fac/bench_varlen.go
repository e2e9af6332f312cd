package main

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/fac-compiler/fac"
)

// benchVarlen times flash_fwd_varlen on sh.SeqQ tokens packed as sequences
// of seqLen tokens (the last one shorter), cu_seqlens_q = cu_seqlens_k, the
// mask applied within each sequence. TFLOPS count the kept pairs: L² per
// sequence of L tokens for none, L(L+1)/2 for causal.
func benchVarlen(gpu *fac.CUDA, opts fac.Options, seqLen int, sh fac.Shape, warmup, reps int, backward bool) (benchResult, error) {
	var lens []int
	for left := sh.SeqQ; left > 0; left -= seqLen {
		lens = append(lens, min(seqLen, left))
	}
	var pairs int64
	for _, l := range lens {
		switch opts.Mask {
		case "none":
			pairs += int64(l) * int64(l)
		case "causal":
			pairs += int64(l) * int64(l+1) / 2
		default:
			return benchResult{}, fmt.Errorf("--varlen-len counts the kept pairs of none and causal only, not %q", opts.Mask)
		}
	}
	cu := make([]int32, len(lens)+1)
	for i, l := range lens {
		cu[i+1] = cu[i] + int32(l)
	}
	fwd, err := fac.CompileForwardVarlen(opts, sh.Dim)
	if err != nil {
		return benchResult{}, err
	}
	randn := normals(rand.New(rand.NewPCG(uint64(seqLen), 5)))
	in := fac.VarlenInputs{Q: randn(sh.SeqQ * sh.Heads * sh.Dim), K: randn(sh.SeqK * sh.KV() * sh.Dim), V: randn(sh.SeqK * sh.KV() * sh.VDim()),
		CuSeqlensQ: cu, CuSeqlensK: cu}
	pass := "forward"
	var times []float64
	if backward {
		pass = "backward"
		times, err = benchVarlenBackward(gpu, fwd, opts, in, sh, randn, warmup, reps)
	} else {
		times, err = fwd.BenchCUDA(gpu, in, sh.Heads, sh.KV(), warmup, reps)
	}
	if err != nil {
		return benchResult{}, err
	}
	sorted := slices.Clone(times)
	slices.Sort(sorted)
	med := sorted[len(sorted)/2]
	tf := matmulFlops(pass, sh) * float64(pairs) * float64(sh.Heads) / (med * 1e-3) / 1e12
	// Pairs: per head, over every sequence (B is the sequence count, not a
	// factor); KV TB/s over the packed K and V.
	return benchResult{Pass: pass + " varlen", Mask: opts.Mask, SeqLen: seqLen, SeqLenQ: seqLen, SeqLenK: seqLen, Batch: len(lens),
		Heads: sh.Heads, KVHeads: sh.KV(), Dim: sh.Dim, DimV: sh.DimV, DType: opts.DType, Pairs: pairs, MedianMs: med, TFLOPS: tf,
		KVTBps: kvTBps(sh, opts.DType, med), NumSplits: 1, PackGQA: 1, TimesMs: times}, nil
}

// benchVarlenBackward runs the varlen forward once on the GPU for O and LSE
// and times the varlen backward on them with a random dO.
func benchVarlenBackward(gpu *fac.CUDA, fwd *fac.ForwardVarlen, opts fac.Options, in fac.VarlenInputs, sh fac.Shape,
	randn func(int) []float32, warmup, reps int) ([]float64, error) {
	bwd, err := fac.CompileBackwardVarlen(opts, sh.Dim)
	if err != nil {
		return nil, err
	}
	o, lse, err := fwd.RunCUDA(gpu, in, sh.Heads, sh.KV())
	if err != nil {
		return nil, err
	}
	bin := fac.VarlenBackwardInputs{VarlenInputs: in, O: o, LSE: lse, DO: randn(len(o))}
	return bwd.BenchCUDA(gpu, bin, sh.Heads, sh.KV(), warmup, reps)
}
