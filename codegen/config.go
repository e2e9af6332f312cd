package codegen

import "github.com/fac-compiler/fac/codegen/core"

// TargetConfig is what code is generated for: the arch and the switches
// that shape the code beyond a compile's inputs (wgmma, tma, release, dq,
// tma-store, ctas-per-sm). Its zero value, apart from Arch, is the
// default code. It is defined in codegen/core so that the targets
// (sm90.New) take it too; see core.TargetConfig for its fields, Set and
// Opts (the NAME=VALUE form of `fac --target-opt`), Variant (the kernel
// identity's variant) and TuneVariants (the tuned sets' keys).
type TargetConfig = core.TargetConfig

// ReleaseMode is TargetConfig.Release (release=counters|barrier).
type ReleaseMode = core.ReleaseMode

// DQPath is TargetConfig.DQ (dq=red|tma|bulk).
type DQPath = core.DQPath

const (
	ReleaseCounters = core.ReleaseCounters // buffers handed back by release counters (the default)
	ReleaseBarrier  = core.ReleaseBarrier  // a CTA barrier per iteration
	DQRed           = core.DQRed           // dQ added by red per element (the default)
	DQTMA           = core.DQTMA           // dQ added by TMA tensor reductions where they apply
	DQBulk          = core.DQBulk          // dQ added from shared memory by cp.reduce.async.bulk per row
)

// ParseTargetConfig is the config for arch with opts (NAME=VALUE, or
// comma-separated lists of them) set in order; the error names the bad
// option and the values it takes.
func ParseTargetConfig(arch string, opts ...string) (TargetConfig, error) {
	return core.ParseTargetConfig(arch, opts...)
}

// TargetOptions describes the switches, one "NAME=VALUES: meaning" line
// each, for help texts.
func TargetOptions() []string { return core.TargetOptions() }
