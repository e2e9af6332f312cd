package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/lang"
)

func checkCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE...",
		Short: "parse and type-check source files (mods with scalar arguments, kernels with their defaults)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			srcs, err := readSources(files)
			if err != nil {
				return err
			}
			prog, err := compiler.Load(srcs)
			if err != nil {
				return err
			}
			var errs lang.ErrorList
			n := 0
			for _, f := range files {
				for _, name := range prog.DeclaredIn(f) {
					if err := prog.CheckDecl(name); err != nil {
						errs = append(errs, err)
					}
					n++
				}
			}
			if len(errs) > 0 {
				return errs
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: %d declarations in %d files\n", n, len(files))
			return nil
		},
	}
}
