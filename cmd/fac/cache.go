package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac/artifact/cache"
)

// cacheCmd is `fac cache ls|clear`. Neither creates anything: a folder
// that does not exist lists as empty and is already clear.
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
		Short: "list cached kernels: a line with the folder, the entry count and their bytes, then one line per entry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cache.Locate(cacheDir(dir))
			if err != nil {
				return err
			}
			entries, err := c.List()
			if err != nil {
				return err
			}
			var total int64
			for _, e := range entries {
				total += e.Size
			}
			note := ""
			if _, err := os.Stat(c.Dir()); errors.Is(err, fs.ErrNotExist) {
				note = " (the folder does not exist yet)"
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "cache %s: %d entries, %d bytes (%s)%s\n", c.Dir(), len(entries), total, humanBytes(total), note)
			for _, e := range entries {
				fmt.Fprintf(w, "%s  %8d B  %s  %s\n", e.Key.Short(), e.Size, e.ModTime.Format(time.DateTime), e.Meta)
			}
			return nil
		},
	}
	clear := &cobra.Command{
		Use:   "clear",
		Short: "remove every cached kernel (and fac's leftover temporary files and stale locks; nothing else)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cache.Locate(cacheDir(dir))
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

// humanBytes writes n in binary units, to a tenth.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n), 0
	for v >= unit && u < 4 {
		v /= unit
		u++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[u-1])
}
