package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/internal/version"
	"github.com/fac-compiler/fac/passes"
)

func passesCmd() *cobra.Command {
	var arch string
	cmd := &cobra.Command{
		Use:   "passes",
		Short: "list the tile pass table and the GPU phases of a target, in order (names are the handles for --print-ir-after and --disable-pass), and the pipelines",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkArch(cmd.ErrOrStderr(), "--arch", arch); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "tile passes:\n")
			for _, p := range passes.Table {
				fmt.Fprintf(w, "  %-16s %-8s %s\n", p.Name, required(p.Required), p.Doc)
			}
			phases, err := codegen.Phases(arch)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "\nGPU phases for %s (fac compile --emit llvm|ptx --arch %s):\n", arch, arch)
			for _, p := range phases {
				fmt.Fprintf(w, "  %-16s %-8s %s\n", p.Name, required(p.Required), p.Doc)
			}
			fmt.Fprintf(w, "\nrequired passes and phases cannot be disabled; tile pipelines:\n")
			for _, p := range passes.Pipelines {
				fmt.Fprintf(w, "  %-16s %s\n  %-16s (%s)\n", p.Name, p.Doc, "", strings.Join(p.Passes, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&arch, "arch", "sm_90a", "GPU target whose phases to list: sm_80, sm_90a, ...")
	return cmd
}

func required(r bool) string {
	if r {
		return "required"
	}
	return ""
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print fac's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "fac %s\n", version.Version)
			return nil
		},
	}
}
