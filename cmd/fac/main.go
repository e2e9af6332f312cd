// Command fac compiles FlashAttention kernels whose masks are user code,
// inspects their IR, and runs them on the CPU reference device or a GPU.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "fac",
		Short:         "fac compiles FlashAttention kernels with user-written mask and score mods",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(checkCmd(), irCmd(), compileCmd(), buildCmd(), runCmd(), benchCmd(), blockmaskCmd(), cacheCmd(), passesCmd(), versionCmd())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "fac: "+explain(err).Error())
		os.Exit(1)
	}
}
