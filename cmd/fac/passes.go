package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac/internal/version"
	"github.com/fac-compiler/fac/passes"
)

func passesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "passes",
		Short: "list the pass pipeline, in order (names are the handles for --print-ir-after and --disable-pass)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, p := range passes.Table {
				fmt.Fprintf(cmd.OutOrStdout(), "%-16s %s\n", p.Name, p.Doc)
			}
			return nil
		},
	}
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
