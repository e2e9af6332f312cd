package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/internal/outfile"
	"github.com/fac-compiler/fac/tir"
)

func compileCmd() *cobra.Command {
	var cf compileFlags
	var tf targetFlags
	var arch, emit, out, cacheDir, dtype string
	var dim, dimV int
	var verbose, noCache bool
	cmd := &cobra.Command{
		Use:   "compile [FILE...]",
		Short: "compile a kernel to tile IR, LLVM IR or PTX",
		Long: "Compiles a kernel for --arch to tile IR (after the tile passes), LLVM IR or PTX (through llc and the kernel cache).\n" +
			"--dtype and --dim set the kernel's DTYPE and HEAD_DIM (--const DTYPE=, HEAD_DIM= are the same settings), bf16 and 128 unless\n" +
			"given, as fac build: what it compiles is what a bundle holds, with the arch's tuned arguments (-v prints them); --dim-v sets\n" +
			"HEAD_DIM_V, the head dim of v and o, where it differs (the arch's tuned arguments are then not applied: they were measured\n" +
			"with equal head dims). A GPU\n" +
			"compile whose code has no tensor-core instruction (f32) warns; an arch that runs another's code path (sm_89, sm_100a)\n" +
			"warns, and one fac has no target for is an error.\n\n" + targetHelp(),
		Example: `  fac compile --mask causal --dtype bf16 --dim 64 --arch sm_90a --emit ptx -o fwd.ptx -v   # -v: stage times, tuned arguments
  fac compile mymask.fa --mask my_mask --emit llvm
  fac compile --mask causal --const DTYPE=bf16 --target-opt tma=off -v   # cp.async staging instead of TMA`,
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := checkOutputs(false, map[string]string{"--out": out}); err != nil {
				return err
			}
			if err := checkArch(cmd.ErrOrStderr(), "--arch", arch); err != nil {
				return err
			}
			req, err := cf.request(files, gpuArch(emit, arch))
			if err != nil {
				return err
			}
			if err := dtypeDimArgs(cmd, &req, dtype, dim, dimV, true); err != nil {
				return err
			}
			// Tile IR runs no GPU phase, but shows the kernel the same flags
			// build for --arch: its tuned tile arguments included.
			if req.Target, err = tf.withEnv(arch); err != nil {
				return err
			}
			var text string
			switch emit {
			case "tir":
				t0 := time.Now()
				res, err := compiler.Compile(req)
				if err != nil {
					return err
				}
				text = res.Module.String()
				if verbose {
					fmt.Fprintf(os.Stderr, "compile: tir in %.2fms\n", float64(time.Since(t0).Microseconds())/1000)
					printTuned(res)
				}
			case "llvm":
				res, err := compiler.Compile(req)
				if err != nil {
					return err
				}
				cg, err := codegen.Lower(res.Module, res.Kernel, codegen.Options{Target: res.TargetFor(arch), PrintAfter: req.GPU.PrintAfter, Out: req.GPU.Out, Disable: req.GPU.Disable})
				if err != nil {
					return err
				}
				text = cg.LL
				warnNoTensorCores(cmd.ErrOrStderr(), res, arch, text)
			case "ptx":
				lc, err := llcConfig()
				if err != nil {
					return err
				}
				tool, err := lc.Find()
				if err != nil {
					return err
				}
				var t compiler.Timings
				res, err := compiler.CompileTimed(req, &t)
				if err != nil {
					return err
				}
				var c *cache.Cache
				if !noCache {
					if c, err = openCache(cacheDir); err != nil {
						fmt.Fprintf(os.Stderr, "fac: warning: no kernel cache (%v); compiling without it\n", err)
						c = nil
					}
				}
				a, err := compiler.Cached(context.Background(), c, res, arch, tool, &t)
				if err != nil {
					return err
				}
				text = a.PTX
				warnNoTensorCores(cmd.ErrOrStderr(), res, arch, text)
				if t.Cache == cache.Corrupt {
					fmt.Fprintln(os.Stderr, "fac: cache entry was damaged or for another kernel; rebuilt it")
				}
				if verbose {
					fmt.Fprintf(os.Stderr, "compile: %s (llc %s, %s, cache %s)\n", t.String(), tool.Version, res.TargetFor(arch), t.Cache)
					printTuned(res)
					fmt.Fprintf(os.Stderr, "compile: %d threads, %d bytes of dynamic shared memory\n", a.Threads, a.SharedBytes)
					var tma []string
					for _, p := range a.Params {
						if p.TMA != nil {
							tma = append(tma, p.TMA.Tensor)
						}
					}
					if len(tma) > 0 {
						fmt.Fprintf(os.Stderr, "compile: TMA tensor maps of %s\n", strings.Join(tma, ", "))
					}
					for _, n := range t.Notes {
						fmt.Fprintf(os.Stderr, "compile: note: %s\n", n)
					}
				}
			default:
				return fmt.Errorf("--emit %q: want tir, llvm or ptx", emit)
			}
			if out == "" || out == "-" {
				_, err = fmt.Fprint(os.Stdout, text)
				return err
			}
			return outfile.Write(out, []byte(text))
		},
	}
	cf.add(cmd, true)
	fs := cmd.Flags()
	fs.StringVar(&arch, "arch", "sm_90a", "GPU target: sm_80, sm_90a (their own code paths), sm_86 to sm_89, sm_90, sm_100 and later (each on a fallback path, with a warning)")
	fs.StringVar(&dtype, "dtype", "bf16", "element type of q, k, v, o (the kernel's DTYPE): bf16, f16 or f32 (f32 has no tensor-core path)")
	fs.IntVar(&dim, "dim", 128, "head dimension (the kernel's HEAD_DIM)")
	fs.IntVar(&dimV, "dim-v", 0, "head dimension of v and o (the kernel's HEAD_DIM_V; 0: --dim)")
	tf.add(fs)
	fs.StringVar(&emit, "emit", "ptx", "output: tir, llvm or ptx")
	fs.StringVarP(&out, "out", "o", "", "output file (default or - = stdout)")
	fs.BoolVarP(&verbose, "verbose", "v", false, "print per-stage compile times to stderr")
	fs.StringVar(&cacheDir, "cache-dir", "", "kernel cache folder (default $FAC_CACHE_DIR or the user cache dir; - for none, as --no-cache)")
	fs.BoolVar(&noCache, "no-cache", false, "compile without the kernel cache")
	aliases(cmd, map[string]string{"output": "out"})
	return cmd
}

// gpuArch is the target whose GPU phases a compile runs: none for tile IR.
func gpuArch(emit, arch string) string {
	if emit == "tir" {
		return ""
	}
	return arch
}

// printTuned says which tuned arguments the compiler added for the arch
// (-v), so that a request that falls back to another set, or to none, is
// visible.
func printTuned(res *compiler.Result) {
	attrs := res.Attrs()
	for _, k := range []string{"HEAD_DIM", "HEAD_DIM_V"} {
		if d, ok := attrs[k]; ok && tir.PaddedDim(int(d)) != int(d) {
			fmt.Fprintf(os.Stderr, "compile: %s = %d is computed padded to %d (pass pad-dims), with %d's tuned sets\n", k, d, tir.PaddedDim(int(d)), tir.PaddedDim(int(d)))
		}
	}
	if len(res.Tuned) == 0 {
		fmt.Fprintln(os.Stderr, "compile: tuned arguments: none (no tuned set applies: the kernel's defaults and --const)")
		return
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(res.Tuned)) {
		kv = append(kv, k+"="+res.Tuned[k])
	}
	fmt.Fprintf(os.Stderr, "compile: tuned arguments: %s\n", strings.Join(kv, " "))
}

// warnNoTensorCores warns when a GPU compile of a kernel with matrix
// products (dot) gives code with no tensor-core instruction (mma.sync or
// wgmma): f32 dots run on the FMA pipes at a fraction of the GPU's speed,
// and nothing else would say so (issue 46 item 16). code is the LLVM IR or
// PTX.
func warnNoTensorCores(w io.Writer, res *compiler.Result, arch, code string) {
	f := res.Func()
	if f == nil || strings.Contains(code, "mma") {
		return
	}
	if !f.Body.Any(func(op *tir.Op) bool { return op.Kind == tir.OpDot }) {
		return
	}
	why := "its dots are not on 16-bit operands"
	if dt, ok := res.Args["DTYPE"]; !ok || dt.T == tir.F32 {
		why = "DTYPE is f32, which has no tensor-core path"
	}
	fmt.Fprintf(w, "fac: warning: kernel %s for %s uses no tensor cores (no mma or wgmma in its code): %s; --dtype bf16 or f16 runs its dots on them\n", res.Kernel, arch, why)
}
