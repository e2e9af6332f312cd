// Package fac compiles FlashAttention kernels whose masks are user code and
// runs them. This file is the forward pass on the CPU reference device; the
// kernels are the stdlib's flash_fwd with the chosen mask_mod and score_mod
// inlined.
package fac

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/passes"
	"github.com/fac-compiler/fac/reference"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// Shape is an attention problem: Q and O are [Batch, Heads, SeqQ, Dim], K and
// V are [Batch, KVHeads, SeqK, Dim] (KVHeads = Heads unless grouped-query).
type Shape struct {
	Batch, Heads, KVHeads, SeqQ, SeqK, Dim int
}

func (s Shape) kvHeads() int {
	if s.KVHeads == 0 {
		return s.Heads
	}
	return s.KVHeads
}

// Validate reports a clear error for an impossible shape.
func (s Shape) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"batch", s.Batch}, {"heads", s.Heads}, {"kv heads", s.kvHeads()}, {"seqlen_q", s.SeqQ}, {"seqlen_k", s.SeqK}, {"head dim", s.Dim}} {
		if f.v <= 0 {
			return fmt.Errorf("shape: %s must be positive, got %d", f.name, f.v)
		}
	}
	if s.Heads%s.kvHeads() != 0 {
		return fmt.Errorf("shape: heads (%d) must be a multiple of kv heads (%d)", s.Heads, s.kvHeads())
	}
	if int64(s.Batch)*int64(s.Heads)*int64(max(s.SeqQ, s.SeqK))*int64(s.Dim) > math.MaxInt32 {
		return fmt.Errorf("shape: %d×%d×%d×%d elements overflow 32-bit offsets", s.Batch, s.Heads, max(s.SeqQ, s.SeqK), s.Dim)
	}
	return nil
}

// Options choose the kernel instance.
type Options struct {
	Mask    string            // mask mod, e.g. "causal", "sliding_window(256, 0)"; "" = no mask
	Score   string            // score mod, e.g. "softcap(30.0)"; "" = identity
	Sources map[string]string // user source files (name → text) defining mods
	Consts  map[string]string // other compile-time arguments, e.g. BLOCK_M: "32"
	DType   string            // element type of Q, K, V, O: f32 (default), bf16, f16
	Passes  passes.Options
}

// Forward is a compiled forward kernel for one head dimension.
type Forward struct {
	req     compiler.Request
	res     *compiler.Result
	kernel  string
	dim     int
	blockM  int
	sparseQ int // mask block sizes (SPARSE_Q × SPARSE_K)
	sparseK int
	dtype   tir.Elem

	clsOnce sync.Once // the block-classification kernel, made on first use
	cls     *Forward
	clsErr  error

	amu       sync.Mutex
	analyzers map[[4]int]*blockmask.Analyzer // by (B, H, SeqQ, SeqK)
}

// CompileForward compiles flash_fwd for head dimension dim.
func CompileForward(opts Options, dim int) (*Forward, error) {
	consts := map[string]string{"HEAD_DIM": strconv.Itoa(dim)}
	for k, v := range opts.Consts {
		consts[k] = v
	}
	dt := opts.DType
	if dt == "" {
		dt = "f32"
	}
	if dt != "f32" && dt != "bf16" && dt != "f16" {
		return nil, fmt.Errorf("unsupported dtype %q: flash_fwd takes f32, bf16 or f16", dt)
	}
	if dim <= 0 || dim > 256 {
		return nil, fmt.Errorf("unsupported head dim %d: want 1..256 (the GPU back end needs a power of two)", dim)
	}
	consts["DTYPE"] = dt
	req := compiler.Request{Sources: opts.Sources, Kernel: "flash_fwd", Mask: opts.Mask,
		Score: opts.Score, Consts: consts, Passes: opts.Passes}
	res, err := compiler.Compile(req)
	if err != nil {
		return nil, err
	}
	f := &Forward{req: req, res: res, kernel: "flash_fwd", dim: dim}
	k := res.Module.Func("flash_fwd")
	if k == nil {
		return nil, fmt.Errorf("internal compiler error: kernel flash_fwd missing after passes")
	}
	bm, _ := k.Attr("BLOCK_M").(int64)
	f.blockM = int(bm)
	sq, _ := k.Attr("SPARSE_Q").(int64)
	sk, _ := k.Attr("SPARSE_K").(int64)
	bn, _ := k.Attr("BLOCK_N").(int64)
	f.sparseQ, f.sparseK = int(sq), int(sk)
	if f.sparseQ%f.blockM != 0 || f.sparseK%int(bn) != 0 {
		return nil, fmt.Errorf("mask blocks %d×%d must be multiples of the kernel tile %d×%d", f.sparseQ, f.sparseK, f.blockM, bn)
	}
	f.dtype = k.Params[0].Type.Elem
	return f, nil
}

// Module is the compiled tile IR.
func (f *Forward) Module() *tir.Module { return f.res.Module }

// Mask and Score are the bound mods.
func (f *Forward) Mask() *lang.ModInst  { return f.res.Mask }
func (f *Forward) Score() *lang.ModInst { return f.res.Score }

// Inputs are the tensors of one call, contiguous row-major. Aux holds the
// mods' aux tensors by name (e.g. "doc" → []int32, "slopes" → []float32);
// "mask.doc" also works. Scale 0 means 1/sqrt(Dim).
//
// BlockMask, when set, is the block mask to use (e.g. loaded from
// FlexAttention's tensors); else one is built from the mask for each call.
type Inputs struct {
	Q, K, V   []float32
	Aux       map[string]any
	Scale     float32
	BlockMask *blockmask.BlockMask
}

func (in Inputs) scale(sh Shape) float32 {
	if in.Scale != 0 {
		return in.Scale
	}
	return float32(1 / math.Sqrt(float64(sh.Dim)))
}

func (f *Forward) check(in Inputs, sh Shape) error {
	if err := sh.Validate(); err != nil {
		return err
	}
	if sh.Dim != f.dim {
		return fmt.Errorf("shape: head dim %d, but the kernel was compiled for %d", sh.Dim, f.dim)
	}
	nq, nk := sh.Batch*sh.Heads*sh.SeqQ*sh.Dim, sh.Batch*sh.kvHeads()*sh.SeqK*sh.Dim
	for _, t := range []struct {
		name string
		got  int
		want int
	}{{"q", len(in.Q), nq}, {"k", len(in.K), nk}, {"v", len(in.V), nk}} {
		if t.got != t.want {
			return fmt.Errorf("tensor %s has %d elements, shape %+v needs %d", t.name, t.got, sh, t.want)
		}
	}
	return nil
}

// RunCPU runs the kernel on the CPU reference device and returns O
// ([B, H, SeqQ, Dim]) and LSE ([B, H, SeqQ], natural log).
func (f *Forward) RunCPU(in Inputs, sh Shape) (o, lse []float32, err error) {
	if err := f.check(in, sh); err != nil {
		return nil, nil, err
	}
	bufs := map[string]*cpu.Buffer{
		"q":   cpu.FromFloats("q", f.dtype, f32to64(in.Q)),
		"k":   cpu.FromFloats("k", f.dtype, f32to64(in.K)),
		"v":   cpu.FromFloats("v", f.dtype, f32to64(in.V)),
		"o":   cpu.NewBuffer("o", f.dtype, sh.Batch*sh.Heads*sh.SeqQ*sh.Dim),
		"lse": cpu.NewBuffer("lse", tir.F32, sh.Batch*sh.Heads*sh.SeqQ),
	}
	// Poison outputs so an unwritten element shows up as NaN.
	for _, n := range []string{"o", "lse"} {
		for i := range bufs[n].Vals {
			bufs[n].Vals[i] = math.NaN()
		}
	}
	bm, err := f.blockMask(in, sh)
	if err != nil {
		return nil, nil, err
	}
	for name, xs := range bmTensors(bm) {
		bufs[name] = cpu.FromI32(name, xs)
	}
	scalars := f.scalars(in, sh)
	for k, v := range bmScalars(bm) {
		scalars[k] = v
	}
	k := f.res.Module.Func(f.kernel)
	args, err := bindArgs(k, bufs, scalars, in.Aux)
	if err != nil {
		return nil, nil, err
	}
	grid := [3]int{(sh.SeqQ + f.blockM - 1) / f.blockM, sh.Batch * sh.Heads, 1}
	if err := cpu.Launch(f.res.Module, f.kernel, grid, args...); err != nil {
		return nil, nil, err
	}
	return bufs["o"].F32(), bufs["lse"].F32(), nil
}

// BuildBlockMask classifies the mask's blocks for a shape on the host:
// analytically where the mask can be bounded (causal, windows, prefix,
// chunks: microseconds), else by evaluating it on the CPU device.
//
// The analyzer compiled for a shape is kept, so later calls with that
// shape only classify the blocks and make the lists (microseconds).
func (f *Forward) BuildBlockMask(sh Shape, aux map[string]any) (*blockmask.BlockMask, blockmask.Method, error) {
	bm, err := f.analytic(sh)
	if err == nil {
		return bm, blockmask.MethodAnalytic, nil
	}
	if !errors.Is(err, blockmask.ErrNotAnalyzable) {
		return nil, 0, err
	}
	bm, err = blockmask.EvaluateCPU(f.res.Program, f.res.Mask, blockmask.Shape{B: sh.Batch, H: sh.Heads, SeqQ: sh.SeqQ, SeqK: sh.SeqK},
		blockmask.Options{BlockQ: f.sparseQ, BlockK: f.sparseK}, aux)
	return bm, blockmask.MethodEvaluatedCPU, err
}

// analytic builds the block mask with the shape's cached analyzer; the
// error wraps blockmask.ErrNotAnalyzable when the mask cannot be bounded.
func (f *Forward) analytic(sh Shape) (*blockmask.BlockMask, error) {
	f.amu.Lock()
	defer f.amu.Unlock() // an Analyzer is not safe for concurrent use
	key := [4]int{sh.Batch, sh.Heads, sh.SeqQ, sh.SeqK}
	a, ok := f.analyzers[key]
	if !ok {
		var err error
		a, err = blockmask.NewAnalyzer(f.res.Program, f.res.Mask, blockmask.Shape{B: sh.Batch, H: sh.Heads, SeqQ: sh.SeqQ, SeqK: sh.SeqK})
		if err != nil {
			return nil, err
		}
		if f.analyzers == nil {
			f.analyzers = map[[4]int]*blockmask.Analyzer{}
		}
		f.analyzers[key] = a
	}
	g, err := a.Grid(blockmask.Options{BlockQ: f.sparseQ, BlockK: f.sparseK})
	if err != nil {
		return nil, err
	}
	return blockmask.FromClasses(g)
}

// blockMask is the call's block mask: the given one, checked against the
// shape and the kernel's block sizes, or one built for it.
func (f *Forward) blockMask(in Inputs, sh Shape) (*blockmask.BlockMask, error) {
	bm := in.BlockMask
	if bm == nil {
		var err error
		if bm, _, err = f.BuildBlockMask(sh, in.Aux); err != nil {
			return nil, err
		}
		return bm, nil
	}
	switch {
	case bm.SeqQ != sh.SeqQ || bm.SeqK != sh.SeqK:
		return nil, fmt.Errorf("block mask is for seqlens %d×%d, the call has %d×%d", bm.SeqQ, bm.SeqK, sh.SeqQ, sh.SeqK)
	case bm.BlockQ != f.sparseQ || bm.BlockK != f.sparseK:
		return nil, fmt.Errorf("block mask has %d×%d blocks, the kernel was compiled for %d×%d (set SPARSE_Q/SPARSE_K)", bm.BlockQ, bm.BlockK, f.sparseQ, f.sparseK)
	case bm.B != 1 && bm.B != sh.Batch, bm.H != 1 && bm.H != sh.Heads:
		return nil, fmt.Errorf("block mask has batch %d and heads %d; the call has %d and %d (a mask shared over b or h has 1)", bm.B, bm.H, sh.Batch, sh.Heads)
	}
	return bm, bm.Validate()
}

// bmTensors are the block-mask kernel arguments the forward kernel reads.
func bmTensors(bm *blockmask.BlockMask) map[string][]int32 {
	return map[string][]int32{"kv_num_blocks": bm.KVNumBlocks, "kv_indices": bm.KVIndices,
		"full_kv_num_blocks": bm.FullKVNumBlocks, "full_kv_indices": bm.FullKVIndices}
}

// bmScalars are the strides of the block mask's count tensors (0 over a
// dimension the mask is shared across) and the index row length.
func bmScalars(bm *blockmask.BlockMask) map[string]any {
	sb, sh := bm.H*bm.NumQ, bm.NumQ
	if bm.B == 1 {
		sb = 0
	}
	if bm.H == 1 {
		sh = 0
	}
	return map[string]any{"bm_stride_b": sb, "bm_stride_h": sh, "num_kv_blocks": bm.NumK}
}

// scalars are the kernel's scalar arguments for a contiguous layout.
func (f *Forward) scalars(in Inputs, sh Shape) map[string]any {
	kv := sh.kvHeads()
	return map[string]any{
		"stride_qb": sh.Heads * sh.SeqQ * sh.Dim, "stride_qh": sh.SeqQ * sh.Dim, "stride_qs": sh.Dim,
		"stride_kb": kv * sh.SeqK * sh.Dim, "stride_kh": sh.SeqK * sh.Dim, "stride_ks": sh.Dim,
		"stride_vb": kv * sh.SeqK * sh.Dim, "stride_vh": sh.SeqK * sh.Dim, "stride_vs": sh.Dim,
		"stride_ob": sh.Heads * sh.SeqQ * sh.Dim, "stride_oh": sh.SeqQ * sh.Dim, "stride_os": sh.Dim,
		"heads": sh.Heads, "kv_group": sh.Heads / kv, "seqlen_q": sh.SeqQ, "seqlen_k": sh.SeqK,
		"scale": in.scale(sh),
	}
}

// bindArgs orders arguments by the kernel's parameters, by name.
func bindArgs(k *tir.Func, bufs map[string]*cpu.Buffer, scalars map[string]any, aux map[string]any) ([]any, error) {
	args := make([]any, 0, len(k.Params))
	for _, p := range k.Params {
		if b, ok := bufs[p.Name]; ok {
			args = append(args, b)
			continue
		}
		if s, ok := scalars[p.Name]; ok {
			switch s := s.(type) {
			case int:
				args = append(args, int32(s))
			default:
				args = append(args, s)
			}
			continue
		}
		a, n, err := auxArg(p.Name, aux)
		if err != nil {
			return nil, err
		}
		if a == nil {
			return nil, fmt.Errorf("kernel %s: no value for parameter %s", k.Name, p.Name)
		}
		if isLen(p.Name) {
			args = append(args, int32(n))
		} else {
			args = append(args, a)
		}
	}
	return args, nil
}

func isLen(name string) bool { return len(name) > 4 && name[len(name)-4:] == ".len" }

// auxArg finds the aux tensor for a kernel parameter named like "mask.doc"
// or "mask.doc.len", accepting "mask.doc" or "doc" as keys.
func auxArg(param string, aux map[string]any) (*cpu.Buffer, int, error) {
	name := param
	if isLen(name) {
		name = name[:len(name)-4]
	}
	short := name
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			short = name[i+1:]
			break
		}
	}
	t, ok := aux[name]
	if !ok {
		t, ok = aux[short]
	}
	if !ok {
		return nil, 0, fmt.Errorf("missing aux tensor %q (parameter %s)", short, name)
	}
	switch t := t.(type) {
	case []int32:
		return cpu.FromI32(name, t), len(t), nil
	case []float32:
		return cpu.FromF32(name, t), len(t), nil
	}
	return nil, 0, fmt.Errorf("aux tensor %q must be []int32 or []float32, got %T", short, t)
}

func f32to64(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// Reference computes naive float64 attention with the same mods, evaluated
// element by element on the CPU device, for checking any device's output.
func (f *Forward) Reference(in Inputs, sh Shape) (o, lse []float64, err error) {
	if err := f.check(in, sh); err != nil {
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
	scale := float64(in.scale(sh))
	// The reference sees the inputs at the kernel's storage precision.
	q, k, v := roundTo(in.Q, f.dtype), roundTo(in.K, f.dtype), roundTo(in.V, f.dtype)
	o, lse = reference.Attention(q, k, v, reference.Shape{B: sh.Batch, H: sh.Heads, HKV: sh.kvHeads(), Sq: sh.SeqQ, Sk: sh.SeqK, D: sh.Dim}, scale, mask, score)
	return o, lse, evalErr
}

func roundTo(xs []float32, e tir.Elem) []float64 {
	return cpu.FromFloats("", e, f32to64(xs)).Vals
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
		buf, n, err := auxArg(m.Kind()+"."+a.Name, aux)
		if err != nil {
			return nil, err
		}
		extra = append(extra, buf, int32(n))
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

// FullVariant returns the forward kernel's mask-free variant made by the
// specialize-mask pass (flash_fwd.full), which runs on blocks the mask keeps
// entirely. It fails when that pass was disabled or the kernel has no mask.
func (f *Forward) FullVariant() (*Forward, error) {
	name := f.kernel + ".full"
	if f.res.Module.Func(name) == nil {
		return nil, fmt.Errorf("kernel %s has no %s variant (no mask, or specialize-mask disabled)", f.kernel, name)
	}
	return &Forward{req: f.req, res: f.res, kernel: name, dim: f.dim, blockM: f.blockM,
		sparseQ: f.sparseQ, sparseK: f.sparseK, dtype: f.dtype}, nil
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
