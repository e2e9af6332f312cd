package main

import (
	"context"
	"fmt"
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
)

func compileCmd() *cobra.Command {
	var cf compileFlags
	var tf targetFlags
	var arch, emit, out, cacheDir string
	var verbose, noCache bool
	cmd := &cobra.Command{
		Use:   "compile [FILE...]",
		Short: "compile a kernel to tile IR, LLVM IR or PTX",
		Long:  "Compiles a kernel for --arch to tile IR (after the tile passes), LLVM IR or PTX (through llc and the kernel cache).\n\n" + targetHelp(),
		Example: `  fac compile --mask causal --const DTYPE=bf16 --arch sm_90a --emit ptx -o fwd.ptx -v
  fac compile mymask.fa --mask my_mask --emit llvm
  fac compile --mask causal --const DTYPE=bf16 --target-opt tma=off -v   # cp.async staging instead of TMA`,
		RunE: func(cmd *cobra.Command, files []string) error {
			req, err := cf.request(files, gpuArch(emit, arch))
			if err != nil {
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
	fs.StringVar(&arch, "arch", "sm_90a", "GPU target: sm_80, sm_90, sm_90a")
	tf.add(fs)
	fs.StringVar(&emit, "emit", "ptx", "output: tir, llvm or ptx")
	fs.StringVarP(&out, "out", "o", "", "output file (default or - = stdout)")
	fs.BoolVarP(&verbose, "verbose", "v", false, "print per-stage compile times to stderr")
	fs.StringVar(&cacheDir, "cache-dir", "", "kernel cache folder (default $FAC_CACHE_DIR or the user cache dir; - for none, as --no-cache)")
	fs.BoolVar(&noCache, "no-cache", false, "compile without the kernel cache")
	aliases(cmd, map[string]string{"output": "out"})
	return cmd
}

func cacheCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{Use: "cache", Short: "list or clear the kernel cache",
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if dir == "-" {
				return fmt.Errorf("--cache-dir -: that is no cache (compile and build take it to mean none); name a folder")
			}
			return nil
		}}
	cmd.PersistentFlags().StringVar(&dir, "cache-dir", "", "kernel cache folder (default $FAC_CACHE_DIR or the user cache dir)")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "list cached kernels",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cache.Open(cacheDir(dir))
			if err != nil {
				return err
			}
			entries, err := c.List()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s: %d entries\n", c.Dir(), len(entries))
			for _, e := range entries {
				fmt.Fprintf(w, "%s  %8d B  %s  %s\n", e.Key.Short(), e.Size, e.ModTime.Format(time.DateTime), e.Meta)
			}
			return nil
		},
	}
	clear := &cobra.Command{
		Use:   "clear",
		Short: "remove every cached kernel",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cache.Open(cacheDir(dir))
			if err != nil {
				return err
			}
			if err := c.Clear(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cleared %s\n", c.Dir())
			return nil
		},
	}
	cmd.AddCommand(ls, clear)
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
	if len(res.Tuned) == 0 {
		fmt.Fprintln(os.Stderr, "compile: tuned arguments: none")
		return
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(res.Tuned)) {
		kv = append(kv, k+"="+res.Tuned[k])
	}
	fmt.Fprintf(os.Stderr, "compile: tuned arguments: %s\n", strings.Join(kv, " "))
}
