package fac

import "github.com/fac-compiler/fac/flash"

// The environment variables fac reads (besides llc.EnvLLC, llc.EnvTimeout
// and cache.EnvDir), once, in flash/environment.go: a user-level fallback
// for the settings the API takes as Options and the CLI as flags
// (docs/runtime.md).
const (
	// EnvArch names the target a GPU compiles for instead of its own
	// (gpu.Config.Arch): sm_80 runs the sm80 path on an H200.
	EnvArch = flash.EnvArch
	// EnvWGMMA=0 is the switch wgmma=off.
	EnvWGMMA = flash.EnvWGMMA
	// EnvTMA=0 is tma=off; EnvTMA=barrier is release=barrier.
	EnvTMA = flash.EnvTMA
	// EnvDQBulk=1 is dq=bulk.
	EnvDQBulk = flash.EnvDQBulk
	// EnvTMAStore=1 is tma-store=on.
	EnvTMAStore = flash.EnvTMAStore
	// EnvCTAsPerSM=n, an integer n ≥ 2, is ctas-per-sm=n.
	EnvCTAsPerSM = flash.EnvCTAsPerSM
	// EnvPersistentPrograms=N launches persistent kernels on N programs
	// (gpu.Config.PersistentPrograms; measurements).
	EnvPersistentPrograms = flash.EnvPersistentPrograms
	// EnvBenchSync=1 is gpu.Config.BenchSync.
	EnvBenchSync = flash.EnvBenchSync
)

// Environment is what the user's environment sets: Target, the code
// switches (EnvWGMMA, EnvTMA, EnvDQBulk, EnvTMAStore, EnvCTAsPerSM) that
// every compile's Options.Target falls back to where it leaves a switch at
// its default; GPU, how OpenCUDA sets up a device (EnvArch, cache.EnvDir,
// llc.EnvLLC, llc.EnvTimeout, EnvPersistentPrograms, EnvBenchSync).
type Environment = flash.Environment

// Env is the environment's settings, read on the first call. The error
// names a variable whose value cannot be used (FAC_LLC_TIMEOUT,
// FAC_PERSISTENT_PROGRAMS); that setting is left at its default.
func Env() (Environment, error) { return flash.Env() }
