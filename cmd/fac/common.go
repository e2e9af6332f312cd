package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/parser"
	"github.com/fac-compiler/fac/passes"
)

// readSources reads user source files into a name → text map. It reads
// through parser.ReadFile, which refuses files over the size limit without
// reading them whole (`fac check /dev/zero` ends at once).
//
// A file given twice (fac check a.fa a.fa, or a.fa and ./a.fa, or a link
// to it) is an error, as two files declaring the same names are: every
// name is declared once across a command's files. It is not merged
// quietly, because the second name is more often a slip for another file
// (a.fa meant b.fa), which the command would then silently never read.
func readSources(files []string) (map[string]string, error) {
	out := map[string]string{}
	var seen []string
	stats := map[string]os.FileInfo{}
	for _, f := range files {
		for _, prev := range seen {
			if sameFile(prev, f, stats) {
				what := prev + " is given twice"
				if prev != f {
					what = prev + " and " + f + " are the same file"
				}
				return nil, fmt.Errorf("%s: give each file once (its declarations would be declared twice)", what)
			}
		}
		seen = append(seen, f)
		src, err := parser.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out[f] = src
	}
	sourcesGiven = sourcesGiven || len(files) > 0
	return out, nil
}

// sourcesGiven records whether the command was given source files (-f or
// positional), for the hint on an unknown mod (see explain).
var sourcesGiven bool

// sameFile reports whether paths a and b name one file: the same path,
// the same path cleaned (./a.fa), or one file under two names (a link).
// stats caches os.Stat by path.
func sameFile(a, b string, stats map[string]os.FileInfo) bool {
	if a == b || filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	stat := func(p string) os.FileInfo {
		if fi, ok := stats[p]; ok {
			return fi
		}
		fi, err := os.Stat(p)
		if err != nil {
			fi = nil
		}
		stats[p] = fi
		return fi
	}
	fa, fb := stat(a), stat(b)
	return fa != nil && fb != nil && fa.Mode().IsRegular() && os.SameFile(fa, fb)
}

// explain adds what the CLI knows to a front-end error before it is
// printed: an unknown mod name when no source file was given is most
// likely a mod of the user's file, forgotten on the command line.
func explain(err error) error {
	var u *lang.UnknownModError
	if errors.As(err, &u) && !sourcesGiven && u.Err != nil {
		u.Err.Msg += fmt.Sprintf("; no source file was given: if %s is declared in your file, pass it: -f FILE --%s %s", u.Name, u.Kind, u.Name)
	}
	return err
}

// compileFlags are the flags shared by commands that compile a kernel.
type compileFlags struct {
	files      []string
	kernel     string
	mask       string
	score      string
	consts     []string
	printAfter string
	disable    []string
	verifyEach bool
}

func (c *compileFlags) add(cmd *cobra.Command, withKernel bool) {
	fs := cmd.Flags()
	if withKernel {
		fs.StringVar(&c.kernel, "kernel", "flash_fwd", "kernel to compile")
	}
	addFileFlag(fs, &c.files)
	fs.StringVar(&c.mask, "mask", "", `mask mod, e.g. causal or "sliding_window(256, 0)"`)
	fs.StringVar(&c.score, "score", "", `score mod, e.g. "softcap(30.0)"`)
	fs.StringArrayVar(&c.consts, "const", nil, "compile-time argument NAME=VALUE, e.g. BLOCK_M=32 (repeatable)")
	fs.StringVar(&c.printAfter, "print-ir-after", "", "print the IR after pass NAME, or after every pass (all), to stderr")
	fs.StringSliceVar(&c.disable, "disable-pass", nil, "skip pass NAME (repeatable)")
	fs.BoolVar(&c.verifyEach, "verify-each", false, "run the IR verifier after every pass")
}

func (c *compileFlags) constMap() (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range c.consts {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("--const %q: want NAME=VALUE", kv)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// takeConst removes --const NAME=VALUE from the flags and returns VALUE
// (the last one given), for arguments a flag of its own also sets.
func (c *compileFlags) takeConst(name string) (string, bool) {
	var keep []string
	v, found := "", false
	for _, kv := range c.consts {
		k, val, ok := strings.Cut(kv, "=")
		if ok && strings.TrimSpace(k) == name {
			v, found = strings.TrimSpace(val), true
			continue
		}
		keep = append(keep, kv)
	}
	c.consts = keep
	return v, found
}

// constAsFlag makes --const NAME=VALUE another spelling of --FLAG VALUE
// (DTYPE: --dtype, HEAD_DIM: --dim), so that the subcommands share one
// vocabulary (issue 46 items 12 and 16: run's --const DTYPE=i32 was
// overridden by --dtype without a word): given both ways, the two must
// agree; given as a const only, it sets the flag's value through set.
// current is the flag's value as text.
func constAsFlag(fs *pflag.FlagSet, name, v, flag, current string, set func(string) error) error {
	if fs.Changed(flag) && v != current {
		return fmt.Errorf("--const %s=%s contradicts --%s %s: they are one setting, give it once", name, v, flag, current)
	}
	if err := set(v); err != nil {
		return fmt.Errorf("--const %s=%s: %w", name, v, err)
	}
	return nil
}

// headDimConstAsFlag takes --const name (HEAD_DIM or HEAD_DIM_V), if
// given, as --flag (constAsFlag; current: the flag's value as text): a
// positive head dim, which set takes with how it was given ("--const
// name=value").
func headDimConstAsFlag(fs *pflag.FlagSet, cf *compileFlags, name, flag, current string, set func(n int, given string) error) error {
	v, ok := cf.takeConst(name)
	if !ok {
		return nil
	}
	return constAsFlag(fs, name, v, flag, current, func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("want a positive head dim")
		}
		return set(n, "--const "+name+"="+s)
	})
}

// passOptions splits --print-ir-after and --disable-pass between the tile
// pass table and, when arch is set (commands that build for a GPU), the
// arch's GPU phase table: a name is looked up in both, and an unknown
// name, or a required pass or phase, is an error.
func (c *compileFlags) passOptions(arch string) (passes.Options, compiler.GPUOptions, error) {
	o := passes.Options{Out: os.Stderr, VerifyEach: c.verifyEach, Disable: map[string]bool{}}
	g := compiler.GPUOptions{Out: os.Stderr, Disable: map[string]bool{}}
	var phases []codegen.Phase
	if arch != "" {
		var err error
		if phases, err = codegen.Phases(arch); err != nil {
			return o, g, err
		}
	}
	phase := func(name string) (codegen.Phase, bool) {
		for _, p := range phases {
			if p.Name == name {
				return p, true
			}
		}
		return codegen.Phase{}, false
	}
	valid := func() string {
		s := "tile passes: " + strings.Join(passes.Names(), ", ")
		if arch != "" {
			s += "; " + arch + " GPU phases: " + strings.Join(codegen.PhaseNames(arch), ", ")
		} else {
			s += " (GPU phases: fac compile --emit llvm|ptx)"
		}
		return s
	}
	for _, d := range c.disable {
		if p, ok := passes.Lookup(d); ok {
			if p.Required {
				return o, g, fmt.Errorf("--disable-pass %s: the pass is required (later stages need what it does)", d)
			}
			o.Disable[d] = true
		} else if p, ok := phase(d); ok {
			if p.Required {
				return o, g, fmt.Errorf("--disable-pass %s: the GPU phase is required", d)
			}
			g.Disable[d] = true
		} else {
			return o, g, fmt.Errorf("--disable-pass: unknown pass %q (%s)", d, valid())
		}
	}
	switch pa := c.printAfter; {
	case pa == "":
	case pa == "all":
		o.PrintAfter = "all"
		if arch != "" {
			g.PrintAfter = "all"
		}
	default:
		if _, ok := passes.Lookup(pa); ok {
			o.PrintAfter = pa
		} else if _, ok := phase(pa); ok {
			g.PrintAfter = pa
		} else {
			return o, g, fmt.Errorf("--print-ir-after: unknown pass %q (%s, or all)", pa, valid())
		}
	}
	return o, g, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// request reads the user's files and flags into a compile request; arch is
// the GPU target for commands that build for one, else "" (the request's
// Target has that arch and no switches: commands set them).
func (c *compileFlags) request(files []string, arch string) (compiler.Request, error) {
	srcs, err := readSources(append(files, c.files...))
	if err != nil {
		return compiler.Request{}, err
	}
	consts, err := c.constMap()
	if err != nil {
		return compiler.Request{}, err
	}
	po, gpu, err := c.passOptions(arch)
	if err != nil {
		return compiler.Request{}, err
	}
	return compiler.Request{Sources: srcs, Kernel: c.kernel, Mask: c.mask, Score: c.score, Consts: consts, Target: codegen.TargetConfig{Arch: arch}, Passes: po, GPU: gpu}, nil
}

// openGPU opens GPU 0 and adds the given AOT bundles to it.
func openGPU(bundles []string) (*fac.CUDA, error) {
	gpu, err := fac.OpenCUDA(0)
	if err != nil {
		return nil, err
	}
	for _, path := range bundles {
		b, err := bundle.Read(path)
		if err != nil {
			return nil, err
		}
		gpu.AddBundle(b)
	}
	return gpu, nil
}

// dtypeDimArgs sets the request's DTYPE, HEAD_DIM and HEAD_DIM_V from
// --dtype, --dim and --dim-v, for the commands that build a
// compiler.Request themselves (compile, ir), so that they take the flags
// run, build and bench take: --const DTYPE/HEAD_DIM/HEAD_DIM_V are the same
// settings (given both ways they must agree). With withDefaults the flags'
// defaults are given to a kernel that declares the parameter (compile: what
// it compiles is then what build builds, tuned sets included, since they
// are keyed by the request's DTYPE and HEAD_DIM); else only flags the user
// set are. --dim-v has no default of its own: unset or 0, the kernel's
// HEAD_DIM_V is its HEAD_DIM.
func dtypeDimArgs(cmd *cobra.Command, req *compiler.Request, dtype string, dim, dimV int, withDefaults bool) error {
	fs := cmd.Flags()
	declared := map[string]bool{}
	if prog, err := compiler.Load(req.Sources); err == nil {
		cps, _ := prog.KernelParams(req.Kernel)
		for _, cp := range cps {
			declared[cp.Name] = true
		}
	}
	for _, a := range []struct{ name, flag, v string }{{"DTYPE", "dtype", dtype}, {"HEAD_DIM", "dim", strconv.Itoa(dim)}, {"HEAD_DIM_V", "dim-v", strconv.Itoa(dimV)}} {
		if fs.Lookup(a.flag) == nil {
			continue
		}
		if v, ok := req.Consts[a.name]; ok {
			if fs.Changed(a.flag) && v != a.v {
				return fmt.Errorf("--const %s=%s contradicts --%s %s: they are one setting, give it once", a.name, v, a.flag, a.v)
			}
			continue
		}
		if a.flag == "dim-v" && dimV == 0 {
			continue // the kernel's default: HEAD_DIM
		}
		switch {
		case declared[a.name] && (withDefaults && a.flag != "dim-v" || fs.Changed(a.flag)):
			req.Consts[a.name] = a.v
		case !declared[a.name] && fs.Changed(a.flag):
			return fmt.Errorf("--%s %s: kernel %s has no compile-time parameter %s", a.flag, a.v, req.Kernel, a.name)
		}
	}
	return nil
}
