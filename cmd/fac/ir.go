package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/internal/outfile"
)

func irCmd() *cobra.Command {
	var cf compileFlags
	var out, dtype string
	var dim, dimV int
	cmd := &cobra.Command{
		Use:   "ir [FILE...]",
		Short: "print a kernel's tile IR after the pass pipeline",
		Example: `  fac ir --mask causal
  fac ir mymask.fa --mask my_mask --print-ir-after all
  fac ir --mask "sliding_window(128, 0)" --const BLOCK_M=32 --disable-pass cse`,
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := checkOutputs(false, map[string]string{"--out": out}); err != nil {
				return err
			}
			req, err := cf.request(files, "")
			if err != nil {
				return err
			}
			if err := dtypeDimArgs(cmd, &req, dtype, dim, dimV, false); err != nil {
				return err
			}
			res, err := compiler.Compile(req)
			if err != nil {
				return err
			}
			text := res.Module.String()
			if out == "" {
				_, err = fmt.Fprint(os.Stdout, text)
				return err
			}
			return outfile.Write(out, []byte(text))
		},
	}
	cf.add(cmd, true)
	cmd.Flags().StringVarP(&out, "out", "o", "", "write the IR to this file instead of stdout (- = stdout)")
	cmd.Flags().StringVar(&dtype, "dtype", "f32", "element type of q, k, v, o (the kernel's DTYPE): f32, bf16, f16 (unset: the kernel's default)")
	cmd.Flags().IntVar(&dim, "dim", 64, "head dimension (the kernel's HEAD_DIM; unset: the kernel's default)")
	cmd.Flags().IntVar(&dimV, "dim-v", 0, "head dimension of v and o (the kernel's HEAD_DIM_V; unset or 0: its HEAD_DIM)")
	aliases(cmd, map[string]string{"output": "out"})
	return cmd
}
