package flash

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/runtime/gpu"
)

// This file is the one place in fac's packages that reads the
// environment. The variables are a user-level fallback, read once and
// passed down as fields: the libraries below take them as options
// (codegen.TargetConfig, gpu.Config, llc.Config, a cache folder).

// The environment variables fac reads (besides llc.EnvLLC,
// llc.EnvTimeout and cache.EnvDir).
const (
	// EnvArch names the target a GPU compiles for instead of its own
	// (gpu.Config.Arch): sm_80 runs the sm80 path on an H200.
	EnvArch = "FAC_ARCH"
	// EnvWGMMA=0 is the switch wgmma=off.
	EnvWGMMA = "FAC_WGMMA"
	// EnvTMA=0 is tma=off; EnvTMA=barrier is release=barrier.
	EnvTMA = "FAC_TMA"
	// EnvDQBulk=1 is dq=bulk.
	EnvDQBulk = "FAC_DQ_BULK"
	// EnvTMAStore=1 is tma-store=on.
	EnvTMAStore = "FAC_TMA_STORE"
	// EnvRiders=0 is riders=off.
	EnvRiders = "FAC_RIDERS"
	// EnvCTAsPerSM=n, an integer n ≥ 2, is ctas-per-sm=n.
	EnvCTAsPerSM = "FAC_CTAS_PER_SM"
	// EnvPersistentPrograms=N launches persistent kernels on N programs
	// (gpu.Config.PersistentPrograms; measurements).
	EnvPersistentPrograms = "FAC_PERSISTENT_PROGRAMS"
	// EnvBenchSync=1 is gpu.Config.BenchSync.
	EnvBenchSync = "FAC_BENCH_SYNC"
)

// Environment is what the user's environment sets.
type Environment struct {
	// Target holds the switches of EnvWGMMA, EnvTMA, EnvDQBulk,
	// EnvTMAStore, EnvRiders and EnvCTAsPerSM (no Arch). They are the fallback of
	// every compile's Options.Target: a switch that Options.Target leaves
	// at its default takes the environment's (codegen.TargetConfig.Or).
	// Values other than those documented are ignored, as they always were.
	Target codegen.TargetConfig
	// GPU is how OpenCUDA sets up a device: EnvArch, cache.EnvDir,
	// llc.EnvLLC, llc.EnvTimeout, EnvPersistentPrograms, EnvBenchSync.
	GPU gpu.Config
}

var (
	envOnce sync.Once
	envVal  Environment
	envErr  error
)

// Env is the environment's settings, read on the first call. The error
// names a variable whose value cannot be used (FAC_LLC_TIMEOUT,
// FAC_PERSISTENT_PROGRAMS); that setting is left at its default.
func Env() (Environment, error) {
	envOnce.Do(func() { envVal, envErr = readEnvironment(os.Getenv) })
	return envVal, envErr
}

// envTarget is the environment's switches (Env; their values are never
// an error).
func envTarget() codegen.TargetConfig {
	e, _ := Env()
	return e.Target
}

// readEnvironment reads the settings from getenv (os.Getenv, or a map in
// tests).
func readEnvironment(getenv func(string) string) (Environment, error) {
	var e Environment
	t := &e.Target
	t.NoWGMMA = getenv(EnvWGMMA) == "0"
	switch getenv(EnvTMA) {
	case "0":
		t.NoTMA = true
	case "barrier":
		t.Release = codegen.ReleaseBarrier
	}
	if getenv(EnvDQBulk) == "1" {
		t.DQ = codegen.DQBulk
	}
	t.TMAStore = getenv(EnvTMAStore) == "1"
	t.NoRiders = getenv(EnvRiders) == "0"
	if n, err := strconv.Atoi(getenv(EnvCTAsPerSM)); err == nil && n >= 2 {
		t.CTAsPerSM = n
	}

	g := &e.GPU
	g.Arch = getenv(EnvArch)
	var errs []string
	if g.Arch != "" {
		if _, err := compiler.CheckArch(g.Arch); err != nil {
			errs = append(errs, EnvArch+"="+g.Arch+": "+err.Error())
			g.Arch = ""
		}
	}
	g.CacheDir = getenv(cache.EnvDir)
	g.LLC.Path = getenv(llc.EnvLLC)
	g.BenchSync = getenv(EnvBenchSync) == "1"
	if v := getenv(llc.EnvTimeout); strings.TrimSpace(v) != "" {
		d, err := llc.ParseTimeout(v)
		if err != nil {
			errs = append(errs, llc.EnvTimeout+"="+err.Error())
		}
		g.LLC.Timeout = d
	}
	if v := getenv(EnvPersistentPrograms); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Sprintf("%s=%q: want a positive count of programs", EnvPersistentPrograms, v))
		} else {
			g.PersistentPrograms = n
		}
	}
	if len(errs) > 0 {
		return e, fmt.Errorf("environment: %s", strings.Join(errs, "; "))
	}
	return e, nil
}

// target is o.Target with the environment's switches where o leaves them
// at their defaults.
func (o Options) target() codegen.TargetConfig { return o.Target.Or(envTarget()) }
