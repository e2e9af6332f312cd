package main

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/compiler"
)

// TestPatch patches the tuned sm_90a flash_fwd (causal) through a bundle:
// every stamp goes in once, in program order, and the bundle reads back.
func TestPatch(t *testing.T) {
	ptx, out := patched(t, map[string]string{"DTYPE": "bf16", "HEAD_DIM": "128"})
	last := -1
	for _, s := range []string{"mov.u64 %st0, %clock64;", epilogueZero, "mov.u64 %st2, %clock64;", "mov.u64 %st3, %clock64;",
		"setp.eq.u32 %stp0, %stc, 0;", "@%stp6 mov.u64 %st18, %st23;", "@%stp6 mov.u64 %st20, %st23;",
		"mov.u64 %st4, %clock64;", "mov.u64 %st5, %clock64;", "mov.u64 %st24, %clock64;", "mov.u64 %st25, %clock64;",
		"mov.u64 %st26, %clock64;", "bar.sync %str6, 128;", "st.global.v2.u64 [%st9+176], {%st22, %st23};",
		"st.global.v2.u64 [%st9+208], {%st26, %st27};"} {
		i := strings.Index(ptx, s)
		if i < 0 || strings.Count(ptx, s) != 1 || i < last {
			t.Fatalf("%q: at %d (after %d), %d times", s, i, last, strings.Count(ptx, s))
		}
		last = i
	}
	if err := run([]string{"patch", out, out}); err == nil || !strings.Contains(err.Error(), "stamped already") {
		t.Errorf("patching a patched bundle: %v, want an error", err)
	}
}

// patched is the PTX of the tuned sm_90a flash_fwd (causal) with consts,
// stamped through a bundle by the tool's patch command, and the stamped
// bundle's path.
func patched(t *testing.T, consts map[string]string) (ptx, path string) {
	t.Helper()
	tool, err := llc.Find()
	if err != nil {
		t.Skip(err)
	}
	a, err := compiler.Build(context.Background(), compiler.Request{Kernel: "flash_fwd", Mask: "causal", Target: codegen.TargetConfig{Arch: "sm_90a"},
		Consts: consts}, "sm_90a", tool, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, out := filepath.Join(t.TempDir(), "in.bundle"), filepath.Join(t.TempDir(), "out.bundle")
	b := &bundle.Bundle{}
	b.Add(*a)
	if err := bundle.Write(in, b); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"patch", in, out}); err != nil {
		t.Fatal(err)
	}
	p, err := bundle.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	return p.Kernels[0].PTX, out
}

// TestReport: the phases' medians from stamps laid out as the patch writes
// them.
func TestReport(t *testing.T) {
	lse := make([]float32, 3*128)
	for tile := 0; tile < 3; tile++ {
		set := func(slot int, v uint64) {
			lse[tile*128+2*slot] = math.Float32frombits(uint32(v))
			lse[tile*128+2*slot+1] = math.Float32frombits(uint32(v >> 32))
		}
		base := uint64(1<<33 + tile*100000)
		set(0, base)
		set(2, base+400)
		set(3, base+2400)
		for i := 0; i < 6; i++ {
			set(10+i, base+2700+uint64(3000*i))
		}
		set(4, base+30000)
		set(5, base+31200)
		set(6, base+33000)
	}
	r := report(lse)
	for _, want := range []string{"entry -> consumers start     median      400", "iteration 2                  median     3000",
		"last P·V after the loop      median     1200", "tile (entry -> exit)         median    33000"} {
		if !strings.Contains(r, want) {
			t.Errorf("no %q in\n%s", want, r)
		}
	}
}

// TestPatchPersistent patches the persistent tuned sm_90a flash_fwd
// (causal; three buffers, O stored from registers) per tile: the stamps in
// program order, the write before the branch back to the tile loop's
// header, and the kernel's LSE stores dropped.
func TestPatchPersistent(t *testing.T) {
	ptx, _ := patched(t, map[string]string{"DTYPE": "bf16", "HEAD_DIM": "128", "persistent": "true"})
	last := -1
	for _, s := range []string{"mov.u64 %st0, %clock64;", "mov.u64 %st2, %clock64;", "mov.u64 %st3, %clock64;", "mov.u64 %st4, %clock64;",
		"setp.eq.u32 %stp0, %stc, 0;", "@%stp6 mov.u64 %st18, %st23;", "@%stp6 mov.u64 %st20, %st23;",
		"mov.u64 %st5, %clock64;", "mov.u64 %st6, %clock64;", "// ptxstamp: dropped", "mov.u64 %st7, %clock64;",
		"bar.sync %str6, 128;", "st.global.v2.u64 [%sta0+176], {%st22, %st23};", "add.u32 %stk, %stk, 1;"} {
		i := strings.Index(ptx, s)
		if i < 0 || (strings.Count(ptx, s) != 1 && !strings.HasPrefix(s, "//")) || i < last {
			t.Fatalf("%q: at %d (after %d), %d times", s, i, last, strings.Count(ptx, s))
		}
		last = i
	}
	if strings.Contains(ptx[strings.Index(ptx, "setmaxnreg.inc"):], "\tst.global.b32") {
		t.Error("an LSE store of the consumers is left")
	}
	if next := strings.TrimSpace(strings.SplitN(ptx[last:], "\n", 3)[1]); !strings.HasPrefix(next, "bra.uni") {
		t.Errorf("the stamps' write is followed by %q, want the branch back to the tile loop", next)
	}
}

// TestReportPersistent: per-tile phases from stamps laid out as
// patchPersistent writes them: 4 slots on 2 programs.
func TestReportPersistent(t *testing.T) {
	lse := make([]float32, 4*128)
	for s := 0; s < 4; s++ {
		set := func(slot int, v uint64) {
			lse[s*128+2*slot] = math.Float32frombits(uint32(v))
			lse[s*128+2*slot+1] = math.Float32frombits(uint32(v >> 32))
		}
		k := uint64(s / 2)
		start := 1<<33 + 1000 + k*20000
		set(0, 1<<33)
		set(2, 1<<33+400)
		set(3, start)
		set(4, start+100)
		for i := 0; i < 6; i++ {
			set(10+i, start+300+uint64(3000*i))
		}
		set(5, start+15000)
		set(6, start+16200)
		set(7, start+17500)
		set(9, k)
		set(23, persistentMark)
	}
	if !persistentStamps(lse) {
		t.Fatal("the marker is not seen")
	}
	r := reportPersistent(lse)
	for _, want := range []string{"4 slots on 2 programs", "previous tile's end -> start     median     2500", "tile start -> Q landed           median      100",
		"iteration 1                      median     3000", "epilogue                         median     1300", "tile (start -> end)              median    17500"} {
		if !strings.Contains(r, want) {
			t.Errorf("no %q in\n%s", want, r)
		}
	}
}
