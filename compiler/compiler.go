// Package compiler is fac's one compile driver: sources and compile-time
// arguments in; parse → lower → tile passes give verified tile IR of one
// kernel instance (what the CPU device runs), and codegen's GPU phases →
// LLVM IR → llc give an artifact.Artifact for a GPU target (what the cache,
// bundles and the GPU runtime store and load). Every stage is timed.
package compiler

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/internal/version"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/parser"
	"github.com/fac-compiler/fac/passes"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// Request names a kernel instance. Mask, Score and Consts values are written
// as in the language: "sliding_window(256, 0)", "bf16", "64".
type Request struct {
	Sources map[string]string // user files, name → text; the stdlib is always loaded
	Kernel  string            // the kernel to compile (required)
	Mask    string            // mask mod; default: the kernel's default
	Score   string            // score mod; default: the kernel's default
	Consts  map[string]string // other compile-time arguments by name
	// Target is the GPU target the instance is for. Its switches (wgmma,
	// tma, ...) shape the code of every GPU build of the instance. Its
	// Arch, when set, is the GPU: a stdlib kernel then takes the
	// compile-time arguments its contract tunes for the target's code
	// generation variant (e.g. 128×128 tiles on 8 warps for sm_90a's
	// wgmma), unless Consts sets any of them. "" keeps the kernel's
	// defaults (the CPU device, and builds for one arch).
	Target codegen.TargetConfig
	Passes passes.Options
	GPU    GPUOptions // for GPU builds
}

// Result is a compiled kernel instance.
type Result struct {
	Kernel  string
	Program *lang.Program
	Module  *tir.Module // after the pass pipeline
	Mask    *lang.ModInst
	Score   *lang.ModInst
	Args    map[string]lang.Const // every compile-time argument given
	// Ident is the instance's identity with Arch, Fac and LLC still unset:
	// a GPU build completes it.
	Ident artifact.Ident
	// Sources are the files it was compiled from (stdlib included), for
	// codegen's error messages and the identity's digest.
	Sources map[string]string
	Passes  passes.Options
	GPU     GPUOptions
	// Target is the request's target: its switches shape the code of the
	// GPU builds (TargetFor).
	Target codegen.TargetConfig
	// Tuned are the arguments the contract's tuned set added for the
	// request's target (launch.Contract.TunedFor), as text.
	Tuned map[string]string
}

// TargetFor is the target a GPU build of r for arch uses: the request's
// switches on arch.
func (r *Result) TargetFor(arch string) codegen.TargetConfig {
	t := r.Target
	t.Arch = arch
	return t
}

// Func is the compiled kernel's function in Module.
func (r *Result) Func() *tir.Func { return r.Module.Func(r.Kernel) }

// Attrs are the kernel's integer attributes: its int and bool compile-time
// arguments (BLOCK_M, ...) and num_warps.
func (r *Result) Attrs() map[string]int64 { return intAttrs(r.Func()) }

func intAttrs(f *tir.Func) map[string]int64 {
	out := map[string]int64{}
	for _, a := range f.Attrs {
		switch v := a.Val.(type) {
		case int64:
			out[a.Key] = v
		case bool:
			out[a.Key] = 0
			if v {
				out[a.Key] = 1
			}
		}
	}
	return out
}

// Params are the kernel's parameters in launch order, as a launch binds them.
func (r *Result) Params() []artifact.Param { return ParamsOf(r.Func()) }

// ParamsOf describes a kernel's parameters the way artifacts do.
func ParamsOf(f *tir.Func) []artifact.Param {
	out := make([]artifact.Param, len(f.Params))
	for i, p := range f.Params {
		kind := artifact.KindF32
		switch {
		case p.Type.Ptr:
			kind = artifact.KindPtr
		case p.Type.Elem == tir.I32 || p.Type.Elem == tir.I1:
			kind = artifact.KindI32
		case p.Type.Elem == tir.I64:
			kind = artifact.KindI64
		}
		out[i] = artifact.Param{Name: p.Name, Kind: kind, Elem: p.Type.Elem.String()}
	}
	return out
}

// Load parses the stdlib and the user sources.
func Load(sources map[string]string) (*lang.Program, error) { return attention.Load(sources) }

// Compile runs the front end and the tile passes for one kernel instance.
func Compile(req Request) (*Result, error) { return CompileTimed(req, nil) }

// CompileTimed is Compile recording each stage's time in t (which may be nil).
func CompileTimed(req Request, t *Timings) (*Result, error) {
	if t == nil {
		t = &Timings{}
	}
	start := time.Now()
	prog, err := Load(req.Sources)
	if err != nil {
		return nil, err
	}
	start = t.add("parse", start)
	res, err := lower(prog, req)
	if err != nil {
		return nil, err
	}
	if err := checkArgs(res); err != nil {
		return nil, err
	}
	start = t.add("lower", start)
	if err := passes.Run(res.Module, req.Passes); err != nil {
		return nil, err
	}
	t.add("tile passes", start)
	return res, nil
}

func lower(prog *lang.Program, req Request) (*Result, error) {
	if req.Kernel == "" {
		return nil, fmt.Errorf("no kernel named (kernels: %s)", strings.Join(prog.Kernels(), ", "))
	}
	cps, ok := prog.KernelParams(req.Kernel)
	if !ok {
		return nil, fmt.Errorf("no kernel named %q (kernels: %s)", req.Kernel, strings.Join(prog.Kernels(), ", "))
	}
	res := &Result{Kernel: req.Kernel, Program: prog, Args: map[string]lang.Const{}, Passes: req.Passes, GPU: req.GPU, Target: req.Target}
	kinds := map[string]string{}
	for _, cp := range cps {
		kinds[cp.Name] = cp.Kind
	}
	given := map[string]string{}
	for k, v := range req.Consts {
		given[k] = v
	}
	res.Tuned = tunedArgs(prog, req, cps)
	maps.Copy(given, res.Tuned)
	for _, role := range []string{"mask", "score"} {
		src := req.Mask
		if role == "score" {
			src = req.Score
		}
		if src == "" {
			continue
		}
		name := ""
		for _, cp := range cps {
			if cp.Kind == role {
				name = cp.Name
			}
		}
		if name == "" {
			return nil, fmt.Errorf("kernel %s takes no %s mod", req.Kernel, role)
		}
		given[name] = src
	}
	names := make([]string, 0, len(given))
	for k := range given {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		kind, ok := kinds[name]
		if !ok {
			return nil, fmt.Errorf("kernel %s has no compile-time parameter %s", req.Kernel, name)
		}
		e, err := parser.ParseExpr("<"+name+">", given[name])
		if err != nil {
			return nil, fmt.Errorf("bad value for %s: %w", name, err)
		}
		var c lang.Const
		if kind == "mask" || kind == "score" {
			mi, err := prog.ResolveMod(e, kind)
			if err != nil {
				return nil, err
			}
			c = lang.Const{Kind: lang.CMod, Mod: mi}
		} else if c, err = prog.EvalConst(e); err != nil {
			return nil, err
		}
		res.Args[name] = c
	}
	if err := checkGiven(req.Kernel, res.Args); err != nil {
		return nil, err
	}
	m, err := prog.Lower(lang.Instance{Kernel: req.Kernel, Args: res.Args})
	if err != nil {
		return nil, err
	}
	res.Module = m
	res.Mask, res.Score = modArg(prog, req.Kernel, res.Args, "mask"), modArg(prog, req.Kernel, res.Args, "score")
	if err := tir.Verify(m); err != nil {
		return nil, fmt.Errorf("internal compiler error: lowering of kernel %s: %w", req.Kernel, err)
	}
	res.Sources = sourcesOf(req.Sources)
	res.Ident = identOf(prog, req, res)
	return res, nil
}

// tunedArgs are the compile-time arguments the kernel's contract tunes
// for req's target that req leaves whole (nil: none); cps are the
// kernel's compile-time parameters.
func tunedArgs(prog *lang.Program, req Request, cps []*lang.CParam) map[string]string {
	c, ok := attention.Contract(req.Kernel)
	if !ok || req.Target.Arch == "" {
		return nil
	}
	return tunedFor(c, req, cps, modInfos(prog, req, cps))
}

// modInfos are what tuned sets see of the kernel's mods (cps) in req, by
// role: the stdlib mod each names (stdlibModName).
func modInfos(prog *lang.Program, req Request, cps []*lang.CParam) map[string]launch.ModInfo {
	mods := map[string]launch.ModInfo{}
	for _, cp := range cps {
		if cp.Kind == "mask" || cp.Kind == "score" {
			mods[cp.Kind] = launch.ModInfo{Kind: launch.ModKind(stdlibModName(prog, req, cp.Kind))}
		}
	}
	return mods
}

// tunedFor is tunedArgs for contract c, req's mods being mods.
func tunedFor(c *launch.Contract, req Request, cps []*lang.CParam, mods map[string]launch.ModInfo) map[string]string {
	declared := map[string]bool{}
	for _, cp := range cps {
		declared[cp.Name] = true
	}
	r := launch.TuneRequest{
		// Staging choices (wgmma-cpasync) share wgmma's tuned tiles unless
		// the contract tunes them apart: the variant's own sets, then
		// those of each one it extends (wgmma-cpasync-ctas2,
		// wgmma-cpasync, wgmma).
		Variants: req.Target.TuneVariants(),
		DType:    dtypeArg(req.Consts["DTYPE"]),
		HeadDim:  intArg(req.Consts["HEAD_DIM"]),
		HeadDimV: headDimV(req.Consts),
		Mods:     mods,
		Args:     req.Consts,
		Declared: func(name string) bool { return declared[name] },
	}
	var out map[string]string
	for k, v := range c.TunedFor(r) {
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// dtypeArg is the element type a DTYPE argument names as the language
// prints it ("bf16"); tir.Invalid for any other text.
func dtypeArg(s string) tir.Elem {
	e, _ := tir.ElemByName(s)
	return e
}

// headDimV is the HEAD_DIM_V argument of consts for the tuned sets: 0
// when not given, -1 when given as other text than an integer (no set is
// then for it, as for a HEAD_DIM_V other than HEAD_DIM).
func headDimV(consts map[string]string) int {
	v, ok := consts["HEAD_DIM_V"]
	if !ok {
		return 0
	}
	if n := intArg(strings.TrimSpace(v)); n > 0 {
		return n
	}
	return -1
}

// intArg is the integer an argument gives in its canonical form ("128");
// 0 for any other text ("", "0128").
func intArg(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || strconv.Itoa(n) != s {
		return 0
	}
	return n
}

// stdlibModName is the name of the request's mod of the given role ("mask"
// or "score"; the kernel's default when the request gives none) when it is
// a stdlib mod ("prefix_lm" for "prefix_lm(1024)"), for the tuned sets'
// conditions; "" for a user's own mod or one that does not resolve (the
// arguments' loop reports that).
func stdlibModName(prog *lang.Program, req Request, role string) string {
	src := req.Mask
	if role == "score" {
		src = req.Score
	}
	var m *lang.ModInst
	if src == "" {
		m = modArg(prog, req.Kernel, nil, role)
	} else if e, err := parser.ParseExpr("<"+role+">", src); err == nil {
		m, _ = prog.ResolveMod(e, role)
	}
	if m == nil || !strings.HasPrefix(m.Decl.Pos.Filename, "stdlib/") {
		return ""
	}
	return m.Name()
}

// sourcesOf is every file an instance is compiled from: the stdlib, with
// user files of the same name replacing it (as attention.Load does).
func sourcesOf(user map[string]string) map[string]string {
	all := attention.Files()
	maps.Copy(all, user)
	return all
}

// identOf is the canonical identity of an instance: every compile-time
// parameter of the kernel with its resolved value, defaults included.
func identOf(prog *lang.Program, req Request, res *Result) artifact.Ident {
	// The sources enter as the instance's lowered tile IR: it changes with
	// anything the kernel or its mods mean, and not with an unrelated file
	// (a new stdlib kernel must not invalidate every AOT bundle).
	id := artifact.Ident{Kernel: req.Kernel, Mods: map[string]string{}, Consts: map[string]string{},
		Sources: artifact.SourcesDigest(map[string]string{"tir": res.Module.String()}), Fac: version.Build()}
	cps, _ := prog.KernelParams(req.Kernel)
	for _, cp := range cps {
		c, ok := res.Args[cp.Name]
		if !ok && cp.Default != nil {
			var err error
			c, err = prog.EvalConst(&lang.Expr{Pos: cp.Default.Pos, Left: &lang.AndExpr{Left: &lang.CmpExpr{Left: cp.Default}}})
			ok = err == nil
		}
		if !ok {
			// A default written from other parameters (HEAD_DIM_V =
			// HEAD_DIM) has no value alone: the lowered kernel holds the
			// value it took, as it holds every integer and bool argument.
			if f := res.Module.Func(req.Kernel); f != nil {
				switch v := f.Attr(cp.Name).(type) {
				case int64:
					c, ok = lang.Const{Kind: lang.CInt, I: v}, cp.Kind == "i32" || cp.Kind == "int"
				case bool:
					c, ok = lang.Const{Kind: lang.CBool, B: v}, cp.Kind == "bool"
				}
			}
		}
		if !ok {
			continue
		}
		switch {
		case c.Kind == lang.CMod:
			id.Mods[cp.Name] = c.Mod.String()
		case cp.Name == "DTYPE":
			id.DType = c.String()
		default:
			id.Consts[cp.Name] = c.String()
		}
	}
	var off []string
	for _, set := range []map[string]bool{req.Passes.Disable, req.GPU.Disable} {
		for _, k := range slices.Sorted(maps.Keys(set)) {
			if set[k] {
				off = append(off, k)
			}
		}
	}
	if len(off) > 0 {
		id.Passes = "disable=" + strings.Join(off, ",")
	}
	return id
}

// modArg finds the mod bound to the kernel's parameter of the given role,
// falling back to the parameter's default.
func modArg(prog *lang.Program, kernel string, args map[string]lang.Const, role string) *lang.ModInst {
	cps, _ := prog.KernelParams(kernel)
	for _, cp := range cps {
		if cp.Kind != role {
			continue
		}
		if c, ok := args[cp.Name]; ok {
			return c.Mod
		}
		if cp.Default != nil {
			if c, err := prog.EvalConst(&lang.Expr{Pos: cp.Default.Pos, Left: &lang.AndExpr{Left: &lang.CmpExpr{Left: cp.Default}}}); err == nil && c.Kind == lang.CMod {
				return c.Mod
			}
		}
	}
	return nil
}
