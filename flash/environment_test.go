package flash

import (
	"strings"
	"testing"
	"time"

	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/runtime/gpu"
)

// TestReadEnvironment: the documented variables set the switches and the
// device's settings as they always did (unknown values of the switches
// ignored); unusable values of the others are errors naming them.
func TestReadEnvironment(t *testing.T) {
	read := func(vars map[string]string) (Environment, error) {
		return readEnvironment(func(k string) string { return vars[k] })
	}
	e, err := read(nil)
	if err != nil || e != (Environment{}) {
		t.Errorf("empty environment: %+v, %v", e, err)
	}
	e, err = read(map[string]string{EnvWGMMA: "0", EnvTMA: "0", EnvDQBulk: "1", EnvTMAStore: "1", EnvCTAsPerSM: "2",
		EnvArch: "sm_80", "FAC_CACHE_DIR": "/tmp/c", "FAC_LLC": "/opt/llc", "FAC_LLC_TIMEOUT": "90", EnvPersistentPrograms: "132", EnvBenchSync: "1"})
	want := Environment{
		Target: codegen.TargetConfig{NoWGMMA: true, NoTMA: true, DQ: codegen.DQBulk, TMAStore: true, CTAsPerSM: 2},
		GPU:    gpu.Config{Arch: "sm_80", CacheDir: "/tmp/c", LLC: llc.Config{Path: "/opt/llc", Timeout: 90 * time.Second}, PersistentPrograms: 132, BenchSync: true},
	}
	if err != nil || e != want {
		t.Errorf("read %+v, %v; want %+v", e, err, want)
	}
	if e, _ := read(map[string]string{EnvTMA: "barrier"}); e.Target != (codegen.TargetConfig{Release: codegen.ReleaseBarrier}) {
		t.Errorf("FAC_TMA=barrier: %+v", e.Target)
	}
	// Values other than the documented ones leave the switches alone.
	e, err = read(map[string]string{EnvWGMMA: "1", EnvTMA: "off", EnvDQBulk: "yes", EnvTMAStore: "0", EnvCTAsPerSM: "1", EnvBenchSync: "true"})
	if err != nil || e != (Environment{}) {
		t.Errorf("other values: %+v, %v", e, err)
	}
	if e, _ := read(map[string]string{EnvCTAsPerSM: "two"}); e.Target.CTAsPerSM != 0 {
		t.Errorf("FAC_CTAS_PER_SM=two: %d", e.Target.CTAsPerSM)
	}
	_, err = read(map[string]string{"FAC_LLC_TIMEOUT": "soon", EnvPersistentPrograms: "0"})
	if err == nil || !strings.Contains(err.Error(), `FAC_LLC_TIMEOUT="soon": want a positive duration`) ||
		!strings.Contains(err.Error(), `FAC_PERSISTENT_PROGRAMS="0": want a positive count of programs`) {
		t.Errorf("bad values: %v", err)
	}
}

// TestOptionsTarget: a compile's switches are Options.Target's, those left
// at their defaults taking the environment's.
func TestOptionsTarget(t *testing.T) {
	env := envTarget()
	o := Options{Target: codegen.TargetConfig{Arch: "sm_90a", CTAsPerSM: 3}}
	if got, want := o.target(), o.Target.Or(env); got != want || got.CTAsPerSM != 3 || got.Arch != "sm_90a" {
		t.Errorf("target %+v, want %+v", got, want)
	}
}

// TestTargetReachesIdentity: Options.Target's switches shape the tuned
// arguments and name the kernel's variant on the arch it is built for.
func TestTargetReachesIdentity(t *testing.T) {
	if envTarget() != (codegen.TargetConfig{}) {
		t.Skip("the environment sets target switches")
	}
	for _, c := range []struct {
		target  codegen.TargetConfig
		variant string
		blockM  string
	}{
		{codegen.TargetConfig{Arch: "sm_90a"}, "wgmma", "64"}, // D = 64's consumer groups
		{codegen.TargetConfig{Arch: "sm_90a", NoTMA: true}, "wgmma-cpasync", "128"},
		{codegen.TargetConfig{NoTMA: true}, "wgmma-cpasync", "64"}, // no arch: the defaults, the switch kept
		{codegen.TargetConfig{Arch: "sm_90a", NoWGMMA: true}, "", "64"},
	} {
		fwd, err := CompileForward(Options{Mask: "causal", DType: "bf16", Target: c.target}, 64)
		if err != nil {
			t.Fatal(err)
		}
		id := compiler.Identity(fwd.Result(), "sm_90a", nil)
		if id.Variant != c.variant || id.Consts["BLOCK_M"] != c.blockM {
			t.Errorf("%+v: variant %q, BLOCK_M %s; want %q, %s", c.target, id.Variant, id.Consts["BLOCK_M"], c.variant, c.blockM)
		}
		if id := compiler.Identity(fwd.Result(), "sm_80", nil); id.Variant != "" {
			t.Errorf("%+v on sm_80: variant %q", c.target, id.Variant)
		}
	}
}
