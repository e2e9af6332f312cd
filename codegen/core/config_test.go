package core

import (
	"slices"
	"strings"
	"testing"
)

// TestTargetConfigDefaults: the zero value's switches are the default
// code on every arch: wgmma with TMA and release counters on sm_90a, the
// mma.sync path elsewhere, and no variant but sm_90a's "wgmma".
func TestTargetConfigDefaults(t *testing.T) {
	for arch, want := range map[string]string{"": "", "sm_80": "", "sm_86": "", "sm_90": "", "sm_90a": "wgmma", "sm_100a": ""} {
		c := TargetConfig{Arch: arch}
		if v := c.Variant(); v != want {
			t.Errorf("%s: variant %q, want %q", arch, v, want)
		}
		if c.WGMMA() != (arch == "sm_90a") || c.TMA() != (arch == "sm_90a") {
			t.Errorf("%s: WGMMA %v, TMA %v", arch, c.WGMMA(), c.TMA())
		}
		if len(c.Opts()) != 0 || c.String() != arch {
			t.Errorf("%s: opts %q, string %q", arch, c.Opts(), c.String())
		}
		if e := c.Effective(); e != c {
			t.Errorf("%s: effective %+v", arch, e)
		}
	}
	// Options set to their defaults give the zero value back.
	c, err := ParseTargetConfig("sm_90a", "wgmma=on", "tma=on", "release=counters", "dq=red", "tma-store=off", "ctas-per-sm=0")
	if err != nil || c != (TargetConfig{Arch: "sm_90a"}) {
		t.Errorf("defaults spelled out: %+v, %v", c, err)
	}
}

// TestTargetConfigVariant: the variants are the ones kernel identities,
// cache keys and bundle slots have always had, each switch counting only
// where it applies; TuneVariants lists the variant and each one it extends.
func TestTargetConfigVariant(t *testing.T) {
	for _, c := range []struct {
		arch string
		opts []string
		want string
		tune []string
	}{
		{"sm_90a", nil, "wgmma", []string{"wgmma"}},
		{"sm_90a", []string{"wgmma=off"}, "", []string{""}},
		{"sm_90a", []string{"tma=off"}, "wgmma-cpasync", []string{"wgmma-cpasync", "wgmma"}},
		{"sm_90a", []string{"release=barrier"}, "wgmma-tmabarrier", []string{"wgmma-tmabarrier", "wgmma"}},
		{"sm_90a", []string{"dq=bulk"}, "wgmma-dqbulk", []string{"wgmma-dqbulk", "wgmma"}},
		{"sm_90a", []string{"dq=tma"}, "wgmma-dqtma", []string{"wgmma-dqtma", "wgmma"}},
		{"sm_90a", []string{"dq=tma", "tma=off"}, "wgmma-cpasync", []string{"wgmma-cpasync", "wgmma"}},
		{"sm_90a", []string{"tma-store=on"}, "wgmma-tmastore", []string{"wgmma-tmastore", "wgmma"}},
		{"sm_90a", []string{"ctas-per-sm=2"}, "wgmma-ctas2", []string{"wgmma-ctas2", "wgmma"}},
		{"sm_90a", []string{"tma=off", "ctas-per-sm=2"}, "wgmma-cpasync-ctas2", []string{"wgmma-cpasync-ctas2", "wgmma-cpasync", "wgmma"}},
		{"sm_90a", []string{"release=barrier,tma-store=on"}, "wgmma-tmabarrier-tmastore", []string{"wgmma-tmabarrier-tmastore", "wgmma-tmabarrier", "wgmma"}},
		{"sm_90a", []string{"dq=bulk", "tma-store=on", "ctas-per-sm=3"}, "wgmma-dqbulk-tmastore-ctas3", []string{"wgmma-dqbulk-tmastore-ctas3", "wgmma-dqbulk-tmastore", "wgmma-dqbulk", "wgmma"}},
		// Both choices of the copy's release and dQ's path: a variant of
		// their own (the two once shared wgmma-tmabarrier's).
		{"sm_90a", []string{"release=barrier", "dq=bulk"}, "wgmma-tmabarrier-dqbulk", []string{"wgmma-tmabarrier-dqbulk", "wgmma-tmabarrier", "wgmma"}},
		// Without TMA, its switches do not apply.
		{"sm_90a", []string{"tma=off", "release=barrier", "dq=bulk", "tma-store=on"}, "wgmma-cpasync", []string{"wgmma-cpasync", "wgmma"}},
		// Without wgmma, none does.
		{"sm_90a", []string{"wgmma=off", "tma=off", "ctas-per-sm=2"}, "", []string{""}},
		{"sm_80", []string{"tma=off", "dq=bulk", "ctas-per-sm=2"}, "", []string{""}},
		{"sm_90", []string{"tma-store=on"}, "", []string{""}},
	} {
		cfg, err := ParseTargetConfig(c.arch, c.opts...)
		if err != nil {
			t.Fatalf("%s %q: %v", c.arch, c.opts, err)
		}
		if v := cfg.Variant(); v != c.want {
			t.Errorf("%s %q: variant %q, want %q", c.arch, c.opts, v, c.want)
		}
		if tv := cfg.TuneVariants(); !slices.Equal(tv, c.tune) {
			t.Errorf("%s %q: tune variants %q, want %q", c.arch, c.opts, tv, c.tune)
		}
		if e := cfg.Effective(); e.Variant() != c.want || e.Effective() != e {
			t.Errorf("%s %q: effective %+v", c.arch, c.opts, e)
		}
	}
}

// TestTargetConfigParse: options by name, as lists, in any case and with
// '_' for '-'; a later one wins; errors name the option and what it takes.
func TestTargetConfigParse(t *testing.T) {
	c, err := ParseTargetConfig("sm_90a", "wgmma=off", " TMA = OFF , release=barrier", "dq=bulk,tma_store=on", "ctas_per_sm=4", "ctas-per-sm=2")
	want := TargetConfig{Arch: "sm_90a", NoWGMMA: true, NoTMA: true, Release: ReleaseBarrier, DQ: DQBulk, TMAStore: true, CTAsPerSM: 2}
	if err != nil || c != want {
		t.Errorf("parsed %+v, %v; want %+v", c, err, want)
	}
	for _, v := range []string{"on", "true", "1"} {
		if c, err := ParseTargetConfig("", "tma-store="+v); err != nil || !c.TMAStore {
			t.Errorf("tma-store=%s: %+v, %v", v, c, err)
		}
	}
	for _, v := range []string{"off", "false", "0"} {
		if c, err := ParseTargetConfig("", "tma="+v); err != nil || !c.NoTMA {
			t.Errorf("tma=%s: %+v, %v", v, c, err)
		}
	}
	for opt, msg := range map[string]string{
		"wgmma=maybe":    `target option wgmma=maybe: want on or off`,
		"tma=2":          `target option tma=2: want on or off`,
		"release=fence":  `target option release=fence: want counters or barrier`,
		"dq=atomic":      `target option dq=atomic: want red, tma or bulk`,
		"tma-store=yes":  `target option tma-store=yes: want on or off`,
		"riders=no":      `target option riders=no: want on or off`,
		"ctas-per-sm=1":  `target option ctas-per-sm=1: want 2 to 32 CTAs a multiprocessor (0: each kernel's own ctas_per_sm)`,
		"ctas-per-sm=33": `target option ctas-per-sm=33: want 2 to 32`,
		"ctas-per-sm=-2": `target option ctas-per-sm=-2: want 2 to 32`,
		"ctas-per-sm=x":  `target option ctas-per-sm=x: want 2 to 32`,
		"tma":            `target option "tma": want NAME=VALUE (wgmma, tma, release, dq, tma-store, riders, ctas-per-sm)`,
		"tma=":           `target option "tma=": want NAME=VALUE`,
		"=off":           `target option "=off": want NAME=VALUE`,
		"":               `target option "": want NAME=VALUE`,
		"tma=off,":       `target option "": want NAME=VALUE`,
		"wgmm=off":       `target option "wgmm=off": unknown name "wgmm" (options: wgmma, tma, release, dq, tma-store, riders, ctas-per-sm)`,
		"arch=sm_80":     `target option "arch=sm_80": unknown name "arch"`,
	} {
		if _, err := ParseTargetConfig("sm_90a", opt); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: err %v, want %q", opt, err, msg)
		}
	}
	var c2 TargetConfig
	if err := c2.Set("dq=bulk,nope=1"); err == nil || c2.DQ != DQBulk {
		t.Errorf("Set applies the options before the bad one: %+v, %v", c2, err)
	}
}

// TestTargetConfigString: Opts lists the switches away from their
// defaults in one order, and setting them gives the config back.
func TestTargetConfigString(t *testing.T) {
	c := TargetConfig{Arch: "sm_90a", NoWGMMA: true, NoTMA: true, Release: ReleaseBarrier, DQ: DQBulk, TMAStore: true, NoRiders: true, CTAsPerSM: 2}
	want := []string{"wgmma=off", "tma=off", "release=barrier", "dq=bulk", "tma-store=on", "riders=off", "ctas-per-sm=2"}
	if got := c.Opts(); !slices.Equal(got, want) {
		t.Errorf("opts %q, want %q", got, want)
	}
	if s := c.String(); s != "sm_90a wgmma=off,tma=off,release=barrier,dq=bulk,tma-store=on,riders=off,ctas-per-sm=2" {
		t.Errorf("string %q", s)
	}
	back, err := ParseTargetConfig(c.Arch, c.Opts()...)
	if err != nil || back != c {
		t.Errorf("parsed back %+v, %v", back, err)
	}
	back, err = ParseTargetConfig(c.Arch, strings.Join(c.Opts(), ","))
	if err != nil || back != c {
		t.Errorf("parsed back from one list %+v, %v", back, err)
	}
	for _, c := range []struct {
		c    TargetConfig
		want string
	}{
		{TargetConfig{}, ""},
		{TargetConfig{NoTMA: true}, "tma=off"},
		{TargetConfig{Arch: "sm_80", CTAsPerSM: 3, DQ: DQBulk}, "sm_80 dq=bulk,ctas-per-sm=3"},
	} {
		if s := c.c.String(); s != c.want {
			t.Errorf("%+v: %q, want %q", c.c, s, c.want)
		}
	}
	if n := len(TargetOptions()); n != len(TargetOptionNames()) || n != 7 || !strings.HasPrefix(TargetOptions()[0], "wgmma=on|off: ") {
		t.Errorf("TargetOptions %q", TargetOptions())
	}
}

// TestTargetConfigOr: a switch left at its default takes the fallback's.
func TestTargetConfigOr(t *testing.T) {
	env := TargetConfig{NoTMA: true, DQ: DQBulk, CTAsPerSM: 2}
	got := TargetConfig{Arch: "sm_90a", TMAStore: true, CTAsPerSM: 4}.Or(env)
	want := TargetConfig{Arch: "sm_90a", NoTMA: true, DQ: DQBulk, TMAStore: true, CTAsPerSM: 4}
	if got != want {
		t.Errorf("Or: %+v, want %+v", got, want)
	}
	if got := (TargetConfig{}).Or(TargetConfig{Arch: "sm_80", Release: ReleaseBarrier, NoWGMMA: true}); got != (TargetConfig{Arch: "sm_80", Release: ReleaseBarrier, NoWGMMA: true}) {
		t.Errorf("zero Or: %+v", got)
	}
	if got := want.Or(TargetConfig{}); got != want {
		t.Errorf("Or zero: %+v", got)
	}
}

// TestTargetConfigVariantAsBefore compares Variant and TuneVariants with
// the variant string the environment variables gave before the typed
// config (codegen.Variant, and the compiler trimming it at each "-"), for
// every combination of the switches: the same, except where release=barrier
// and dq=bulk met, which shared wgmma-tmabarrier though their code differs.
func TestTargetConfigVariantAsBefore(t *testing.T) {
	old := func(c TargetConfig) string {
		w := c.Arch == "sm_90a" && !c.NoWGMMA
		tma := w && !c.NoTMA
		release, dqBulk, tmaStore := tma && c.Release == ReleaseCounters, tma && c.DQ == DQBulk, tma && c.TMAStore
		if !w {
			return ""
		}
		v := "wgmma"
		switch {
		case !tma:
			v = "wgmma-cpasync"
		case !release:
			v = "wgmma-tmabarrier"
		case dqBulk:
			v = "wgmma-dqbulk"
		}
		if tmaStore {
			v += "-tmastore"
		}
		if c.CTAsPerSM > 1 {
			v += "-ctas" + string(rune('0'+c.CTAsPerSM))
		}
		return v
	}
	oldTune := func(v string) []string {
		var keys []string
		for {
			keys = append(keys, v)
			i := strings.LastIndex(v, "-")
			if i < 0 {
				return keys
			}
			v = v[:i]
		}
	}
	n := 0
	for _, arch := range []string{"sm_80", "sm_90", "sm_90a"} {
		for bits := 0; bits < 1<<6; bits++ {
			c := TargetConfig{Arch: arch, NoWGMMA: bits&1 != 0, NoTMA: bits&2 != 0, TMAStore: bits&16 != 0}
			if bits&4 != 0 {
				c.Release = ReleaseBarrier
			}
			if bits&8 != 0 {
				c.DQ = DQBulk
			}
			if bits&32 != 0 {
				c.CTAsPerSM = 2
			}
			want := old(c)
			if e := c.Effective(); e.Release == ReleaseBarrier && e.DQ == DQBulk {
				continue
			}
			n++
			if got := c.Variant(); got != want {
				t.Errorf("%+v: variant %q, before %q", c, got, want)
			}
			if got := c.TuneVariants(); !slices.Equal(got, oldTune(want)) {
				t.Errorf("%+v: tune variants %q, before %q", c, got, oldTune(want))
			}
		}
	}
	t.Logf("%d configurations", n)
}
