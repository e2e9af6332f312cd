package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/internal/npy"
	"github.com/fac-compiler/fac/reference"
)

// backwardFlags are fac run's backward pass: --backward, --do and the
// gradient outputs. The forward's flags keep their meaning: the forward
// runs first (on the same device) for O and LSE, then the backward
// kernels, and the check compares dQ, dK, dV (and the score's aux
// gradients, and with --sinks the sinks' gradient) with float64 gradients.
type backwardFlags struct {
	on                  bool
	doF                 string
	dqOut, dkOut, dvOut string
	dsinksOut           string

	do *npy.Array // --do, read with the other tensor files
}

func (b *backwardFlags) add(fs *pflag.FlagSet) {
	fs.BoolVar(&b.on, "backward", false, "run the backward pass too (dQ, dK, dV for dL/dO = --do) and check the gradients against float64 ones")
	fs.StringVar(&b.doF, "do", "", "with --backward: dL/dO .npy [B, H, Sq, Dv], shaped like O (random if absent)")
	fs.StringVar(&b.dqOut, "dq-out", "", "with --backward: write dQ [B, H, Sq, D] to this .npy file (- = stdout)")
	fs.StringVar(&b.dkOut, "dk-out", "", "with --backward: write dK [B, Hkv, Sk, D] to this .npy file (- = stdout)")
	fs.StringVar(&b.dvOut, "dv-out", "", "with --backward: write dV [B, Hkv, Sk, Dv] to this .npy file (- = stdout)")
	fs.StringVar(&b.dsinksOut, "dsinks-out", "", "with --backward --sinks: write the sinks' gradient [H] to this .npy file (- = stdout)")
}

// check refuses the backward's flags without --backward, and the
// forward's outputs with it (the run checks the gradients, not O).
func (b *backwardFlags) check(outF, lseF string) error {
	if !b.on {
		for _, f := range []struct{ flag, v string }{{"--do", b.doF}, {"--dq-out", b.dqOut}, {"--dk-out", b.dkOut}, {"--dv-out", b.dvOut}, {"--dsinks-out", b.dsinksOut}} {
			if f.v != "" {
				return fmt.Errorf("%s needs --backward", f.flag)
			}
		}
		return nil
	}
	if outF != "" || lseF != "" {
		return fmt.Errorf("--out and --lse-out write the forward's O and LSE, which --backward does not check; write the gradients with --dq-out, --dk-out, --dv-out")
	}
	return nil // the outputs are checked with the forward's (checkOutputs)
}

// noteTensors reads --do, whose shape is O's, and notes its sizes.
func (b *backwardFlags) noteTensors(shp *shapeFlags) error {
	if !b.on || b.doF == "" {
		return nil
	}
	a, err := shp.noteTensor("do", b.doF, roleO)
	b.do = a
	return err
}

// splitConsts gives the forward the compile-time arguments flash_fwd
// declares and the backward those its kernels declare (DETERMINISTIC,
// AUX_GRAD, num_warps are the backward's only); one neither declares is an
// error. Without --backward every one goes to the forward.
func (b *backwardFlags) splitConsts(sources map[string]string, consts map[string]string) (fwd, bwd map[string]string, err error) {
	if !b.on {
		return consts, nil, nil
	}
	return splitConsts(sources, consts)
}

// splitConsts splits compile-time arguments between flash_fwd and the
// backward kernels by what each declares (BLOCK_M, SPARSE_Q go to both).
func splitConsts(sources map[string]string, consts map[string]string) (fwd, bwd map[string]string, err error) {
	prog, err := compiler.Load(sources)
	if err != nil {
		return nil, nil, err
	}
	declares := func(kernel, name string) bool {
		cps, _ := prog.KernelParams(kernel)
		for _, cp := range cps {
			if cp.Name == name {
				return true
			}
		}
		return false
	}
	backward := []string{"flash_bwd_preprocess", "flash_bwd", "flash_bwd_postprocess", "flash_bwd_dq", "flash_bwd_sinks"}
	fwd, bwd = map[string]string{}, map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(consts)) {
		inFwd := declares("flash_fwd", name)
		inBwd := slices.ContainsFunc(backward, func(k string) bool { return declares(k, name) })
		if inFwd {
			fwd[name] = consts[name]
		}
		if inBwd {
			bwd[name] = consts[name]
		}
		if !inFwd && !inBwd {
			return nil, nil, fmt.Errorf("--const %s=%s: neither flash_fwd nor the backward kernels have a compile-time parameter %s", name, consts[name], name)
		}
	}
	return fwd, bwd, nil
}

// backwardRun is what fac run hands the backward pass once the forward
// has run.
type backwardRun struct {
	w          io.Writer
	opts       fac.Options // the backward's (its own consts)
	in         fac.Inputs
	o, lse     []float32
	sh         fac.Shape
	dtype      string
	device     string
	gpu        *fac.CUDA // device cuda: the GPU the forward ran on
	rng        *rand.Rand
	tol        tolerance
	noCheck    bool
	fwdCompile time.Duration
	fwdRun     time.Duration
	stderr     io.Writer // progress lines
	terminal   bool
}

// run compiles and runs the backward pass, checks the gradients, and only
// then writes them.
func (b *backwardFlags) run(r backwardRun) error {
	sh, w := r.sh, r.w
	if r.in.Sinks == nil && b.dsinksOut != "" {
		return fmt.Errorf("--dsinks-out needs --sinks")
	}
	r.opts.Sinks = r.in.Sinks != nil // the backward of flash_fwd_sinks
	t0 := time.Now()
	bwd, err := fac.CompileBackward(r.opts, sh.Dim)
	if err != nil {
		return err
	}
	compileTime := time.Since(t0)
	do := tensorArg(b.do, sh.Batch*sh.Heads*sh.SeqQ*sh.VDim(), r.rng)
	bin := fac.BackwardInputs{Q: r.in.Q, K: r.in.K, V: r.in.V, O: r.o, LSE: r.lse, DO: do,
		Aux: r.in.Aux, Scalars: r.in.Scalars, Scale: r.in.Scale, BlockMask: r.in.BlockMask, Sinks: r.in.Sinks}
	var names []string
	for _, k := range bwd.Kernels() {
		names = append(names, k.Kernel)
	}
	fmt.Fprintf(w, "backward: %s\n", strings.Join(names, ", "))
	src := "random"
	if b.doF != "" {
		src = b.doF
	}
	fmt.Fprintf(w, "dO: %s\n", src)
	var g *fac.Grads
	t1 := time.Now()
	if r.device == "cuda" {
		if g, err = bwd.RunCUDAGrads(context.Background(), r.gpu, bin, sh); err != nil {
			return err
		}
	} else if err := withProgress(r.stderr, r.terminal, "running the backward pass on the CPU interpreter", "", func() (err error) {
		g, err = bwd.RunCPUGrads(context.Background(), bin, sh)
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(w, "forward: compile %.1f ms, run %.1f ms; backward: compile %.1f ms, run %.1f ms\n",
		ms(r.fwdCompile), ms(r.fwdRun), ms(compileTime), ms(time.Since(t1)))
	if r.noCheck {
		fmt.Fprintln(w, "check skipped (--no-check): no float64 reference computed, the gradients are unchecked")
	} else {
		var ref reference.Grads
		what := fmt.Sprintf("float64 reference gradients, %d×%d pairs per head", sh.SeqQ, sh.SeqK)
		if err := withProgress(r.stderr, r.terminal, what, " (--no-check skips it)", func() (err error) {
			ref, err = bwd.Reference(bin, sh)
			return err
		}); err != nil {
			return err
		}
		reps := compareGrads(g, ref)
		for _, rep := range reps {
			fmt.Fprintf(w, "%-8s max |err| = %.3g, max |ref| = %.3g, relative error %.3g; NaN: %d (reference: %d)\n",
				rep.name, rep.maxAbs, rep.maxRef, rep.rel, rep.nans, rep.refNaNs)
		}
		if err := gradVerdict(reps, r.tol, r.dtype); err != nil {
			return err // and write no output: a result that fails its check is no result
		}
		fmt.Fprintf(w, "check passed (tolerance for %s: %.3g relative to each gradient's max |ref|; aux gradients %.3g)\n",
			r.dtype, r.tol.o, auxTol(r.tol))
	}
	for _, o := range []struct {
		path  string
		shape []int
		xs    []float32
	}{{b.dqOut, []int{sh.Batch, sh.Heads, sh.SeqQ, sh.Dim}, g.DQ},
		{b.dkOut, []int{sh.Batch, sh.KV(), sh.SeqK, sh.Dim}, g.DK},
		{b.dvOut, []int{sh.Batch, sh.KV(), sh.SeqK, sh.VDim()}, g.DV},
		{b.dsinksOut, []int{sh.Heads}, g.DSinks}} {
		if o.path == "" {
			continue
		}
		if err := writeNpy(o.path, o.shape, o.xs); err != nil {
			return err
		}
	}
	return nil
}

// gradReport is one gradient's comparison with the reference.
type gradReport struct {
	name                string
	maxAbs, maxRef, rel float64
	nans, refNaNs       int
	aux                 bool
}

// compareGrads measures dQ, dK, dV, dsinks and the aux gradients against the
// reference, each relative to its own largest |ref|. A gradient whose
// reference is exactly zero (every row keeps one key: P = 1 makes dS = 0)
// is measured against dV's scale instead, which never cancels.
func compareGrads(g *fac.Grads, ref reference.Grads) []gradReport {
	one := func(name string, got []float32, want []float64) gradReport {
		r := gradReport{name: name}
		for i, x := range got {
			if math.IsNaN(want[i]) {
				r.refNaNs++
			}
			if math.IsNaN(float64(x)) {
				r.nans++
				continue
			}
			r.maxAbs = math.Max(r.maxAbs, math.Abs(float64(x)-want[i]))
			r.maxRef = math.Max(r.maxRef, math.Abs(want[i]))
		}
		return r
	}
	reps := []gradReport{one("dQ", g.DQ, ref.DQ), one("dK", g.DK, ref.DK), one("dV", g.DV, ref.DV)}
	if g.DSinks != nil {
		reps = append(reps, one("dsinks", g.DSinks, ref.DSinks))
	}
	for _, a := range slices.Sorted(maps.Keys(g.DAux)) {
		r := one("d"+a, g.DAux[a], ref.DAux[a])
		r.aux = true
		reps = append(reps, r)
	}
	for i := range reps {
		r := &reps[i]
		if r.maxRef == 0 && i < 2 {
			r.maxRef = reps[2].maxRef
		}
		if r.maxRef > 0 {
			r.rel = r.maxAbs / r.maxRef
		} else {
			r.rel = r.maxAbs
		}
	}
	return reps
}

// auxTol is the bound on aux gradients: they sum terms that cancel (ALiBi's
// slope gradient Σ dS·(j − i) with Σ_j dS = 0 per row), which f32 atomics
// keep to about 1e-4, so at least 1e-3 (as tests/backward_test.go).
func auxTol(t tolerance) float64 { return math.Max(t.o, 1e-3) }

// gradVerdict is nil when every gradient is within tolerance, else the
// error fac run exits with. NaN anywhere fails.
func gradVerdict(reps []gradReport, t tolerance, dtype string) error {
	var why []string
	for _, r := range reps {
		bound := t.o
		if r.aux {
			bound = auxTol(t)
		}
		if r.nans > 0 || r.refNaNs > 0 {
			why = append(why, fmt.Sprintf("NaN in %s (%d) or its reference (%d)", r.name, r.nans, r.refNaNs))
		}
		if !(r.rel <= bound) {
			why = append(why, fmt.Sprintf("%s's relative error %.3g > %.3g", r.name, r.rel, bound))
		}
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("check FAILED against float64 gradients (tolerance for %s: %.3g relative to each gradient's max |ref|): %s",
		dtype, t.o, strings.Join(why, "; "))
}

// benchBackwardOne times the backward pass of one anchor configuration:
// the forward runs once on the GPU for O and LSE, then the backward's
// kernels are timed as one sequence. TFLOPS count the kept pairs' five
// matmuls (S = QKᵀ, dP = dO·Vᵀ, dV, dK, dQ): 10 · pairs · D / t
// (matmulFlops).
func benchBackwardOne(gpu *fac.CUDA, opts fac.Options, s, b, h, d int, docLen, warmup, reps int) (benchResult, error) {
	fwdConsts, bwdConsts, err := splitConsts(opts.Sources, opts.Consts)
	if err != nil {
		return benchResult{}, err
	}
	fopts := opts
	fopts.Consts = fwdConsts
	fwd, err := fac.CompileForward(fopts, d)
	if err != nil {
		return benchResult{}, err
	}
	opts.Consts = bwdConsts
	bwd, err := fac.CompileBackward(opts, d)
	if err != nil {
		return benchResult{}, err
	}
	sh := fac.Shape{Batch: b, Heads: h, KVHeads: h, SeqQ: s, SeqK: s, Dim: d, DimV: opts.DimV}
	in, randn, err := benchInputs(fwd, opts.Mask, sh, docLen)
	if err != nil {
		return benchResult{}, err
	}
	o, lse, err := fwd.RunCUDA(gpu, in, sh)
	if err != nil {
		return benchResult{}, err
	}
	bin := fac.BackwardInputs{Q: in.Q, K: in.K, V: in.V, O: o, LSE: lse, DO: randn(len(o)), Aux: in.Aux}
	times, err := bwd.BenchCUDA(gpu, bin, sh, warmup, reps)
	if err != nil {
		return benchResult{}, err
	}
	pairs, err := keptPairs(fwd, s, in.Aux)
	if err != nil {
		return benchResult{}, err
	}
	sorted := slices.Clone(times)
	slices.Sort(sorted)
	med := sorted[len(sorted)/2]
	tf := matmulFlops("backward", sh) * float64(pairs) * float64(b*h) / (med * 1e-3) / 1e12
	return benchResult{Pass: "backward", Mask: opts.Mask, SeqLen: s, Batch: b, Heads: h, Dim: d, DimV: sh.DimV, DType: opts.DType, Pairs: pairs,
		MedianMs: med, TFLOPS: tf, TimesMs: times}, nil
}
