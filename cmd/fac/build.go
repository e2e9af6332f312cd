package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/internal/version"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/artifact/cache"
)

func buildCmd() *cobra.Command {
	var files, masks, scores, consts, dtypes, archs []string
	var dims []int
	var out, cacheDir string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "build",
		Short: "compile forward kernels ahead of time into a bundle that loads with no llc",
		Example: `  fac build --mask causal --mask "sliding_window(1024, 0)" --dtype bf16 --dim 64,128 --arch sm_90a -o attn.bundle
  # then, in Go: b, _ := bundle.Read("attn.bundle"); gpu.AddBundle(b)  (or go:embed the file and bundle.Parse it)`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("-o FILE is required")
			}
			srcs, err := readSources(files)
			if err != nil {
				return err
			}
			cf := compileFlags{consts: consts}
			cm, err := cf.constMap()
			if err != nil {
				return err
			}
			tool, err := llc.Find()
			if err != nil {
				return err
			}
			var c *cache.Cache
			if cacheDir != "-" {
				if c, err = cache.Open(cacheDir); err != nil {
					return err
				}
			}
			b := &bundle.Bundle{Format: bundle.Format, FacVersion: version.Version}
			t0 := time.Now()
			for _, dt := range dtypes {
				for _, d := range dims {
					for _, m := range masks {
						for _, s := range scores {
							fwd, err := fac.CompileForward(fac.Options{Mask: m, Score: s, Sources: srcs, Consts: cm, DType: dt}, d)
							if err != nil {
								return err
							}
							for _, arch := range archs {
								ks, err := fwd.BundleKernels(context.Background(), c, arch, tool)
								if err != nil {
									return err
								}
								for _, k := range ks {
									if inBundle(b, k) {
										continue // the classifier is shared by dtypes, dims and scores
									}
									b.Add(k)
									if verbose {
										fmt.Fprintf(os.Stderr, "build: %s mask=%s score=%s dtype=%s dim=%s %s\n", k.Kernel, k.Mask, k.Score, dt, strconv.Itoa(d), arch)
									}
								}
							}
						}
					}
				}
			}
			if err := bundle.Write(out, b); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d kernels in %.1fs\n", out, len(b.Kernels), time.Since(t0).Seconds())
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVarP(&files, "file", "f", nil, "user source files with mods (repeatable)")
	fs.StringArrayVar(&masks, "mask", []string{"none"}, "mask mod (repeatable)")
	fs.StringArrayVar(&scores, "score", []string{"identity"}, "score mod (repeatable)")
	fs.StringArrayVar(&consts, "const", nil, "compile-time argument NAME=VALUE (repeatable)")
	fs.StringSliceVar(&dtypes, "dtype", []string{"bf16"}, "element types (comma-separated): bf16, f16, f32")
	fs.IntSliceVar(&dims, "dim", []int{128}, "head dims (comma-separated)")
	fs.StringSliceVar(&archs, "arch", []string{"sm_90a"}, "GPU targets (comma-separated)")
	fs.StringVarP(&out, "output", "o", "", "bundle file to write")
	fs.StringVar(&cacheDir, "cache-dir", "", "kernel cache folder (- for none)")
	fs.BoolVarP(&verbose, "verbose", "v", false, "list each kernel as it is built")
	return cmd
}

func inBundle(b *bundle.Bundle, k bundle.Kernel) bool {
	for _, have := range b.FindAll(k.Kernel, k.Mask, k.Score, k.Consts) {
		if have.Arch == k.Arch {
			return true
		}
	}
	return false
}
