package core

import (
	"fmt"
	"strconv"
	"strings"
)

// TargetConfig is what a kernel's code is generated for: the GPU arch and
// the switches that shape the code without being compile-time arguments
// of the kernel (opt-outs and experiments). The zero value of every switch
// is the default code. A switch is ignored where it does not apply
// (Effective): all of them off sm_90a's wgmma path, and TMA's (release,
// dq, tma-store) without TMA. The switches that change the code name the
// kernel's variant (Variant), part of its identity, so that kernels built
// with and without them never share a cache entry or a bundle slot.
//
// As text, each switch is an option NAME=VALUE (Set, Opts; TargetOptions
// lists them).
type TargetConfig struct {
	// Arch is the GPU: sm_80 or newer (sm_80, sm_86, sm_89, sm_90,
	// sm_90a, ...). Where a config is given before the GPU is known (an
	// API call that runs on a device), "" stands for the device's.
	Arch string
	// NoWGMMA lowers sm_90a's 16-bit dots with mma.sync, as sm_80 does,
	// instead of wgmma (wgmma=off).
	NoWGMMA bool
	// NoTMA stages wgmma operands with cp.async instead of TMA (tma=off);
	// TMA needs 16-byte aligned tensors and strides, cp.async does not.
	NoTMA bool
	// Release is how a pipelined TMA tile's buffers are handed back for
	// the next copy (release=).
	Release ReleaseMode
	// DQ is how f32 atomic_add tiles in loops (the backward's dQ) reach
	// global memory (dq=).
	DQ DQPath
	// TMAStore writes every eligible stored tile by TMA (tma-store=on);
	// without it only kernels whose tma_store argument asks do.
	TMAStore bool
	// NoRiders keeps a pipelined loop's vector loads (the backward's LSE
	// and Δ rows) as loads instead of copying them with a TMA tile
	// (riders=off; sm90's tma-riders).
	NoRiders bool
	// CTAsPerSM, 2 to MaxCTAsPerSM, asks ptxas to fit that many CTAs on a
	// multiprocessor in every kernel, in place of each kernel's own
	// ctas_per_sm argument (ctas-per-sm=N); 0 keeps the kernel's. Kernels
	// with a producer warpgroup keep one, and say so in a note.
	CTAsPerSM int
}

// ReleaseMode is how a pipelined TMA tile's buffers go back to the copy
// that refills them.
type ReleaseMode uint8

const (
	// ReleaseCounters: the last warpgroup to release a buffer refills it
	// (release counters), or the warpgroups arrive on its empty mbarrier
	// for a producer warpgroup; no CTA barrier per iteration (the
	// default).
	ReleaseCounters ReleaseMode = iota
	// ReleaseBarrier keeps a CTA barrier per iteration, after which thread
	// 0 refills (release=barrier).
	ReleaseBarrier
)

// DQPath is how an f32 atomic_add tile in a loop (the backward's dQ) is
// added to global memory.
type DQPath uint8

const (
	// DQRed, the default, adds each element with a red (vectorized where
	// a thread's registers are adjacent).
	DQRed DQPath = iota
	// DQTMA adds the tile by TMA tensor reductions from a staging tile in
	// shared memory where the tile and its pointers allow it (sm90's
	// tma-reduce), else by reds (dq=tma).
	DQTMA
	// DQBulk stages the tile in shared memory and adds its rows with
	// cp.reduce.async.bulk (dq=bulk; codegen/async's bulk reductions).
	DQBulk
)

// WGMMA reports whether the config lowers 16-bit dots to wgmma: on sm_90a
// unless NoWGMMA.
func (c TargetConfig) WGMMA() bool { return c.Arch == "sm_90a" && !c.NoWGMMA }

// TMA reports whether staged wgmma tiles may be copied by TMA.
func (c TargetConfig) TMA() bool { return c.WGMMA() && !c.NoTMA }

// Effective is c with the switches that do not apply to its arch, or to
// the switches they depend on, at their defaults: the code c gives.
func (c TargetConfig) Effective() TargetConfig {
	e := TargetConfig{Arch: c.Arch}
	if c.Arch == "sm_90a" && c.NoWGMMA {
		e.NoWGMMA = true
	}
	if !c.WGMMA() {
		return e
	}
	if c.CTAsPerSM > 1 {
		e.CTAsPerSM = c.CTAsPerSM
	}
	if c.NoTMA {
		e.NoTMA = true
		return e
	}
	e.Release, e.DQ, e.TMAStore, e.NoRiders = c.Release, c.DQ, c.TMAStore, c.NoRiders
	return e
}

// Variant names the code-shaping choices c makes for its arch, for the
// kernel's identity (artifact.Ident.Variant) and the contracts' tuned
// sets: "" off the wgmma path (every arch but sm_90a, and wgmma=off);
// "wgmma", then "-cpasync" (tma=off), "-tmabarrier" (release=barrier),
// "-dqbulk" (dq=bulk), "-tmastore" (tma-store=on), "-noriders"
// (riders=off) and "-ctas<n>" (ctas-per-sm=n) for each switch that
// applies, in that order ("wgmma-cpasync-ctas2").
func (c TargetConfig) Variant() string { return strings.Join(c.variantWords(), "-") }

// TuneVariants are the variants whose tuned sets c takes, in order of
// preference: its own (Variant), then each one it extends, shortest last
// (wgmma-cpasync-ctas2, wgmma-cpasync, wgmma): a code choice shares the
// tuned sets of the path it modifies unless a contract tunes it apart.
func (c TargetConfig) TuneVariants() []string {
	w := c.variantWords()
	if len(w) == 0 {
		return []string{""}
	}
	out := make([]string, 0, len(w))
	for n := len(w); n > 0; n-- {
		out = append(out, strings.Join(w[:n], "-"))
	}
	return out
}

func (c TargetConfig) variantWords() []string {
	e := c.Effective()
	if !e.WGMMA() {
		return nil
	}
	w := []string{"wgmma"}
	if e.NoTMA {
		w = append(w, "cpasync")
	}
	if e.Release == ReleaseBarrier {
		w = append(w, "tmabarrier")
	}
	switch e.DQ {
	case DQTMA:
		w = append(w, "dqtma")
	case DQBulk:
		w = append(w, "dqbulk")
	}
	if e.TMAStore {
		w = append(w, "tmastore")
	}
	if e.NoRiders {
		w = append(w, "noriders")
	}
	if e.CTAsPerSM > 1 {
		w = append(w, fmt.Sprintf("ctas%d", e.CTAsPerSM))
	}
	return w
}

// Or is c with each switch it leaves at its default, and Arch when
// empty, taken from d (d a fallback, such as the environment's).
func (c TargetConfig) Or(d TargetConfig) TargetConfig {
	if c.Arch == "" {
		c.Arch = d.Arch
	}
	c.NoWGMMA = c.NoWGMMA || d.NoWGMMA
	c.NoTMA = c.NoTMA || d.NoTMA
	if c.Release == ReleaseCounters {
		c.Release = d.Release
	}
	if c.DQ == DQRed {
		c.DQ = d.DQ
	}
	c.TMAStore = c.TMAStore || d.TMAStore
	c.NoRiders = c.NoRiders || d.NoRiders
	if c.CTAsPerSM == 0 {
		c.CTAsPerSM = d.CTAsPerSM
	}
	return c
}

// targetOption is one NAME=VALUE switch of TargetConfig.
type targetOption struct {
	name, values, help string
	get                func(c *TargetConfig) string // the canonical value
	set                func(c *TargetConfig, v string) error
}

// onOff parses a toggle's value.
func onOff(v string) (bool, error) {
	switch v {
	case "on", "true", "1":
		return true, nil
	case "off", "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("want on or off")
}

func onOffString(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// toggle is an on|off switch held in the bool field gives; off, when the
// field says "no" (NoTMA), holds it inverted.
func toggle(name, help string, field func(*TargetConfig) *bool, off bool) targetOption {
	return targetOption{name, "on|off", help,
		func(c *TargetConfig) string { return onOffString(*field(c) != off) },
		func(c *TargetConfig, v string) error {
			on, err := onOff(v)
			*field(c) = on != off
			return err
		}}
}

// targetOptions are the switches, in their canonical order.
var targetOptions = []targetOption{
	toggle("wgmma", "sm_90a's 16-bit dots on wgmma (on), or on mma.sync as sm_80's", func(c *TargetConfig) *bool { return &c.NoWGMMA }, true),
	toggle("tma", "wgmma operands copied by TMA (on), or by cp.async, which takes tensors of any alignment", func(c *TargetConfig) *bool { return &c.NoTMA }, true),
	{"release", "counters|barrier", "a pipelined TMA tile's buffers handed back by release counters (counters), or by a CTA barrier per iteration",
		func(c *TargetConfig) string {
			if c.Release == ReleaseBarrier {
				return "barrier"
			}
			return "counters"
		},
		func(c *TargetConfig, v string) error {
			switch v {
			case "counters":
				c.Release = ReleaseCounters
			case "barrier":
				c.Release = ReleaseBarrier
			default:
				return fmt.Errorf("want counters or barrier")
			}
			return nil
		}},
	{"dq", "red|tma|bulk", "f32 atomic_add tiles in loops (the backward's dQ) added by a red per element (red), by TMA tensor reductions from shared memory where they can be (tma), or by a cp.reduce.async.bulk per row",
		func(c *TargetConfig) string {
			switch c.DQ {
			case DQTMA:
				return "tma"
			case DQBulk:
				return "bulk"
			}
			return "red"
		},
		func(c *TargetConfig, v string) error {
			switch v {
			case "red":
				c.DQ = DQRed
			case "tma":
				c.DQ = DQTMA
			case "bulk":
				c.DQ = DQBulk
			default:
				return fmt.Errorf("want red, tma or bulk")
			}
			return nil
		}},
	toggle("tma-store", "every eligible stored tile written by TMA (on), or only where a kernel's tma_store argument asks (off)", func(c *TargetConfig) *bool { return &c.TMAStore }, false),
	toggle("riders", "a pipelined loop's contiguous vector loads (the backward's LSE and Δ rows) copied with its first TMA tile (on), or loaded by each thread", func(c *TargetConfig) *bool { return &c.NoRiders }, true),
	{"ctas-per-sm", "N", fmt.Sprintf("ptxas asked to fit N (2 to %d) CTAs a multiprocessor in every kernel, over each kernel's ctas_per_sm (0: the kernel's own)", MaxCTAsPerSM),
		func(c *TargetConfig) string { return strconv.Itoa(c.CTAsPerSM) },
		func(c *TargetConfig, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n == 1 || n > MaxCTAsPerSM {
				return fmt.Errorf("want 2 to %d CTAs a multiprocessor (0: each kernel's own ctas_per_sm)", MaxCTAsPerSM)
			}
			c.CTAsPerSM = n
			return nil
		}},
}

// TargetOptions describes the switches, one "NAME=VALUES: meaning" line
// each, for help texts.
func TargetOptions() []string {
	out := make([]string, len(targetOptions))
	for i, o := range targetOptions {
		out[i] = o.name + "=" + o.values + ": " + o.help
	}
	return out
}

// TargetOptionNames are the switches' names, in canonical order.
func TargetOptionNames() []string {
	out := make([]string, len(targetOptions))
	for i, o := range targetOptions {
		out[i] = o.name
	}
	return out
}

// Set sets the switches of opts: NAME=VALUE, or several separated by
// commas ("tma=off,ctas-per-sm=2"); names take '-' or '_'. A later
// option overrides an earlier one. The error names the option and the
// values it takes.
func (c *TargetConfig) Set(opts string) error {
	for _, opt := range strings.Split(opts, ",") {
		opt = strings.TrimSpace(opt)
		name, v, ok := strings.Cut(opt, "=")
		name, v = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "_", "-"), strings.TrimSpace(v)
		if !ok || name == "" || v == "" {
			return fmt.Errorf("target option %q: want NAME=VALUE (%s)", opt, strings.Join(TargetOptionNames(), ", "))
		}
		o := lookupTargetOption(name)
		if o == nil {
			return fmt.Errorf("target option %q: unknown name %q (options: %s)", opt, name, strings.Join(TargetOptionNames(), ", "))
		}
		if err := o.set(c, strings.ToLower(v)); err != nil {
			return fmt.Errorf("target option %s=%s: %v", o.name, v, err)
		}
	}
	return nil
}

func lookupTargetOption(name string) *targetOption {
	for i := range targetOptions {
		if targetOptions[i].name == name {
			return &targetOptions[i]
		}
	}
	return nil
}

// ParseTargetConfig is the config for arch with opts set in order (each
// NAME=VALUE or a comma-separated list of them; see Set).
func ParseTargetConfig(arch string, opts ...string) (TargetConfig, error) {
	c := TargetConfig{Arch: arch}
	for _, o := range opts {
		if err := c.Set(o); err != nil {
			return TargetConfig{}, err
		}
	}
	return c, nil
}

// Opts are c's switches that differ from their defaults as NAME=VALUE, in
// canonical order: Set of them gives c's switches back. Empty for the
// defaults.
func (c TargetConfig) Opts() []string {
	var out []string
	def := TargetConfig{}
	for _, o := range targetOptions {
		if v := o.get(&c); v != o.get(&def) {
			out = append(out, o.name+"="+v)
		}
	}
	return out
}

// String is the arch followed by Opts, comma-separated: "sm_90a
// tma=off,ctas-per-sm=2", "sm_90a", "tma=off" (no arch yet), "" (no arch,
// the defaults).
func (c TargetConfig) String() string {
	opts := strings.Join(c.Opts(), ",")
	switch {
	case c.Arch == "":
		return opts
	case opts == "":
		return c.Arch
	}
	return c.Arch + " " + opts
}
