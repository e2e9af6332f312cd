package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/internal/outfile"
	"github.com/fac-compiler/fac/internal/version"
)

func buildCmd() *cobra.Command {
	var files, masks, scores, consts, dtypes, archs []string
	var dims []int
	var block, dimV int
	var out, cacheDir string
	var verbose, backward, paged, sinks, varlen bool
	var df decodeFlags
	var tf targetFlags
	cmd := &cobra.Command{
		Use:   "build [FILE...]",
		Short: "compile forward (and --backward) kernels ahead of time into a bundle that loads with no llc",
		Example: `  fac build --mask causal --mask "sliding_window(1024, 0)" --dtype bf16 --dim 64,128 --arch sm_90a -o attn.bundle
  fac build --backward --mask causal --score "softcap(30.0)" --dtype bf16 -o train.bundle   # forward and backward
  # then, in Go: b, _ := bundle.Read("attn.bundle"); gpu.AddBundle(b)  (or go:embed the file and bundle.Parse it)
  fac build mymask.fa --mask my_mask -o - | ssh gpu-host 'cat > my.bundle'   # "wrote" goes to stderr
  fac build --mask none --decode-const BLOCK_N=64 -o decode-n64.bundle   # split-KV kernels with 64-key tiles
  fac build --num-splits 1 --pack-gqa off -o fwd.bundle   # no split-KV kernels: flash_fwd alone, always
  fac build --backward --mask causal --dim 128 --dim-v 64 -o dv64.bundle   # v and o with head dim 64, q and k 128
  fac build --paged --mask causal_bottom_right --dim 128 -o serve.bundle   # and the paged KV cache's kernels
  fac build --sinks --backward --mask "sliding_window(127, 0)" -o gpt-oss.bundle   # kernels with learnable sinks
  fac build --varlen --backward --mask causal -o packed.bundle   # and those of packed sequences (fac run --cu-seqlens-q)`,
		Long: `Compiles flash_fwd for every mask × score × dtype × head dim × arch, with the block classifier and,
unless --num-splits 1 --pack-gqa off, the split-KV kernels a decoding call may run (flash_fwd_splitkv
with 16- and 64-row tiles, flash_fwd_combine; docs/decoding.md), --backward the backward's, and
--paged those of decoding over a paged KV cache (flash_fwd_paged and, for ragged batches,
flash_fwd_paged_varlen, with both tile heights, keys gathered and 1, 2 or 4 pages per tile,
flash_fwd_combine, and kv_append for calls that append keys and values;
masks and scores that read aux tensors have no paged form and are refused), --sinks those of a forward
(and, with --backward, a backward) with learnable sinks (flash_fwd_sinks, its split-KV kernels with
flash_fwd_combine_sinks, flash_bwd_sinks; with --paged its paged kernels too), and --varlen those of
packed sequences (flash_fwd_varlen, and flash_bwd_varlen with --backward).
--target-opt NAME=VALUE sets a code generation switch (fac compile --help lists them); the kernels
are then those of that variant, which a device finds with the same switches.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("-o FILE is required (- = stdout)")
			}
			if err := checkOutputs(out != "-", map[string]string{"--out": out}); err != nil {
				return err
			}
			srcs, err := readSources(append(args, files...))
			if err != nil {
				return err
			}
			for _, a := range archs {
				if err := checkArch(cmd.ErrOrStderr(), "--arch", a); err != nil {
					return err
				}
			}
			cf := compileFlags{consts: consts}
			if err := listConstsAsFlags(cmd, &cf, &dtypes, &dims, &dimV); err != nil {
				return err
			}
			cm, err := cf.constMap()
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("block") {
				if err := blockConsts(cm, block, block, true, fmt.Sprintf("--block %d", block)); err != nil {
					return err
				}
			}
			fwdConsts, bwdConsts := cm, map[string]string(nil)
			if backward {
				if fwdConsts, bwdConsts, err = splitConsts(srcs, cm); err != nil {
					return err
				}
			}
			target, err := tf.config("")
			if err != nil {
				return err
			}
			lc, err := llcConfig()
			if err != nil {
				return err
			}
			tool, err := lc.Find()
			if err != nil {
				return err
			}
			c, err := openCache(cacheDir)
			if err != nil {
				return err
			}
			b := &bundle.Bundle{Format: bundle.Format, FacVersion: version.Version}
			t0 := time.Now()
			for _, dt := range dtypes {
				for _, d := range dims {
					for _, m := range masks {
						for _, s := range scores {
							for _, arch := range archs {
								// Per arch: the forward and the backward take the tile arguments tuned for it.
								t := target
								t.Arch = arch
								var bwd *fac.Backward
								if backward {
									var err error
									if bwd, err = fac.CompileBackward(fac.Options{Mask: m, Score: s, Sources: srcs, Consts: bwdConsts, DType: dt, DimV: dimV, Target: t}, d); err != nil {
										return err
									}
								}
								fopts := fac.Options{Mask: m, Score: s, Sources: srcs, Consts: fwdConsts, DType: dt, DimV: dimV, Target: t}
								if err := df.apply(&fopts); err != nil {
									return err
								}
								fwd, err := fac.CompileForward(fopts, d)
								if err != nil {
									return err
								}
								ks, err := fwd.BundleKernels(context.Background(), c, arch, tool)
								if err != nil {
									return err
								}
								if paged {
									pks, err := fwd.BundlePagedKernels(context.Background(), c, arch, tool)
									if err != nil {
										return fmt.Errorf("--paged, mask %s, score %s: %w", m, s, err)
									}
									ks = append(ks, pks...)
								}
								if bwd != nil {
									bks, err := bwd.BundleKernels(context.Background(), c, arch, tool)
									if err != nil {
										return err
									}
									ks = append(ks, bks...)
								}
								// The other families, compiled as their calls compile them, so
								// that a device finds them in the bundle.
								add := func(flag string, f kernelBundler, err error) error {
									if err == nil {
										var fks []*artifact.Artifact
										fks, err = f.BundleKernels(context.Background(), c, arch, tool)
										ks = append(ks, fks...)
									}
									if err != nil {
										return fmt.Errorf("%s, mask %s, score %s: %w", flag, m, s, err)
									}
									return nil
								}
								if sinks {
									so := fopts
									so.Sinks = true
									sf, err := fac.CompileForward(so, d)
									if err := add("--sinks", sf, err); err != nil {
										return err
									}
									if paged {
										if err := add("--sinks --paged", pagedKernels{sf}, nil); err != nil {
											return err
										}
									}
									if backward {
										sb, err := fac.CompileBackward(fac.Options{Mask: m, Score: s, Sources: srcs, Consts: bwdConsts, DType: dt, DimV: dimV, Target: t, Sinks: true}, d)
										if err := add("--sinks --backward", sb, err); err != nil {
											return err
										}
									}
								}
								if varlen {
									vo := fac.Options{Mask: m, Score: s, Sources: srcs, Consts: fwdConsts, DType: dt, DimV: dimV, Target: t}
									vf, err := fac.CompileForwardVarlen(vo, d)
									if err := add("--varlen", vf, err); err != nil {
										return err
									}
									if backward {
										vo.Consts = bwdConsts
										vb, err := fac.CompileBackwardVarlen(vo, d)
										if err := add("--varlen --backward", vb, err); err != nil {
											return err
										}
									}
								}
								for _, k := range ks {
									if b.Has(k.Ident) {
										continue // the classifier, the combine kernels and the backward's pre- and postprocess are shared
									}
									b.Add(*k)
									if verbose {
										fmt.Fprintf(os.Stderr, "build: %s\n", k.Ident)
									}
								}
							}
						}
					}
				}
			}
			data, err := bundle.Marshal(b)
			if err != nil {
				return err
			}
			if err := outfile.Write(out, data); err != nil {
				return fmt.Errorf("bundle: %w", err)
			}
			name := out
			if out == "-" {
				name = "stdout"
			}
			fmt.Fprintf(reportTo(cmd, out == "-"), "wrote %s: %d kernels in %.1fs\n", name, len(b.Kernels), time.Since(t0).Seconds())
			return nil
		},
	}
	fs := cmd.Flags()
	addFileFlag(fs, &files)
	fs.StringArrayVar(&masks, "mask", []string{"none"}, "mask mod (repeatable)")
	fs.StringArrayVar(&scores, "score", []string{"identity"}, "score mod (repeatable)")
	fs.StringArrayVar(&consts, "const", nil, "compile-time argument NAME=VALUE (repeatable)")
	fs.StringSliceVar(&dtypes, "dtype", []string{"bf16"}, "element types (comma-separated): bf16, f16, f32")
	fs.IntSliceVar(&dims, "dim", []int{128}, "head dims (comma-separated)")
	fs.IntVar(&dimV, "dim-v", 0, "head dim of v and o for every --dim, where it differs (0: each --dim); the kernels' HEAD_DIM_V")
	fs.StringSliceVar(&archs, "arch", []string{"sm_90a"}, "GPU targets (comma-separated)")
	addBlockFlag(fs, &block)
	fs.StringVarP(&out, "out", "o", "", "bundle file to write (- = stdout)")
	fs.StringVar(&cacheDir, "cache-dir", "", "kernel cache folder (default $FAC_CACHE_DIR or the user cache dir; - for none)")
	fs.BoolVarP(&verbose, "verbose", "v", false, "list each kernel as it is built")
	df.add(fs)
	tf.add(fs)
	fs.BoolVar(&backward, "backward", false, "also the backward pass's kernels (flash_bwd_preprocess, flash_bwd, flash_bwd_postprocess, or flash_bwd_dq with --const DETERMINISTIC=true)")
	fs.BoolVar(&paged, "paged", false, "also the paged KV cache's kernels (flash_fwd_paged and flash_fwd_paged_varlen at both tile heights in every form, flash_fwd_combine, kv_append)")
	fs.BoolVar(&sinks, "sinks", false, "also the kernels with learnable sinks: flash_fwd_sinks and its split-KV kernels (flash_fwd_combine_sinks); flash_bwd_sinks with --backward")
	fs.BoolVar(&varlen, "varlen", false, "also the packed-sequence kernels: flash_fwd_varlen; flash_bwd_varlen with --backward")
	aliases(cmd, map[string]string{"output": "out"})
	return cmd
}

// kernelBundler is a compiled family whose kernels go into a bundle.
type kernelBundler interface {
	BundleKernels(ctx context.Context, c *cache.Cache, arch string, tool *llc.Tool) ([]*artifact.Artifact, error)
}

// pagedKernels bundles a forward's paged kernels (BundlePagedKernels).
type pagedKernels struct{ f *fac.Forward }

func (p pagedKernels) BundleKernels(ctx context.Context, c *cache.Cache, arch string, tool *llc.Tool) ([]*artifact.Artifact, error) {
	return p.f.BundlePagedKernels(ctx, c, arch, tool)
}
