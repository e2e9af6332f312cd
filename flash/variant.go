package flash

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// Every variant (attention.Variant: forward, split-KV, paged, varlen,
// backward, varlen backward) is compiled, bound and run on the CPU device
// here, and uploaded or launched on a GPU in variant_cuda.go, from its
// kernels' contracts; a family's own files hold its calling convention:
// input types and checks, block mask, plan and reference.

// stage is one compiled kernel of a variant.
type stage struct {
	res      *compiler.Result
	contract *launch.Contract
	req      compiler.Request
}

// dqLayout is the backward's one buffer whose layout is a compile-time
// argument: dq_accum, in dq_accum.fa's tiles with DQ_FRAG. Every kernel
// that reads or writes the buffer must take the same value.
var dqLayout = struct{ arg, tensor string }{"DQ_FRAG", "dq_accum"}

// followLayout makes the kernels of ks that share tensor take the layout
// argument name as the one with a tuned set resolved it: a tuned set
// (flash_bwd's DQ_FRAG) applies to its own kernel, and the kernels that
// zero and read the buffer (the pre- and postprocess) must agree on its
// layout. Those that differ are compiled again with the tuned value.
func followLayout(ks []stage, name, tensor string) ([]stage, error) {
	lead := slices.IndexFunc(ks, func(s stage) bool { return len(s.contract.Tuned) > 0 && hasTensor(s.contract, tensor) })
	if lead < 0 {
		return ks, nil
	}
	want, ok := ks[lead].res.Attrs()[name]
	if !ok {
		return ks, nil
	}
	for i, s := range ks {
		got, declared := s.res.Attrs()[name]
		if i == lead || !declared || got == want || !hasTensor(s.contract, tensor) {
			continue
		}
		req := s.req
		req.Consts = maps.Clone(req.Consts)
		req.Consts[name] = strconv.FormatBool(want != 0)
		res, err := compileKernel(s.contract, req)
		if err != nil {
			return nil, err
		}
		ks[i].res, ks[i].req = res, req
	}
	return ks, nil
}

// results are the compiled kernels of ks, in order.
func results(ks []stage) []*compiler.Result {
	out := make([]*compiler.Result, len(ks))
	for i, s := range ks {
		out[i] = s.res
	}
	return out
}

// compileVariant compiles v's kernels for vo in launch order, for opts
// and head dim dim (Q's and K's), and gives V's head dim (Options.DimV, or
// dim). Each kernel takes the mods, HEAD_DIM, HEAD_DIM_V and DTYPE where it
// declares them, and those of opts.Consts it declares; a variant of one
// kernel takes all of them (its compile names one it lacks), one of
// several refuses one that none declares. Each kernel is checked against
// its contract, on a problem of one position.
func compileVariant(v *attention.Variant, vo attention.VariantOptions, opts Options, dim int) ([]stage, int, error) {
	if err := opts.check(); err != nil {
		return nil, 0, err
	}
	cs, err := v.Kernels(vo)
	if err != nil {
		return nil, 0, err
	}
	who := "the " + v.Name + " kernels take"
	if len(cs) == 1 {
		who = cs[0].Kernel + " takes"
	}
	dt := opts.DType
	if dt == "" {
		dt = "f32"
	}
	if dt != "f32" && dt != "bf16" && dt != "f16" {
		return nil, 0, fmt.Errorf("unsupported dtype %q: %s f32, bf16 or f16", dt, who)
	}
	if dim <= 0 || dim > 256 {
		return nil, 0, fmt.Errorf("unsupported head dim %d: want 1..256", dim)
	}
	if err := opts.checkDTypeDim(dt, dim); err != nil {
		return nil, 0, err
	}
	dimV, err := opts.dimV(dim)
	if err != nil {
		return nil, 0, err
	}
	prog, err := compiler.Load(opts.Sources)
	if err != nil {
		return nil, 0, err
	}
	if err := checkSharedLayout(prog, cs, opts.Consts, dqLayout.arg, dqLayout.tensor); err != nil {
		return nil, 0, err
	}
	used := map[string]bool{}
	var out []stage
	for _, c := range cs {
		cps, ok := prog.KernelParams(c.Kernel)
		if !ok {
			return nil, 0, fmt.Errorf("internal compiler error: no kernel %s", c.Kernel)
		}
		consts := map[string]string{}
		if len(cs) == 1 {
			maps.Copy(consts, opts.Consts)
		}
		req := compiler.Request{Sources: opts.Sources, Kernel: c.Kernel, Consts: consts, Passes: opts.Passes, Target: opts.target()}
		for _, cp := range cps {
			if v, ok := opts.Consts[cp.Name]; ok {
				consts[cp.Name] = v
				used[cp.Name] = true
			}
			// The dims and the element type win over Consts, which may
			// only repeat them (checkDTypeDim).
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
		}
		res, err := compileKernel(c, req)
		if err != nil {
			return nil, 0, err
		}
		if c.Check != nil {
			p := launch.Problem{Shape: Shape{Batch: 1, Heads: 1, SeqQ: 1, SeqK: 1, Dim: dim, DimV: dimV}, Attrs: res.Attrs()}
			if err := c.Check(p); err != nil {
				return nil, 0, err
			}
		}
		out = append(out, stage{res: res, contract: c, req: req})
	}
	if _, given := opts.Consts[dqLayout.arg]; !given {
		if out, err = followLayout(out, dqLayout.arg, dqLayout.tensor); err != nil {
			return nil, 0, err
		}
	}
	if len(cs) > 1 {
		for _, k := range slices.Sorted(maps.Keys(opts.Consts)) {
			if !used[k] {
				return nil, 0, fmt.Errorf("no %s kernel has a compile-time parameter %s", v.Name, k)
			}
		}
	}
	return out, dimV, nil
}

// compileKernel compiles req, a request for c's kernel, and checks the
// result against c.
func compileKernel(c *launch.Contract, req compiler.Request) (*compiler.Result, error) {
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
	return res, nil
}

// bindKernel binds one kernel of a variant for a call: r is the call's
// request, whose problem lacks the kernel's attributes. The kernel takes
// the aux tensors and run-time parameters if it has mods, and the strides
// of its own tensors (the binder refuses any other).
func bindKernel(st stage, r launch.Request) (*launch.Call, error) {
	r.Problem.Attrs = st.res.Attrs()
	if len(st.contract.Mods) == 0 {
		r.Aux, r.Scalars = nil, nil
	}
	strides := r.Strides
	r.Strides = nil
	for name, s := range strides {
		if hasTensor(st.contract, name) {
			if r.Strides == nil {
				r.Strides = map[string][]int{}
			}
			r.Strides[name] = s
		}
	}
	return st.contract.Bind(st.res.Params(), r)
}

// bindAll binds every kernel of ks for one call with r (bindKernel); the
// main one also takes the aux gradients grads (zeroed f32 buffers it adds
// into, by binder key: auxGradKey).
func bindAll(ks []stage, main int, r launch.Request, grads map[string]int) ([]*launch.Call, error) {
	calls := make([]*launch.Call, len(ks))
	for i, st := range ks {
		ri := r
		if i == main && len(grads) > 0 {
			ri.Aux = maps.Clone(grads)
			maps.Copy(ri.Aux, r.Aux)
		}
		var err error
		if calls[i], err = bindKernel(st, ri); err != nil {
			return nil, err
		}
	}
	return calls, nil
}

func hasTensor(c *launch.Contract, name string) bool {
	return slices.ContainsFunc(c.Tensors, func(t launch.Tensor) bool { return t.Name == name })
}

// addCallData adds to host, by parameter name, what the kernels read of a
// call besides its tensors: the lists of bm (a block mask of the call's
// shape) that each kernel's contract reads, the mods' aux tensors (aux, by
// the caller's names) but for the aux gradients (grads), and zeroed
// counters (launch.Buffer.Zeroed) where host has none.
func addCallData(ks []stage, calls []*launch.Call, host map[string]any, bm *blockmask.BlockMask, aux map[string]any, grads map[string]int) {
	for i, st := range ks {
		if st.contract.BlockMask != nil {
			for name, xs := range st.contract.BlockMask.Tensors(bm) {
				host[name] = xs
			}
		}
		for _, b := range calls[i].Buffers {
			if _, isGrad := grads[b.Key]; b.Role == launch.Aux && !isGrad {
				host[b.Name] = aux[b.Key]
			}
		}
	}
	addZeroed(calls, host)
}

// addZeroed adds to host the zeroed counters (launch.Buffer.Zeroed) the
// calls take, where host has none.
func addZeroed(calls []*launch.Call, host map[string]any) {
	for _, c := range calls {
		for _, b := range c.Buffers {
			if _, given := host[b.Name]; b.Zeroed && !given {
				host[b.Name] = make([]int32, b.Len)
			}
		}
	}
}

// runCPU runs a call of ks on the CPU device, in order: host holds the
// inputs by parameter name, and each kernel's outputs join it for the
// kernels after it. It returns host with every output.
func runCPU(ctx context.Context, ks []stage, calls []*launch.Call, host map[string]any) (map[string]any, error) {
	for i, st := range ks {
		out, err := cpu.Run(ctx, st.res.Module, calls[i], host)
		if err != nil {
			return nil, err
		}
		for _, name := range st.contract.Outputs() {
			host[name] = out[name]
		}
	}
	return host, nil
}

// f32s is the f32 contents of output name of a CPU run.
func f32s(out map[string]any, name string) []float32 { return out[name].(*cpu.Buffer).F32() }

// checkSharedLayout refuses const name (a layout of tensor, which several
// kernels of a family write and read) where one of those kernels does not
// declare it: it would keep the other layout.
func checkSharedLayout(prog *lang.Program, cs []*launch.Contract, consts map[string]string, name, tensor string) error {
	if _, ok := consts[name]; !ok {
		return nil
	}
	for _, c := range cs {
		if !slices.ContainsFunc(c.Tensors, func(t launch.Tensor) bool { return t.Name == tensor }) {
			continue
		}
		cps, _ := prog.KernelParams(c.Kernel)
		if !slices.ContainsFunc(cps, func(p *lang.CParam) bool { return p.Name == name }) {
			return fmt.Errorf("%s: %s keeps %s in its own layout; of the backward's kernels only flash_bwd takes %s", name, c.Kernel, tensor, name)
		}
	}
	return nil
}
