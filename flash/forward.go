package flash

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/parser"
	"github.com/fac-compiler/fac/passes"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// Shape is an attention problem: Q is [Batch, Heads, SeqQ, Dim], K [Batch,
// KVHeads, SeqK, Dim], V [Batch, KVHeads, SeqK, DimV] and O [Batch, Heads,
// SeqQ, DimV] (KVHeads = Heads unless grouped-query; DimV 0 means Dim).
type Shape = launch.Shape

// Options choose the kernel instance.
type Options struct {
	Mask    string            // mask mod, e.g. "causal", "sliding_window(256, 0)"; "" = no mask
	Score   string            // score mod, e.g. "softcap(30.0)"; "" = identity
	Sources map[string]string // user source files (name → text) defining mods
	Consts  map[string]string // other compile-time arguments, e.g. BLOCK_M: "32"
	DType   string            // element type of Q, K, V, O: f32 (default), bf16, f16
	// DimV is the head dim of V and O (the kernels' HEAD_DIM_V) where it
	// differs from the head dim of Q and K that the kernel is compiled for
	// (DeepSeek's 128 beside 192); 0: the same. Calls then give it as
	// Shape.DimV.
	DimV   int
	Passes passes.Options
	// Target is the GPU target the kernels are built for. Its Arch, when
	// set (e.g. "sm_90a"), is the GPU: compile-time arguments not set in
	// Consts then take the values the kernel's contract tunes for it (on
	// sm_90a's wgmma path: the forward's 128×128 tiles on 8 warps, the
	// backward's 64×128 on 8 or 32×128 on 4). "" keeps the kernel's
	// defaults; RunCUDA, LaunchCUDA and the other GPU entry points
	// (forward, backward, varlen) then use the device's arch. Its switches
	// (codegen.TargetConfig: wgmma, tma, ...; zero: the default code)
	// shape every GPU build; those left at their defaults take the
	// environment's (Env: FAC_WGMMA=0, FAC_TMA=0, ...).
	Target codegen.TargetConfig
	// Sinks compiles flash_fwd_sinks: learnable per-head sink logits
	// (gpt-oss) join the softmax denominator; calls then need Inputs.Sinks.
	Sinks bool
	// MaskForms declare forms of the caller's own masks (in Sources), by
	// name, which the runtime may rely on: with MaskForm{EqualIDs: "seg"},
	// a mask keeping exactly the pairs where seg[q_idx] == seg[kv_idx]
	// runs as spans where the ids are runs, as the stdlib's document does
	// (docs/runtime.md, Declared mask forms).
	MaskForms map[string]MaskForm

	// Decoding (docs/decoding.md). NumSplits splits each q tile's kv
	// blocks over that many programs (flash_fwd_splitkv, then
	// flash_fwd_combine merges them): 0 = auto (from the shape and the
	// multiprocessor count), 1 = off, at most MaxSplits. PackGQA packs
	// the query heads of a kv head into one tile (auto: for SeqQ ≤ 64 with
	// more than one query head per kv head). SMs is the multiprocessor
	// count for the auto choice (0: the GPU's, DefaultSMs on the CPU).
	// DecodeConsts are compile-time arguments of flash_fwd_splitkv
	// (BLOCK_N, num_warps; BLOCK_M fixes the tile rows, else 16 or 64 by
	// the call; pdl; fused_combine=true has the split kernel merge its
	// splits, with no flash_fwd_combine: dense and paged calls, not
	// ragged batches or sinks); its HEAD_DIM, HEAD_DIM_V, DTYPE,
	// SPARSE_Q, SPARSE_K and mods are the forward's. Plan says what a
	// call runs. Sinks kernels have no split-KV form.
	NumSplits    int
	PackGQA      PackGQA
	SMs          int
	DecodeConsts map[string]string
}

// Forward is a compiled forward kernel for one head dimension (one pair:
// Q's and K's, V's).
type Forward struct {
	opts     Options
	res      *compiler.Result
	contract *launch.Contract
	dim      int
	dimV     int // V's and O's head dim (dim unless Options.DimV)
	dtype    tir.Elem

	clsOnce sync.Once // the block-classification kernel, made on first use
	cls     *compiler.Result
	clsErr  error

	amu       sync.Mutex
	analyzers map[string]*blockmask.Analyzer // by B, H, SeqQ, SeqK and the mask's run-time parameters

	tunedFor perArch[*Forward]     // f compiled with the tile arguments tuned for a GPU arch (tuned)
	spans    spanVariant[*Forward] // f with document as spans (withSpans)

	dmu        sync.Mutex                    // the split-KV kernels, made on first use
	splitRes   map[splitKey]*compiler.Result // flash_fwd_splitkv and flash_fwd_paged by BLOCK_M
	combineRes map[int]*compiler.Result      // flash_fwd_combine by MAX_SPLITS
	appendRes  *compiler.Result              // kv_append
}

// Options are the options f was compiled with.
func (f *Forward) Options() Options { return f.opts }

// CompileForward compiles flash_fwd for head dimension dim (Q's and K's;
// V's is Options.DimV, or dim).
func CompileForward(opts Options, dim int) (*Forward, error) {
	ks, dimV, err := compileVariant(attention.Forward, attention.VariantOptions{Sinks: opts.Sinks}, opts, dim)
	if err != nil {
		return nil, err
	}
	res := ks[0].res
	if err := checkMaskForms(opts.MaskForms, res.Program, res.Mask); err != nil {
		return nil, err
	}
	return &Forward{opts: opts, res: res, contract: ks[0].contract, dim: dim, dimV: dimV, dtype: res.Func().Params[0].Type.Elem}, nil
}

// kernels are the kernels a call without split-KV runs: f's.
func (f *Forward) kernels() []stage { return []stage{{res: f.res, contract: f.contract}} }

// Module is the compiled tile IR.
func (f *Forward) Module() *tir.Module { return f.res.Module }

// Result is the compiled kernel instance (tile IR, identity, mods).
func (f *Forward) Result() *compiler.Result { return f.res }

// Mask and Score are the bound mods.
func (f *Forward) Mask() *lang.ModInst  { return f.res.Mask }
func (f *Forward) Score() *lang.ModInst { return f.res.Score }

// AuxTensors are the names of the aux tensors the kernel's mods read
// ("doc", "slopes"): Inputs.Aux must hold exactly these.
func (f *Forward) AuxTensors() []string { return f.contract.AuxTensors(f.res.Params()) }

// Inputs are the tensors of one call, contiguous row-major. Aux holds the
// mods' aux tensors by name (e.g. "doc" → []int32, "slopes" → []float32);
// "mask.doc" also works. Scalars holds the mods' run-time parameters by
// name (e.g. "offset" → 5; "mask.offset" also works): int, int32, int64,
// float32, float64 or bool. Scale 0 means 1/sqrt(Dim).
//
// An aux tensor is a flat row-major slice of its declared shape for this
// call (a tensor declared tensor[T] without a shape is 1-D of any length),
// or an Array, whose shape is checked dimension by dimension. Its element
// type is the declared one; data of another type converts when every
// value keeps: []bool; []int8, []uint8, []int16, []int32, []int64, []int;
// []float32, []float64; []uint16 as the bits of f16 or bf16 (for tensors of
// those types only). See launch.HostData.
//
// BlockMask, when set, is the block mask to use (e.g. loaded from
// FlexAttention's tensors); else one is built from the mask for each call.
//
// Sinks are the per-head sink logits [Heads] (natural log, not scaled by
// Scale) of a kernel compiled with Options.Sinks, and must be nil otherwise.
type Inputs struct {
	Q, K, V   []float32
	Aux       map[string]any
	Scalars   map[string]any
	Scale     float32
	BlockMask *blockmask.BlockMask
	Sinks     []float32
}

// HasSinks reports whether the kernel was compiled with Options.Sinks.
func (f *Forward) HasSinks() bool { return f.opts.Sinks }

// Array is an N-D host array for Inputs.Aux: a flat row-major slice and its
// shape, e.g. Array{Shape: []int{2, 1024}, Data: docIDs} for an aux tensor
// declared tensor[i32][batch, seqlen_q].
type Array = launch.Array

// RuntimeParams are the names of the run-time parameters the kernel's mods
// read ("offset"): Inputs.Scalars must hold exactly these.
func (f *Forward) RuntimeParams() []string { return f.contract.RuntimeParams(f.res.Params()) }

// modValues are a call's inputs for building a block mask: the mask's aux
// tensors and run-time parameters, in one map by name.
func (in Inputs) modValues() map[string]any {
	if len(in.Scalars) == 0 {
		return in.Aux
	}
	out := make(map[string]any, len(in.Aux)+len(in.Scalars))
	for k, v := range in.Aux {
		out[k] = v
	}
	for k, v := range in.Scalars {
		out[k] = v
	}
	return out
}

func (f *Forward) problem(sh Shape, scale float32) launch.Problem {
	return launch.Problem{Shape: sh, Attrs: f.res.Attrs(), Scale: scale}
}

// sparse are the mask block sizes (SPARSE_Q × SPARSE_K).
func (f *Forward) sparse() (q, k int) {
	a := f.res.Attrs()
	return int(a[f.contract.BlockMask.BlockQAttr]), int(a[f.contract.BlockMask.BlockKAttr])
}

// checkAux checks the host aux tensors the mods read against their
// declared types and shapes for sh (a missing one is left to the binder,
// which names it).
func (f *Forward) checkAux(aux map[string]any, sh Shape) error {
	for _, m := range []*lang.ModInst{f.res.Mask, f.res.Score} {
		if m == nil {
			continue
		}
		for _, p := range m.AuxParams() {
			v, ok := aux[m.Kind()+"."+p.Name]
			if !ok {
				v, ok = aux[p.Name]
			}
			if !ok {
				continue
			}
			if err := checkAuxValue(m, p, v, sh); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMods checks a call's aux tensors (checkAux) and run-time
// parameters (checkScalars) against the mods'.
func (f *Forward) checkMods(aux, scalars map[string]any, sh Shape) error {
	if err := f.checkAux(aux, sh); err != nil {
		return err
	}
	return f.checkScalars(scalars)
}

// checkAuxLens checks the lengths of device aux tensors against the mods'
// declared shapes for sh.
func (f *Forward) checkAuxLens(lens map[string]int, sh Shape) error {
	sz := lang.Sizes{Batch: sh.Batch, Heads: sh.Heads, SeqQ: sh.SeqQ, SeqK: sh.SeqK}
	for _, m := range []*lang.ModInst{f.res.Mask, f.res.Score} {
		if m == nil {
			continue
		}
		for _, p := range m.AuxParams() {
			n, ok := lens[m.Kind()+"."+p.Name]
			if !ok {
				n, ok = lens[p.Name]
			}
			if !ok {
				continue
			}
			if err := p.CheckShape(nil, n, sz); err != nil {
				return fmt.Errorf("%s %s: %w", m.Kind(), m, err)
			}
		}
	}
	return nil
}

// checkAuxValue checks one host aux tensor of mod m: its data converts to
// the declared element type, and its shape (or length) is the declared one.
func checkAuxValue(m *lang.ModInst, p lang.AuxParam, v any, sh Shape) error {
	data, shape, err := launch.HostData(elemName(p.Elem), v)
	if err != nil {
		return fmt.Errorf("%s %s: aux tensor %s (%s): %w", m.Kind(), m, p.Name, p.Type(), err)
	}
	n, _ := launch.HostLen(data)
	if err := p.CheckShape(shape, n, lang.Sizes{Batch: sh.Batch, Heads: sh.Heads, SeqQ: sh.SeqQ, SeqK: sh.SeqK}); err != nil {
		return fmt.Errorf("%s %s: %w", m.Kind(), m, err)
	}
	return nil
}

// elemName is an element type as launch and the devices name it.
func elemName(e tir.Elem) string { return e.String() }

// hostData are the host data of call c by kernel parameter name: in's
// tensors, c's block-mask lists and the mods' aux tensors.
func (f *Forward) hostData(in Inputs, c *forwardCall) map[string]any {
	host := map[string]any{"q": in.Q, "k": in.K, "v": in.V}
	if f.opts.Sinks {
		host["sinks"] = in.Sinks
	}
	addCallData(c.ks, c.calls, host, c.bm, in.Aux, nil)
	return host
}

// checkScalars checks a call's run-time parameters against the mods': each
// one given, of a type it takes, and no other.
func (f *Forward) checkScalars(vals map[string]any) error {
	used := map[string]bool{}
	var names []string
	for _, m := range []*lang.ModInst{f.res.Mask, f.res.Score} {
		if m == nil {
			continue
		}
		for _, p := range m.ScalarParams() {
			names = append(names, p.Name)
			key := m.Kind() + "." + p.Name
			v, ok := vals[key]
			if !ok {
				key = p.Name
				v, ok = vals[key]
			}
			if !ok {
				return fmt.Errorf("missing run-time parameter %q (parameter %s.%s)", p.Name, m.Kind(), p.Name)
			}
			used[key] = true
			if _, err := p.Convert(v); err != nil {
				return fmt.Errorf("%s %s: %w", m.Kind(), m, err)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		if !used[k] {
			read := "none"
			if len(names) > 0 {
				read = strings.Join(names, ", ")
			}
			return fmt.Errorf("run-time parameter %q is not read by the mods (they read: %s)", k, read)
		}
	}
	return nil
}

// checkDims refuses a shape whose head dims are not those f was compiled
// for, before the tensors' sizes, which follow from the shape, are
// checked: a call that leaves Shape.DimV at 0 for a kernel compiled with
// Options.DimV is told so, not that V has the wrong size.
func (f *Forward) checkDims(sh Shape) error {
	if sh.Dim != f.dim {
		return fmt.Errorf("shape: head dim %d, but the kernel was compiled for %d", sh.Dim, f.dim)
	}
	if sh.VDim() != f.dimV {
		return fmt.Errorf("shape: value head dim %d (Shape.DimV; 0 is the head dim), but the kernel was compiled for %d (Options.DimV)", sh.VDim(), f.dimV)
	}
	return nil
}

// checkInputs checks the host tensors' sizes against the shape, and the
// mods' aux tensors and run-time parameters against their declarations.
// checkSinks checks a call's sink logits against the kernel: one per
// head with Options.Sinks, none without.
func (f *Forward) checkSinks(sinks []float32, heads int) error {
	switch {
	case f.opts.Sinks && len(sinks) != heads:
		return fmt.Errorf("sinks has %d values, want one per head (%d)", len(sinks), heads)
	case !f.opts.Sinks && sinks != nil:
		return fmt.Errorf("inputs have sinks, but the kernel was compiled without them (Options.Sinks)")
	}
	return nil
}

func (f *Forward) checkInputs(in Inputs, sh Shape) error {
	if err := f.checkMods(in.Aux, in.Scalars, sh); err != nil {
		return err
	}
	if err := f.checkSinks(in.Sinks, sh.Heads); err != nil {
		return err
	}
	if err := f.checkDims(sh); err != nil {
		return err
	}
	return checkSizes(f.contract, f.problem(sh, in.Scale), []hostTensor{{"q", "q", in.Q}, {"k", "k", in.K}, {"v", "v", in.V}})
}

// hostTensor is a call's host tensor: its name in errors, the contract
// tensor whose shape it has, and its data.
type hostTensor struct {
	name, tensor string
	xs           []float32
}

// checkSizes checks each of ts against its tensor's size in contract c for
// problem p.
func checkSizes(c *launch.Contract, p launch.Problem, ts []hostTensor) error {
	for _, t := range ts {
		n, err := c.Extent(t.tensor, p, nil)
		if err != nil {
			return err
		}
		if len(t.xs) != n {
			return fmt.Errorf("tensor %s has %d elements, shape %+v needs %d", t.name, len(t.xs), p.Shape, n)
		}
	}
	return nil
}

// RunCPU runs the kernel on the CPU reference device and returns O
// ([B, H, SeqQ, DimV]) and LSE ([B, H, SeqQ], natural log).
func (f *Forward) RunCPU(in Inputs, sh Shape) (o, lse []float32, err error) {
	return f.RunCPUContext(context.Background(), in, sh)
}

// RunCPUContext is RunCPU that gives up, returning ctx's error, once ctx is
// done (the interpreter takes minutes on large problems).
func (f *Forward) RunCPUContext(ctx context.Context, in Inputs, sh Shape) (o, lse []float32, err error) {
	if err := sh.Validate(); err != nil {
		return nil, nil, err
	}
	if err := f.checkInputs(in, sh); err != nil {
		return nil, nil, err
	}
	plan, err := f.Plan(sh, 0)
	if err != nil {
		return nil, nil, err
	}
	bm, err := f.blockMask(in, sh)
	if err != nil {
		return nil, nil, err
	}
	if !plan.SplitKV {
		f, in = f.withSpans(in, sh) // the same pairs: bm serves it
	}
	aux, err := auxLens(in.Aux)
	if err != nil {
		return nil, nil, err
	}
	c, err := f.bindPlan(plan, sh, in.Scale, bm, aux, in.Scalars, nil)
	if err != nil {
		return nil, nil, err
	}
	out, err := runCPU(ctx, c.ks, c.calls, f.hostData(in, c))
	if err != nil {
		return nil, nil, err
	}
	return f32s(out, "o"), f32s(out, "lse"), nil
}

// BuildBlockMask classifies the mask's blocks for a shape on the host:
// analytically where the mask can be bounded (causal, windows, prefix,
// chunks: microseconds), else by evaluating it on the CPU device.
//
// The analyzer compiled for a shape is kept, so later calls with that
// shape only classify the blocks and make the lists (microseconds).
//
// The block mask records the mask and the batch and heads it was built for
// (BlockMask.Mask, BuiltB, BuiltH), so a run with another mask refuses it.
func (f *Forward) BuildBlockMask(sh Shape, aux map[string]any) (*blockmask.BlockMask, blockmask.Method, error) {
	method := blockmask.MethodAnalytic
	bm, err := f.analyticWith(sh, aux)
	if errors.Is(err, blockmask.ErrNotAnalyzable) {
		sq, sk := f.sparse()
		method = blockmask.MethodEvaluatedCPU
		bm, err = blockmask.EvaluateCPU(f.res.Program, f.res.Mask, blockmask.Shape{B: sh.Batch, H: sh.Heads, SeqQ: sh.SeqQ, SeqK: sh.SeqK},
			blockmask.Options{BlockQ: sq, BlockK: sk}, aux)
	}
	if err != nil {
		return nil, 0, err
	}
	bm.Mask, bm.BuiltB, bm.BuiltH, bm.Params = "none", sh.Batch, sh.Heads, f.maskParams(aux)
	if f.res.Mask != nil {
		bm.Mask = f.res.Mask.String()
	}
	return bm, method, nil
}

// maskParams are the values of the mask's run-time parameters in vals (by
// short or full name), as a block mask records them; nil when it has none.
func (f *Forward) maskParams(vals map[string]any) map[string]string {
	if f.res.Mask == nil || len(f.res.Mask.ScalarParams()) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, p := range f.res.Mask.ScalarParams() {
		v, ok := vals["mask."+p.Name]
		if !ok {
			v, ok = vals[p.Name]
		}
		if ok {
			out[p.Name] = fmt.Sprint(v)
		}
	}
	return out
}

// analytic builds the block mask with the shape's cached analyzer; the
// error wraps blockmask.ErrNotAnalyzable when the mask cannot be bounded,
// or reads run-time parameters (analyticWith takes their values).
func (f *Forward) analytic(sh Shape) (*blockmask.BlockMask, error) { return f.analyticWith(sh, nil) }

// analyticWith is analytic with the values of the mask's run-time
// parameters, by name, in vals (other entries are ignored).
func (f *Forward) analyticWith(sh Shape, vals map[string]any) (*blockmask.BlockMask, error) {
	f.amu.Lock()
	defer f.amu.Unlock() // an Analyzer is not safe for concurrent use
	key := fmt.Sprint(sh.Batch, sh.Heads, sh.SeqQ, sh.SeqK)
	if f.res.Mask != nil {
		for _, p := range f.res.Mask.ScalarParams() {
			v, ok := vals["mask."+p.Name]
			if !ok {
				v = vals[p.Name]
			}
			key += fmt.Sprintf(" %s=%v", p.Name, v)
		}
	}
	a, ok := f.analyzers[key]
	if !ok {
		var err error
		a, err = blockmask.NewAnalyzerWith(f.res.Program, f.res.Mask, blockmask.Shape{B: sh.Batch, H: sh.Heads, SeqQ: sh.SeqQ, SeqK: sh.SeqK}, vals)
		if err != nil {
			return nil, err
		}
		if f.analyzers == nil {
			f.analyzers = map[string]*blockmask.Analyzer{}
		}
		f.analyzers[key] = a
	}
	sq, sk := f.sparse()
	return a.BlockMask(blockmask.Options{BlockQ: sq, BlockK: sk})
}

// blockMask is the call's block mask: the given one, checked against the
// shape and the kernel's block sizes, or one built for it.
func (f *Forward) blockMask(in Inputs, sh Shape) (*blockmask.BlockMask, error) {
	bm := in.BlockMask
	if bm == nil {
		var err error
		if bm, _, err = f.BuildBlockMask(sh, in.modValues()); err != nil {
			return nil, err
		}
		return bm, nil
	}
	if err := f.checkBlockMask(bm, sh); err != nil {
		return nil, err
	}
	return bm, f.checkBlockMaskParams(bm, in.modValues())
}

// checkBlockMaskParams refuses a block mask built with other values of the
// mask's run-time parameters than the call's (a decode offset moves the
// blocks). A block mask that records no values (made by hand) is trusted.
func (f *Forward) checkBlockMaskParams(bm *blockmask.BlockMask, vals map[string]any) error {
	if bm.Params == nil || strings.HasSuffix(f.res.Kernel, ".full") {
		return nil
	}
	for name, want := range f.maskParams(vals) {
		if got, ok := bm.Params[name]; ok && got != want {
			return fmt.Errorf("block mask was built with %s=%s, the call has %s=%s", name, got, name, want)
		}
	}
	return nil
}

// checkBlockMask checks a caller's block mask against the call: the mask it
// was built from (when recorded), the sequence lengths, the kernel's block
// sizes, and B and H. A kernel trusts the block mask's full and empty
// blocks, so one made for another mask gives wrong attention, silently.
func (f *Forward) checkBlockMask(bm *blockmask.BlockMask, sh Shape) error {
	want := "none"
	if f.res.Mask != nil {
		want = f.res.Mask.String()
	}
	// The mask-free variant (FullVariant) never evaluates the mask: it
	// computes the blocks it is given, whichever mask listed them.
	if got := bm.Mask; got != "" && got != want && !strings.HasSuffix(f.res.Kernel, ".full") {
		// A provenance written by hand may spell the mask differently
		// ("sliding_window(1023,0)", named arguments): compare canonically.
		if e, err := parser.ParseExpr("<block mask>", got); err == nil {
			if m, err := f.res.Program.ResolveMod(e, "mask"); err == nil {
				got = m.String()
			}
		}
		if got != want {
			return fmt.Errorf("block mask was built for mask %s, but the kernel's mask is %s", bm.Mask, want)
		}
	}
	sq, sk := f.sparse()
	switch {
	case bm.SeqQ != sh.SeqQ || bm.SeqK != sh.SeqK:
		return fmt.Errorf("block mask is for seqlens %d×%d, the call has %d×%d", bm.SeqQ, bm.SeqK, sh.SeqQ, sh.SeqK)
	case bm.BlockQ != sq || bm.BlockK != sk:
		return fmt.Errorf("block mask has %d×%d blocks, the kernel was compiled for %d×%d (compile with Consts SPARSE_Q=%d, SPARSE_K=%d, or build the mask with Forward.BuildBlockMask)", bm.BlockQ, bm.BlockK, sq, sk, bm.BlockQ, bm.BlockK)
	case bm.B != 1 && bm.B != sh.Batch, bm.H != 1 && bm.H != sh.Heads:
		return fmt.Errorf("block mask has batch %d and heads %d; the call has %d and %d (a mask shared over b or h has 1)", bm.B, bm.H, sh.Batch, sh.Heads)
	}
	if err := bm.Validate(); err != nil {
		return err
	}
	// B (H) of 1 is a mask shared over b (h), unless it was built for a
	// batch of 1 (one head): then it is shared only if the mask ignores b
	// (h). Unknown provenance (0) keeps FlexAttention's broadcast.
	if (bm.B == 1 && bm.BuiltB == 1 && sh.Batch > 1) || (bm.H == 1 && bm.BuiltH == 1 && sh.Heads > 1) {
		usesB, usesH, err := blockmask.UsesBH(f.res.Program, f.res.Mask, sh.SeqQ, sh.SeqK)
		if err != nil {
			return err
		}
		if usesB && bm.B == 1 && sh.Batch > 1 {
			return fmt.Errorf("block mask was built for batch 1, but mask %s reads b and the call has batch %d", want, sh.Batch)
		}
		if usesH && bm.H == 1 && sh.Heads > 1 {
			return fmt.Errorf("block mask was built for 1 head, but mask %s reads h and the call has %d heads", want, sh.Heads)
		}
	}
	return nil
}

// auxLens are the lengths (in elements) of host aux tensors, by the
// caller's names.
func auxLens(aux map[string]any) (map[string]int, error) {
	out := map[string]int{}
	for k, t := range aux {
		if b, ok := t.(*cpu.Buffer); ok {
			out[k] = len(b.Vals)
			continue
		}
		n, err := launch.HostLen(t)
		if err != nil {
			return nil, fmt.Errorf("aux tensor %q: %w", k, err)
		}
		out[k] = n
	}
	return out, nil
}

// FullVariant returns the forward kernel's mask-free variant made by the
// specialize-mask pass (flash_fwd.full), which runs on blocks the mask keeps
// entirely. It fails when that pass was disabled or the kernel has no mask.
func (f *Forward) FullVariant() (*Forward, error) {
	name := f.res.Kernel + ".full"
	if f.res.Module.Func(name) == nil {
		return nil, fmt.Errorf("kernel %s has no %s variant (no mask, or specialize-mask disabled)", f.res.Kernel, name)
	}
	res := *f.res
	res.Kernel = name
	c := *f.contract
	c.Kernel = name
	opts := f.opts
	opts.NumSplits, opts.PackGQA = 1, PackGQAOff // the variant has no split-KV form
	return &Forward{opts: opts, res: &res, contract: &c, dim: f.dim, dimV: f.dimV, dtype: f.dtype}, nil
}
