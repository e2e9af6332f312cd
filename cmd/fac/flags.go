package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/internal/outfile"
)

// Flags shared by run, blockmask, bench and build (and compile and ir where
// they apply) are registered here, so that a flag has one name, one
// meaning and one check everywhere.

// addFileFlag registers -f/--file; every command that reads user sources
// also takes them as positional arguments.
func addFileFlag(fs *pflag.FlagSet, files *[]string) {
	fs.StringSliceVarP(files, "file", "f", nil, "user source files with mods or kernels (repeatable; positional FILEs too)")
}

// addDeviceFlag registers --device; checkDevice validates it.
func addDeviceFlag(fs *pflag.FlagSet, dev *string, def, help string) {
	fs.StringVar(dev, "device", def, help)
}

// checkDevice refuses a --device value the command cannot use, naming the
// ones it can.
func checkDevice(dev string, allowed ...string) error {
	if slices.Contains(allowed, dev) {
		return nil
	}
	return fmt.Errorf("--device %q: want %s", dev, strings.Join(allowed, " or "))
}

// addBlockFlag registers --block, the block size of the block mask (the
// kernel's SPARSE_Q × SPARSE_K), FlexAttention's BLOCK_SIZE.
func addBlockFlag(fs *pflag.FlagSet, block *int) {
	fs.IntVar(block, "block", 128, "block size of the block mask, both sides: the kernel's SPARSE_Q and SPARSE_K (unset: the kernel's tuned or default blocks; fac blockmask: 128)")
}

// targetFlags is --target-opt NAME=VALUE (repeatable), the code generation
// switches of the GPU kernels a command builds (codegen.TargetConfig).
type targetFlags struct{ opts []string }

func (t *targetFlags) add(fs *pflag.FlagSet) {
	var forms []string
	for _, o := range codegen.TargetOptions() {
		form, _, _ := strings.Cut(o, ":")
		forms = append(forms, form)
	}
	fs.StringArrayVar(&t.opts, "target-opt", nil, "GPU code generation switch NAME=VALUE (repeatable, or comma-separated): "+
		strings.Join(forms, ", ")+"; unset ones take FAC_WGMMA=0, FAC_TMA=0, ... from the environment (fac compile --help says what each does)")
}

// config is the target for arch ("": the GPU's, chosen later) with the
// switches given, for the root package's Options (which add the
// environment's).
func (t *targetFlags) config(arch string) (codegen.TargetConfig, error) {
	c, err := codegen.ParseTargetConfig(arch, t.opts...)
	if err != nil {
		return c, fmt.Errorf("--target-opt: %w", err)
	}
	return c, nil
}

// withEnv is config(arch) with the switches it leaves at their defaults
// taken from the environment, for commands that call the compiler
// directly.
func (t *targetFlags) withEnv(arch string) (codegen.TargetConfig, error) {
	c, err := t.config(arch)
	if err != nil {
		return c, err
	}
	env, err := fac.Env()
	return c.Or(env.Target), err
}

// targetHelp describes the switches, for a command's long help.
func targetHelp() string {
	return "--target-opt NAME=VALUE (repeatable, or comma-separated) sets a switch of the GPU code; each one set away from\n" +
		"its default gives the kernels a variant of their own (cache entries, bundle slots, tuned sets):\n  " +
		strings.Join(codegen.TargetOptions(), "\n  ") +
		"\nSwitches left at their defaults take the environment's: FAC_WGMMA=0, FAC_TMA=0 (or barrier), FAC_DQ_BULK=1,\n" +
		"FAC_TMA_STORE=1, FAC_CTAS_PER_SM=N."
}

// llcConfig is how the environment says to find llc (FAC_LLC,
// FAC_LLC_TIMEOUT).
func llcConfig() (llc.Config, error) {
	env, err := fac.Env()
	return env.GPU.LLC, err
}

// openCache opens the kernel cache in dir (default: $FAC_CACHE_DIR or the
// user cache dir); "-" means none, as --cache-dir - does for compile and
// build (nil, no error).
func openCache(dir string) (*cache.Cache, error) {
	if dir == "-" {
		return nil, nil
	}
	return cache.Open(cacheDir(dir))
}

// cacheDir is the --cache-dir folder, else the environment's
// (FAC_CACHE_DIR; "": the user cache dir).
func cacheDir(dir string) string {
	if dir == "" {
		env, _ := fac.Env()
		dir = env.GPU.CacheDir
	}
	return dir
}

// aliases keeps old flag names working, hidden from help: pflag folds
// each old name into the new one.
func aliases(cmd *cobra.Command, oldToNew map[string]string) {
	cmd.Flags().SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if n, ok := oldToNew[name]; ok {
			return pflag.NormalizedName(n)
		}
		return pflag.NormalizedName(name)
	})
}

// blockConsts sets the kernel's block-mask block sizes (SPARSE_Q, SPARSE_K)
// to bq × bk, unless --const gave them: then they must agree when the
// block size is required (by a flag or a block mask; from names it). The kernel's
// tiles must divide a block, so BLOCK_M and BLOCK_N shrink to a divisor
// when the block is not a multiple of the default 64 (unless --const set
// them).
func blockConsts(consts map[string]string, bq, bk int, required bool, from string) error {
	if bq < 1 || bk < 1 {
		return fmt.Errorf("%s: block sizes must be positive, got %d×%d", from, bq, bk)
	}
	for _, c := range []struct {
		name, tile string
		v          int
	}{{"SPARSE_Q", "BLOCK_M", bq}, {"SPARSE_K", "BLOCK_N", bk}} {
		if s, ok := consts[c.name]; ok {
			if n, err := strconv.Atoi(s); required && (err != nil || n != c.v) {
				return fmt.Errorf("%s contradicts --const %s=%s", from, c.name, s)
			}
			continue
		}
		consts[c.name] = strconv.Itoa(c.v)
		if _, ok := consts[c.tile]; !ok && c.v%64 != 0 {
			consts[c.tile] = strconv.Itoa(gcd(c.v, 64))
		}
	}
	return nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// reportTo is where a command's human report goes: stdout, unless a data
// output goes there ("-"), then stderr, so the data stays clean.
func reportTo(cmd *cobra.Command, dataToStdout bool) io.Writer {
	if dataToStdout {
		return cmd.ErrOrStderr()
	}
	return cmd.OutOrStdout()
}

// oneStdout refuses two data outputs on stdout: their bytes would mix.
func oneStdout(flags map[string]string) error {
	var dash []string
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		if flags[name] == "-" {
			dash = append(dash, name)
		}
	}
	if len(dash) > 1 {
		return fmt.Errorf("%s both name standard output (-); only one output can go there", strings.Join(dash, " and "))
	}
	return nil
}

// checkOutputs checks a command's data outputs (flag → value; "" is none)
// before it computes them, so that a bad one does not lose a long run at
// the end (issue 46 item 14): one at most on stdout, each a file of its
// own (issue 46 item 7: the same name twice, or two names for one file
// through a link), none the stdout the human report goes to
// (reportToStdout; -o /dev/stdout would mix the two), and each writable
// (no directory, an existing folder, not read-only).
func checkOutputs(reportToStdout bool, outputs map[string]string) error {
	if err := oneStdout(outputs); err != nil {
		return err
	}
	if err := outfile.Distinct(outputs); err != nil {
		return err
	}
	for _, flag := range slices.Sorted(maps.Keys(outputs)) {
		v := outputs[flag]
		if v == "" {
			continue
		}
		if reportToStdout && v != "-" && outfile.IsStdout(v) {
			return fmt.Errorf("%s %s is standard output, where the report goes, and the two would mix; write %s - (the report then goes to stderr)", flag, v, flag)
		}
		if err := outfile.Check(v); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
	}
	return nil
}

// anyStdout reports whether an output goes to stdout ("-").
func anyStdout(outputs map[string]string) bool {
	for _, v := range outputs {
		if v == "-" {
			return true
		}
	}
	return false
}

// checkArch refuses a GPU arch fac has no target for (compiler.CheckArch:
// --arch sm_1000 aborted llc with a stack dump) and warns on w when a
// known one runs another arch's code path (issue 46 item 11; issue 44
// item 5: sm_89, sm_100a and sm_120 run sm_80's).
func checkArch(w io.Writer, flag, arch string) error {
	fb, err := compiler.CheckArch(arch)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if fb != "" {
		fmt.Fprintf(w, "fac: warning: %s\n", fb)
	}
	return nil
}

// listConstsAsFlags takes --const DTYPE and HEAD_DIM as build's --dtype
// and --dim lists (constAsFlag): as a const, one value; and HEAD_DIM_V as
// --dim-v.
func listConstsAsFlags(cmd *cobra.Command, cf *compileFlags, dtypes *[]string, dims *[]int, dimV *int) error {
	fs := cmd.Flags()
	if v, ok := cf.takeConst("DTYPE"); ok {
		if err := constAsFlag(fs, "DTYPE", v, "dtype", strings.Join(*dtypes, ","), func(s string) error {
			*dtypes = []string{s}
			return nil
		}); err != nil {
			return err
		}
	}
	var cur []string
	for _, d := range *dims {
		cur = append(cur, strconv.Itoa(d))
	}
	if err := headDimConstAsFlag(fs, cf, "HEAD_DIM", "dim", strings.Join(cur, ","), func(n int, _ string) error {
		*dims = []int{n}
		return nil
	}); err != nil {
		return err
	}
	return headDimConstAsFlag(fs, cf, "HEAD_DIM_V", "dim-v", strconv.Itoa(*dimV), func(n int, _ string) error {
		*dimV = n
		return nil
	})
}
