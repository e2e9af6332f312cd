package main

import (
	"bytes"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/internal/outfile"
)

func blockmaskCmd() *cobra.Command {
	var files, consts, bundles []string
	var shp shapeFlags
	var ax auxFlags
	var mask, outDir, png, device string
	var block, cell int
	var fullWidth bool
	cmd := &cobra.Command{
		Use:   "blockmask [FILE...]",
		Short: "build a mask's block mask (FlexAttention layout), save it as .npy files and draw it",
		Example: `  fac blockmask --mask "sliding_window(1023, 0)" --seqlen-q 8192 --seqlen-k 8192 --png sw.png
  fac blockmask --mask document --random-aux --doc-len 1000 --out bm/   # then: fac run --blockmask bm/
  fac blockmask mymask.fa --mask my_mask --png - > my_mask.png`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkDevice(device, "cpu", "cuda"); err != nil {
				return err
			}
			if mask == "" {
				return fmt.Errorf("--mask is required: the mask whose block mask to build (e.g. --mask causal)")
			}
			if outDir == "-" {
				return fmt.Errorf("--out -: a block mask is a folder of .npy files, it cannot go to stdout; give a folder (--png - draws to stdout)")
			}
			w := reportTo(cmd, png == "-")
			srcs, err := readSources(append(args, files...))
			if err != nil {
				return err
			}
			cm, err := (&compileFlags{consts: consts}).constMap()
			if err != nil {
				return err
			}
			if err := blockConsts(cm, block, block, cmd.Flags().Changed("block"), fmt.Sprintf("--block %d", block)); err != nil {
				return err
			}
			fwd, err := fac.CompileForward(fac.Options{Mask: mask, Sources: srcs, Consts: cm}, 64)
			if err != nil {
				return err
			}
			sh := shp.shape()
			sh.Dim = 64
			if err := sh.Validate(); err != nil {
				return err
			}
			aux, notes, err := ax.load(fwd, sh)
			if err != nil {
				return err
			}
			// The builders take run-time parameter values with the aux tensors.
			scalars, err := ax.scalarValues(fwd)
			if err != nil {
				return err
			}
			for k, v := range scalars {
				aux[k] = v
			}
			for _, n := range notes {
				fmt.Fprintln(w, n)
			}
			t0 := time.Now()
			var bm *blockmask.BlockMask
			method := "on the GPU"
			if device == "cuda" {
				gpu, err := openGPU(bundles)
				if err != nil {
					return err
				}
				// The first build loads the classifier kernel; time the next ones.
				if bm, err = fwd.BuildBlockMaskCUDA(gpu, sh, aux); err != nil {
					return err
				}
				first := time.Since(t0)
				best, err := bestOf(5, func() (err error) {
					bm, err = fwd.BuildBlockMaskCUDA(gpu, sh, aux)
					return err
				})
				if err != nil {
					return err
				}
				method = fmt.Sprintf("on the GPU (first call with kernel load %.1f ms; best of 5 after)", ms(first))
				t0 = time.Now().Add(-best)
			} else {
				// The first build compiles the mask's analyzer for this shape
				// (kept by the Forward); time the next ones too.
				var m blockmask.Method
				if bm, m, err = fwd.BuildBlockMask(sh, aux); err != nil {
					return err
				}
				first := time.Since(t0)
				method = m.String()
				if m == blockmask.MethodAnalytic {
					best, err := bestOf(5, func() (err error) {
						bm, _, err = fwd.BuildBlockMask(sh, aux)
						return err
					})
					if err != nil {
						return err
					}
					method = fmt.Sprintf("analytic (first call, compiling the analyzer: %.3f ms; best of 5 after)", ms(first))
					t0 = time.Now().Add(-best)
				}
			}
			took := time.Since(t0)
			fmt.Fprintf(w, "block mask %s: %d×%d blocks of %d×%d, shared over b: %v, over h: %v; built %s in %.3f ms; density %.4f\n",
				modName(fwd.Mask()), bm.NumQ, bm.NumK, bm.BlockQ, bm.BlockK, bm.B == 1, bm.H == 1, method, ms(took), bm.Density())
			if fullWidth {
				if bm, err = bm.WithWidths(bm.NumK, bm.NumQ); err != nil {
					return err
				}
			}
			fmt.Fprintf(w, "index rows: %d kv blocks (of %d), %d q blocks (of %d); lists take %s\n",
				bm.KVWidth, bm.NumK, bm.QWidth, bm.NumQ, byteSize(4*(len(bm.KVIndices)+len(bm.FullKVIndices)+len(bm.QIndices)+len(bm.FullQIndices)+
					len(bm.KVNumBlocks)+len(bm.FullKVNumBlocks)+len(bm.QNumBlocks)+len(bm.FullQNumBlocks))))
			if outDir != "" {
				if err := bm.Save(outDir); err != nil { // makes the folder, whole or not at all
					return err
				}
				fmt.Fprintf(w, "wrote %s\n", outDir)
			}
			if png != "" {
				if cell <= 0 {
					cell = max(1, 512/max(bm.NumQ, bm.NumK))
				}
				var buf bytes.Buffer
				if err := blockmask.PNG(&buf, bm, cell); err != nil {
					return err
				}
				if err := outfile.Write(png, buf.Bytes()); err != nil {
					return err
				}
				if png != "-" {
					fmt.Fprintf(w, "wrote %s\n", png)
				}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	addFileFlag(fs, &files)
	fs.StringVar(&mask, "mask", "", `mask mod (required), e.g. causal or "sliding_window(256, 0)"`)
	fs.StringArrayVar(&consts, "const", nil, "compile-time argument NAME=VALUE of flash_fwd (repeatable)")
	shp.add(cmd, 8192, false)
	addBlockFlag(fs, &block)
	fs.StringVarP(&outDir, "out", "o", "", "write the block-mask tensors as .npy files and block_mask.json into this folder")
	fs.StringVar(&png, "png", "", "draw the block mask into this PNG file (- = stdout; the report then goes to stderr)")
	fs.IntVar(&cell, "cell", 0, "pixels per block in the PNG (0 = fit about 512 px)")
	fs.BoolVar(&fullWidth, "full-width", false, "write index rows of every block (FlexAttention's [B, H, NumQ, NumK]) instead of rows as long as the longest list, for scripts that take the number of blocks from kv_indices' last dimension (PyTorch's BlockMask.from_kv_blocks)")
	ax.add(fs)
	fs.StringArrayVar(&bundles, "bundle", nil, "AOT bundle with the block classifier (repeatable; no llc needed)")
	addDeviceFlag(fs, &device, "cpu", "where to evaluate masks that cannot be bounded: cpu or cuda")
	return cmd
}

// bestOf runs fn n times and returns its fastest time.
func bestOf(n int, fn func() error) (time.Duration, error) {
	var best time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		if d := time.Since(t); best == 0 || d < best {
			best = d
		}
	}
	return best, nil
}

// byteSize writes a size in B, KiB, MiB or GiB.
func byteSize(n int) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
