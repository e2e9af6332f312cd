package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/passes"
	"github.com/fac-compiler/fac/artifact/bundle"
)

// readSources reads user source files into a name → text map.
func readSources(files []string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out[f] = string(b)
	}
	return out, nil
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
	fs.StringSliceVarP(&c.files, "file", "f", nil, "user source files with mods or kernels (repeatable)")
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

func (c *compileFlags) passOptions() (passes.Options, error) {
	o := passes.Options{PrintAfter: c.printAfter, Out: os.Stderr, VerifyEach: c.verifyEach, Disable: map[string]bool{}}
	for _, d := range c.disable {
		if _, ok := passes.Lookup(d); !ok {
			return o, fmt.Errorf("--disable-pass: unknown pass %q (passes: %s)", d, strings.Join(passes.Names(), ", "))
		}
		o.Disable[d] = true
	}
	if c.printAfter != "" && c.printAfter != "all" {
		if _, ok := passes.Lookup(c.printAfter); !ok {
			return o, fmt.Errorf("--print-ir-after: unknown pass %q (passes: %s, or all)", c.printAfter, strings.Join(passes.Names(), ", "))
		}
	}
	return o, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// request reads the user's files and flags into a compile request.
func (c *compileFlags) request(files []string) (compiler.Request, error) {
	srcs, err := readSources(append(files, c.files...))
	if err != nil {
		return compiler.Request{}, err
	}
	consts, err := c.constMap()
	if err != nil {
		return compiler.Request{}, err
	}
	po, err := c.passOptions()
	if err != nil {
		return compiler.Request{}, err
	}
	return compiler.Request{Sources: srcs, Kernel: c.kernel, Mask: c.mask, Score: c.score, Consts: consts, Passes: po}, nil
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
