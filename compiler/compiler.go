// Package compiler drives the front end and the pass pipeline: sources and
// compile-time arguments in, verified and optimized tile IR of one kernel
// instance out.
package compiler

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/parser"
	"github.com/fac-compiler/fac/passes"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// Request names a kernel instance. Mask, Score and Consts values are written
// as in the language: "sliding_window(256, 0)", "bf16", "64".
type Request struct {
	Sources map[string]string // user files, name → text; the stdlib is always loaded
	Kernel  string            // default "flash_fwd"
	Mask    string            // mask mod; default: the kernel's default
	Score   string            // score mod; default: the kernel's default
	Consts  map[string]string // other compile-time arguments by name
	Passes  passes.Options
}

// Result is a compiled kernel instance.
type Result struct {
	Program *lang.Program
	Module  *tir.Module // after the pass pipeline
	Mask    *lang.ModInst
	Score   *lang.ModInst
	Args    map[string]lang.Const // every compile-time argument given
}

// Load parses the stdlib and the user sources.
func Load(sources map[string]string) (*lang.Program, error) { return attention.Load(sources) }

// Compile loads, lowers and optimizes one kernel instance.
func Compile(req Request) (*Result, error) {
	prog, err := Load(req.Sources)
	if err != nil {
		return nil, err
	}
	return CompileProgram(prog, req)
}

// CompileProgram is Compile with an already loaded program.
func CompileProgram(prog *lang.Program, req Request) (*Result, error) {
	m, res, err := Lower(prog, req)
	if err != nil {
		return nil, err
	}
	if err := runPasses(m, req); err != nil {
		return nil, err
	}
	res.Module = m
	return res, nil
}

func runPasses(m *tir.Module, req Request) error { return passes.Run(m, req.Passes) }

// Lower resolves the request's arguments and lowers the kernel without
// running any pass.
func Lower(prog *lang.Program, req Request) (*tir.Module, *Result, error) {
	if req.Kernel == "" {
		req.Kernel = "flash_fwd"
	}
	cps, ok := prog.KernelParams(req.Kernel)
	if !ok {
		return nil, nil, fmt.Errorf("no kernel named %q (kernels: %s)", req.Kernel, strings.Join(prog.Kernels(), ", "))
	}
	res := &Result{Program: prog, Args: map[string]lang.Const{}}
	kinds := map[string]string{}
	for _, cp := range cps {
		kinds[cp.Name] = cp.Kind
	}
	given := map[string]string{}
	for k, v := range req.Consts {
		given[k] = v
	}
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
			return nil, nil, fmt.Errorf("kernel %s takes no %s mod", req.Kernel, role)
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
			return nil, nil, fmt.Errorf("kernel %s has no compile-time parameter %s", req.Kernel, name)
		}
		e, err := parser.ParseExpr("<"+name+">", given[name])
		if err != nil {
			return nil, nil, fmt.Errorf("bad value for %s: %w", name, err)
		}
		var c lang.Const
		if kind == "mask" || kind == "score" {
			mi, err := prog.ResolveMod(e, kind)
			if err != nil {
				return nil, nil, err
			}
			c = lang.Const{Kind: lang.CMod, Mod: mi}
		} else if c, err = prog.EvalConst(e); err != nil {
			return nil, nil, err
		}
		res.Args[name] = c
	}
	m, err := prog.Lower(lang.Instance{Kernel: req.Kernel, Args: res.Args})
	if err != nil {
		return nil, nil, err
	}
	res.Mask, res.Score = modArg(prog, req.Kernel, res.Args, "mask"), modArg(prog, req.Kernel, res.Args, "score")
	if err := tir.Verify(m); err != nil {
		return nil, nil, fmt.Errorf("internal compiler error: lowering of kernel %s: %w", req.Kernel, err)
	}
	return m, res, nil
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
