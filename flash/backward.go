package flash

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// Backward is the compiled backward pass of attention for one head
// dimension (one pair: Q's and K's, V's), with the same mods as the forward: the stdlib kernels
// flash_bwd_preprocess (Δ = rowsum(dO∘O)), flash_bwd (dK, dV; dQ through
// f32 atomics) and flash_bwd_postprocess (dQ), or, with the compile-time
// argument DETERMINISTIC=true, flash_bwd_dq in place of the atomics and the
// postprocess, so that every run gives the same bits (see docs/backward.md).
// Compiled with Options.Sinks (the backward of flash_fwd_sinks), it also
// runs flash_bwd_sinks, the gradient of the sink logits (Grads.DSinks).
type Backward struct {
	opts          Options
	dim, dimV     int // Q's and K's head dim, V's and O's
	deterministic bool
	stages        []stage // in launch order
	main          *stage  // flash_bwd
	// masker builds and checks block masks as the forward does, with
	// flash_bwd's mask and block sizes.
	masker   *Forward
	dtype    tir.Elem
	tunedFor perArch[*Backward]     // bw compiled with the tiles tuned for a GPU arch (tuned)
	spans    spanVariant[*Backward] // bw with document as spans (withSpans)
}

// CompileBackward compiles the backward kernels for head dimension dim
// (V's: opts.DimV, or dim). opts are the forward's: Mask, Score, Sources,
// DType, DimV and Passes apply to
// every kernel; each of Consts goes to the kernels that declare it (BLOCK_M,
// BLOCK_N, SPARSE_Q, SPARSE_K, DETERMINISTIC, AUX_GRAD, fold_scale), and one that no
// backward kernel declares is an error. The block sizes SPARSE_Q ×
// SPARSE_K must be the forward's for a block mask to serve both.
// opts.Sinks adds flash_bwd_sinks (calls then need BackwardInputs.Sinks):
// dQ, dK and dV need no other change, since the forward's LSE includes
// the sink.
func CompileBackward(opts Options, dim int) (*Backward, error) {
	vo := attention.VariantOptions{Sinks: opts.Sinks}
	if v, ok := opts.Consts["DETERMINISTIC"]; ok {
		d, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("DETERMINISTIC = %q: want true or false", v)
		}
		vo.Deterministic = d
	}
	stages, dimV, err := compileVariant(attention.Backward, vo, opts, dim)
	if err != nil {
		return nil, err
	}
	bw := &Backward{opts: opts, dim: dim, dimV: dimV, deterministic: vo.Deterministic, stages: stages, main: &stages[attention.Backward.Main]}
	if err := checkMaskForms(opts.MaskForms, bw.main.res.Program, bw.main.res.Mask); err != nil {
		return nil, err
	}
	if bw.deterministic && len(bw.AuxGrads()) > 0 {
		return nil, fmt.Errorf("DETERMINISTIC: the gradients of aux tensors %s are accumulated with atomics, whose order varies; set AUX_GRAD=false (or leave DETERMINISTIC off)",
			strings.Join(bw.AuxGrads(), ", "))
	}
	bw.dtype = bw.main.res.Func().Params[0].Type.Elem
	bw.masker = &Forward{opts: opts, res: bw.main.res, contract: bw.main.contract, dim: dim, dimV: dimV, dtype: bw.dtype}
	return bw, nil
}

// Deterministic reports whether dQ is computed without atomics.
func (bw *Backward) Deterministic() bool { return bw.deterministic }

// HasSinks reports whether the backward was compiled with Options.Sinks.
func (bw *Backward) HasSinks() bool { return bw.opts.Sinks }

// Kernels are the compiled kernels in launch order.
func (bw *Backward) Kernels() []*compiler.Result { return results(bw.stages) }

// splitAux splits a backward kernel's aux tensor names into the mods'
// inputs and the score's float aux tensors that get gradients (named
// "<name>.grad" among the kernel's parameters).
func splitAux(all []string) (inputs, grads []string) {
	for _, a := range all {
		if n, ok := strings.CutSuffix(a, ".grad"); ok {
			grads = append(grads, n)
		} else {
			inputs = append(inputs, a)
		}
	}
	return inputs, grads
}

// AuxTensors are the aux tensors the mods read ("doc", "slopes"), as for
// the forward: BackwardInputs.Aux must hold exactly these.
func (bw *Backward) AuxTensors() []string {
	in, _ := splitAux(bw.main.contract.AuxTensors(bw.main.res.Params()))
	return in
}

// AuxGrads are the float aux tensors of the score mod that get gradients
// ("bias"): Grads.DAux holds one per name.
func (bw *Backward) AuxGrads() []string {
	_, g := splitAux(bw.main.contract.AuxTensors(bw.main.res.Params()))
	return g
}

// BlockMask builds the block mask of a shape as the forward does (the
// same mask and block sizes give the same mask; the backward reads its
// transposed lists).
func (bw *Backward) BlockMask(sh Shape, aux map[string]any) (*blockmask.BlockMask, blockmask.Method, error) {
	return bw.masker.BuildBlockMask(sh, aux)
}

// BackwardInputs are the tensors of one backward call, contiguous
// row-major: Q, K, V, Aux, Scalars, Scale and BlockMask as given to the
// forward; O ([B, H, SeqQ, DimV]) and LSE ([B, H, SeqQ], natural log) as it
// returned them; DO = dL/dO, shaped like O. Sinks are the forward's sink
// logits ([Heads]) for a backward compiled with Options.Sinks, and must be
// nil otherwise.
type BackwardInputs struct {
	Q, K, V   []float32
	O, LSE    []float32
	DO        []float32
	Aux       map[string]any
	Scalars   map[string]any
	Scale     float32
	BlockMask *blockmask.BlockMask
	Sinks     []float32
}

// forwardInputs are the inputs the forward took, for the block mask and
// the mods' checks.
func (in BackwardInputs) forwardInputs() Inputs {
	return Inputs{Q: in.Q, K: in.K, V: in.V, Aux: in.Aux, Scalars: in.Scalars, Scale: in.Scale, BlockMask: in.BlockMask}
}

// Grads are the gradients of one backward call: DQ like Q, DK and DV like
// K and V (summed over the query heads of a group), and DAux, by name, the
// gradients of the score mod's float aux tensors (as long as each tensor),
// and DSinks ([Heads]) the gradients of the sink logits (nil without
// Options.Sinks).
type Grads struct {
	DQ, DK, DV []float32
	DAux       map[string][]float32
	DSinks     []float32
}

// RunCPU runs the backward pass on the CPU reference device and returns
// dQ, dK and dV; RunCPUGrads also returns the aux gradients.
func (bw *Backward) RunCPU(in BackwardInputs, sh Shape) (dq, dk, dv []float32, err error) {
	g, err := bw.RunCPUGrads(context.Background(), in, sh)
	if err != nil {
		return nil, nil, nil, err
	}
	return g.DQ, g.DK, g.DV, nil
}

// RunCPUGrads runs the backward pass on the CPU reference device; it gives
// up, returning ctx's error, once ctx is done.
func (bw *Backward) RunCPUGrads(ctx context.Context, in BackwardInputs, sh Shape) (*Grads, error) {
	if err := sh.Validate(); err != nil {
		return nil, err
	}
	if err := bw.checkInputs(in, sh); err != nil {
		return nil, err
	}
	bm, err := bw.masker.blockMask(in.forwardInputs(), sh)
	if err != nil {
		return nil, err
	}
	bw, in = bw.withSpans(in, sh) // the same pairs: bm serves it
	b, err := bw.bind(in.Aux, in.Scalars, in.Scale, sh, bm, nil)
	if err != nil {
		return nil, err
	}
	// The score's aux gradients: zeroed f32 buffers that flash_bwd adds
	// into, bound as its aux tensors "score.<aux>.grad".
	host, daux := bw.hostData(in, bm, b), cpuGrads(b.gradLen)
	for key, buf := range daux {
		host[key] = buf
	}
	if host, err = runCPU(ctx, bw.stages, b.calls, host); err != nil {
		return nil, err
	}
	return hostGrads(host, daux, bw.opts.Sinks), nil
}

// hostGrads are the gradients a CPU run of the backward kernels left in
// host: dQ, dK, dV, dsinks when withSinks, and the aux gradients daux.
func hostGrads(host map[string]any, daux map[string]*cpu.Buffer, withSinks bool) *Grads {
	g := &Grads{DAux: map[string][]float32{}}
	g.DQ = host["dq"].(*cpu.Buffer).F32()
	g.DK = host["dk"].(*cpu.Buffer).F32()
	g.DV = host["dv"].(*cpu.Buffer).F32()
	if withSinks {
		g.DSinks = host["dsinks"].(*cpu.Buffer).F32()
	}
	for key, b := range daux {
		g.DAux[auxGradName(key)] = b.F32()
	}
	return g
}

// cpuGrads are zeroed aux-gradient buffers on the CPU device, by binder
// key (the kernel parameter: auxGradKey), of the lengths in gradLen.
func cpuGrads(gradLen map[string]int) map[string]*cpu.Buffer {
	daux := map[string]*cpu.Buffer{}
	for key, n := range gradLen {
		daux[key] = cpu.NewBuffer(key, tir.F32, n)
	}
	return daux
}

// auxGradKey is the kernel parameter (and binder key) of aux tensor a's
// gradient; auxGradName is its inverse.
func auxGradKey(a string) string { return "score." + a + ".grad" }

func auxGradName(key string) string {
	return strings.TrimSuffix(strings.TrimPrefix(key, "score."), ".grad")
}

// bound are a backward call's kernels bound in launch order, and the
// lengths of the aux gradients by binder key ("score.slopes.grad").
type bound struct {
	calls   []*launch.Call
	gradLen map[string]int
}

// bind binds every stage for one call: aux are the mods' aux tensors by
// the caller's names, strides the leading-dimension strides by tensor name
// (nil: contiguous).
func (bw *Backward) bind(aux map[string]any, scalars map[string]any, scale float32, sh Shape, bm *blockmask.BlockMask, strides map[string][]int) (*bound, error) {
	auxLen, err := auxLens(aux)
	if err != nil {
		return nil, err
	}
	return bw.bindLens(auxLen, scalars, scale, sh, bm, strides)
}

// bindLens is bind with the aux tensors' lengths.
func (bw *Backward) bindLens(auxLen map[string]int, scalars map[string]any, scale float32, sh Shape, bm *blockmask.BlockMask, strides map[string][]int) (*bound, error) {
	grads, err := gradLens(bw.AuxGrads(), auxLen)
	if err != nil {
		return nil, err
	}
	r := launch.Request{Problem: launch.Problem{Shape: sh, Scale: scale}, Strides: strides, BlockMask: bm, Aux: auxLen, Scalars: scalars}
	b := &bound{gradLen: grads}
	b.calls, err = bindAll(bw.stages, attention.Backward.Main, r, grads)
	return b, err
}

// gradLens are the lengths of the aux gradients of auxGrads (the float aux
// tensors of the score that get one) by binder key (auxGradKey): each as
// long as its aux tensor in auxLen.
func gradLens(auxGrads []string, auxLen map[string]int) (map[string]int, error) {
	out := map[string]int{}
	for _, a := range auxGrads {
		n, ok := lookupLen(auxLen, a)
		if !ok {
			return nil, fmt.Errorf("missing aux tensor %q", a)
		}
		out[auxGradKey(a)] = n
	}
	return out, nil
}

// hostData are a host call's data by kernel parameter name: the inputs,
// both directions of the block mask (flash_bwd reads the transposed lists,
// flash_bwd_dq the forward's) and the mods' aux tensors, but not the aux
// gradients.
func (bw *Backward) hostData(in BackwardInputs, bm *blockmask.BlockMask, b *bound) map[string]any {
	host := map[string]any{"q": in.Q, "k": in.K, "v": in.V, "o": in.O, "dout": in.DO, "lse": in.LSE}
	if bw.opts.Sinks {
		host["sinks"] = in.Sinks
	}
	addCallData(bw.stages, b.calls, host, bm, in.Aux, b.gradLen)
	return host
}

// checkInputs checks the host tensors' sizes against the shape, and the
// mods' aux tensors and run-time parameters against their declarations.
func (bw *Backward) checkInputs(in BackwardInputs, sh Shape) error {
	if err := bw.checkSinks(in.Sinks, sh); err != nil {
		return err
	}
	if err := bw.masker.checkMods(in.Aux, in.Scalars, sh); err != nil {
		return err
	}
	if err := bw.masker.checkDims(sh); err != nil {
		return err
	}
	p := launch.Problem{Shape: sh, Attrs: bw.main.res.Attrs(), Scale: in.Scale}
	if err := checkSizes(attention.FlashBwdPreprocess, p, []hostTensor{{"LSE", "lse", in.LSE}}); err != nil {
		return err
	}
	return checkSizes(bw.main.contract, p, []hostTensor{
		{"Q", "q", in.Q}, {"K", "k", in.K}, {"V", "v", in.V}, {"O", "dout", in.O}, {"DO", "dout", in.DO}})
}

// checkSinks checks a call's sinks against Options.Sinks and the heads.
func (bw *Backward) checkSinks(sinks []float32, sh Shape) error {
	switch {
	case bw.opts.Sinks && len(sinks) != sh.Heads:
		return fmt.Errorf("sinks has %d values, want one per head (%d)", len(sinks), sh.Heads)
	case !bw.opts.Sinks && sinks != nil:
		return fmt.Errorf("inputs have sinks, but the backward was compiled without them (Options.Sinks)")
	}
	return nil
}
