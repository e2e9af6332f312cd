package flash

import (
	"context"
	"fmt"
	"maps"
	"slices"
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

// stage is one compiled kernel of the backward pass.
type stage struct {
	res      *compiler.Result
	contract *launch.Contract
}

// backwardDType is opts' element type for the backward kernels (f32 by
// default), checked with the head dimension.
func backwardDType(opts Options, dim int) (string, error) {
	if err := opts.check(); err != nil {
		return "", err
	}
	dt := opts.DType
	if dt == "" {
		dt = "f32"
	}
	if dt != "f32" && dt != "bf16" && dt != "f16" {
		return "", fmt.Errorf("unsupported dtype %q: the backward kernels take f32, bf16 or f16", dt)
	}
	if dim <= 0 || dim > 256 {
		return "", fmt.Errorf("unsupported head dim %d: want 1..256", dim)
	}
	return dt, opts.checkDTypeDim(dt, dim)
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
	dt, err := backwardDType(opts, dim)
	if err != nil {
		return nil, err
	}
	dimV, err := opts.dimV(dim)
	if err != nil {
		return nil, err
	}
	bw := &Backward{opts: opts, dim: dim, dimV: dimV}
	if v, ok := opts.Consts["DETERMINISTIC"]; ok {
		d, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("DETERMINISTIC = %q: want true or false", v)
		}
		bw.deterministic = d
	}
	kernels := []*launch.Contract{attention.FlashBwdPreprocess, attention.FlashBwd, attention.FlashBwdPostprocess}
	if bw.deterministic {
		kernels = []*launch.Contract{attention.FlashBwdPreprocess, attention.FlashBwd, attention.FlashBwdDQ}
	}
	if opts.Sinks {
		kernels = append(kernels, attention.FlashBwdSinks) // after the preprocess: it reads Δ
	}
	stages, err := compileStages(opts, dt, dim, dimV, kernels)
	if err != nil {
		return nil, err
	}
	bw.stages = stages
	bw.main = &bw.stages[1]
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
func (bw *Backward) Kernels() []*compiler.Result { return stageResults(bw.stages) }

// stageResults are the compiled kernels of stages, in order.
func stageResults(stages []stage) []*compiler.Result {
	out := make([]*compiler.Result, len(stages))
	for i, s := range stages {
		out[i] = s.res
	}
	return out
}

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
	// Buffers that pass from kernel to kernel, by parameter name: they
	// stay on the device (here: *cpu.Buffer).
	host := bw.hostData(in, bm)
	// The score's aux gradients: zeroed f32 buffers that flash_bwd adds
	// into, bound as its aux tensors "score.<aux>.grad".
	daux := map[string]*cpu.Buffer{}
	for key, n := range b.gradLen {
		daux[key] = cpu.NewBuffer(key, tir.F32, n)
		host[key] = daux[key]
	}
	for i := range bw.stages {
		st := &bw.stages[i]
		call := b.calls[i]
		for _, buf := range call.Buffers {
			if buf.Role == launch.Aux && daux[buf.Key] == nil {
				host[buf.Name] = in.Aux[buf.Key]
			}
		}
		out, err := cpu.Run(ctx, st.res.Module, call, host)
		if err != nil {
			return nil, err
		}
		for _, name := range st.contract.Outputs() {
			host[name] = out[name]
		}
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
	b := &bound{gradLen: map[string]int{}}
	for _, a := range bw.AuxGrads() {
		n, ok := auxLen[a]
		if !ok {
			n, ok = auxLen["score."+a]
		}
		if !ok {
			return nil, fmt.Errorf("missing aux tensor %q", a)
		}
		b.gradLen[auxGradKey(a)] = n
	}
	for i := range bw.stages {
		st := &bw.stages[i]
		req := launch.Request{Problem: launch.Problem{Shape: sh, Attrs: st.res.Attrs(), Scale: scale}}
		if st.contract.BlockMask != nil {
			req.BlockMask = bm
		}
		if len(st.contract.Mods) > 0 {
			req.Aux = maps.Clone(auxLen)
			if st == bw.main {
				maps.Copy(req.Aux, b.gradLen)
			}
			req.Scalars = scalars
		}
		// Each kernel takes the strides of its own tensors.
		for name, s := range strides {
			if hasTensor(st.contract, name) {
				if req.Strides == nil {
					req.Strides = map[string][]int{}
				}
				req.Strides[name] = s
			}
		}
		call, err := st.contract.Bind(st.res.Params(), req)
		if err != nil {
			return nil, err
		}
		b.calls = append(b.calls, call)
	}
	return b, nil
}

func hasTensor(c *launch.Contract, name string) bool {
	for _, t := range c.Tensors {
		if t.Name == name {
			return true
		}
	}
	return false
}

// hostData are a host call's tensors by kernel parameter name: the inputs
// and both directions of the block mask (flash_bwd reads the transposed
// lists, flash_bwd_dq the forward's). Aux tensors are added per call.
func (bw *Backward) hostData(in BackwardInputs, bm *blockmask.BlockMask) map[string]any {
	host := map[string]any{"q": in.Q, "k": in.K, "v": in.V, "o": in.O, "dout": in.DO, "lse": in.LSE}
	if bw.opts.Sinks {
		host["sinks"] = in.Sinks
	}
	for _, st := range bw.stages {
		if st.contract.BlockMask != nil {
			for name, xs := range st.contract.BlockMask.Tensors(bm) {
				host[name] = xs
			}
		}
	}
	return host
}

// checkInputs checks the host tensors' sizes against the shape, and the
// mods' aux tensors and run-time parameters against their declarations.
func (bw *Backward) checkInputs(in BackwardInputs, sh Shape) error {
	if err := bw.checkSinks(in.Sinks, sh); err != nil {
		return err
	}
	if err := bw.masker.checkAux(in.Aux, sh); err != nil {
		return err
	}
	if err := bw.masker.checkScalars(in.Scalars); err != nil {
		return err
	}
	if err := bw.masker.checkDims(sh); err != nil {
		return err
	}
	p := launch.Problem{Shape: sh, Attrs: bw.main.res.Attrs(), Scale: in.Scale}
	c := bw.main.contract
	for _, t := range []struct {
		name, tensor string
		xs           []float32
	}{{"Q", "q", in.Q}, {"K", "k", in.K}, {"V", "v", in.V}, {"O", "dout", in.O}, {"DO", "dout", in.DO}, {"LSE", "lse", in.LSE}} {
		n, err := c.Extent(t.tensor, p, nil)
		if err != nil {
			return err
		}
		if len(t.xs) != n {
			return fmt.Errorf("tensor %s has %d elements, shape %+v needs %d", t.name, len(t.xs), sh, n)
		}
	}
	return nil
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

// compileStages compiles kernels in order for the backward's opts, dtype
// dt and head dims (dimV: V's and O's, for the kernels that read them):
// each gets the mods and those of opts.Consts it declares; a const that
// none declares is an error.
func compileStages(opts Options, dt string, dim, dimV int, kernels []*launch.Contract) ([]stage, error) {
	var stages []stage
	prog, err := compiler.Load(opts.Sources)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, c := range kernels {
		cps, ok := prog.KernelParams(c.Kernel)
		if !ok {
			return nil, fmt.Errorf("internal compiler error: no kernel %s", c.Kernel)
		}
		consts := map[string]string{}
		req := compiler.Request{Sources: opts.Sources, Kernel: c.Kernel, Consts: consts, Passes: opts.Passes, Target: opts.target()}
		for _, cp := range cps {
			switch {
			case cp.Name == "HEAD_DIM":
				consts[cp.Name] = strconv.Itoa(dim)
			case cp.Name == "HEAD_DIM_V" && dimV != dim:
				consts[cp.Name] = strconv.Itoa(dimV)
			case cp.Name == "DTYPE":
				consts[cp.Name] = dt
			case cp.Kind == "mask":
				req.Mask = opts.Mask
			case cp.Kind == "score":
				req.Score = opts.Score
			}
			if v, ok := opts.Consts[cp.Name]; ok {
				consts[cp.Name] = v
				used[cp.Name] = true
			}
		}
		res, err := compiler.Compile(req)
		if err != nil {
			return nil, err
		}
		if res.Func() == nil {
			return nil, fmt.Errorf("internal compiler error: kernel %s missing after passes", c.Kernel)
		}
		if err := c.CheckParams(res.Params()); err != nil {
			return nil, fmt.Errorf("internal compiler error: %w", err)
		}
		p := launch.Problem{Shape: Shape{Batch: 1, Heads: 1, SeqQ: 1, SeqK: 1, Dim: dim, DimV: dimV}, Attrs: res.Attrs()}
		if c.Check != nil {
			if err := c.Check(p); err != nil {
				return nil, err
			}
		}
		stages = append(stages, stage{res: res, contract: c})
	}
	for _, k := range slices.Sorted(maps.Keys(opts.Consts)) {
		if !used[k] {
			return nil, fmt.Errorf("no backward kernel has a compile-time parameter %s", k)
		}
	}
	return stages, nil
}
