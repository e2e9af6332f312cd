package tests

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// TestPersistentForward runs flash_fwd and flash_fwd_sinks compiled with
// persistent = true on the reference device, where each program loops over
// several tiles of the logical grid: against the reference, and bit for
// bit against the non-persistent kernel, at odd lengths (a partial last q
// tile, partial kv blocks), with grouped-query heads and masks that skip
// blocks (causal, a window) or read an aux tensor (document).
func TestPersistentForward(t *testing.T) {
	sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 127, SeqK: 257, Dim: dim}
	// 2 q tiles × B·H = 16 tiles, on PersistentPrograms(16) programs.
	if p := cpu.PersistentPrograms(16); p >= 16 || p < 2 {
		t.Fatalf("PersistentPrograms(16) = %d: the test wants several tiles per program", p)
	}
	in := inputs(sh, 5)
	for _, m := range masks {
		if !slices.Contains([]string{"causal", "sliding_window(20, 3)", "document"}, m.expr) {
			continue
		}
		for _, sinks := range []bool{false, true} {
			name := fmt.Sprintf("%s/sinks=%v", m.expr, sinks)
			var outs [2][2][]float32
			for i, consts := range []map[string]string{nil, {"persistent": "true"}} {
				fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, Sinks: sinks, Consts: consts}, dim)
				if err != nil {
					t.Fatal(err)
				}
				if hasGridParams(fwd) != (i == 1) {
					t.Fatalf("%s: kernel %d has the grid parameters: %v", name, i, hasGridParams(fwd))
				}
				args := only(fwd, in)
				if sinks {
					args.Sinks = []float32{12, -30, 0.5, -1}
				}
				if outs[i][0], outs[i][1], err = fwd.RunCPU(args, sh); err != nil {
					t.Fatal(err)
				}
			}
			if !sinks {
				ro, rlse := goReference(in, sh, m.fn, nil)
				check(t, name, outs[1][0], outs[1][1], ro, rlse, sh, 1e-5)
			}
			for j, out := range []string{"O", "LSE"} {
				if i := firstDiff(outs[1][j], outs[0][j]); i >= 0 {
					t.Errorf("%s: %s[%d] = %v, the non-persistent kernel's %v", name, out, i, outs[1][j][i], outs[0][j][i])
				}
			}
		}
	}
}

// hasGridParams reports whether fwd's kernel ends with the persistent
// pass's parameters (the grid's and the tile order).
func hasGridParams(fwd *fac.Forward) bool {
	var names []string
	for _, p := range fwd.Result().Params() {
		names = append(names, p.Name)
	}
	return len(names) >= 5 && slices.Equal(names[len(names)-5:], append(slices.Clone(tir.GridParams), tir.GridOrder))
}

// firstDiff is the first index where a and b differ bitwise, -1 if none.
func firstDiff(a, b []float32) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestHeadsMinorForward: flash_fwd with heads_minor (the grid ordered by q
// tile first), plain and persistent, computes bit for bit what the
// heads-major kernel does, at odd lengths with grouped-query heads.
func TestHeadsMinorForward(t *testing.T) {
	sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 127, SeqK: 257, Dim: dim}
	in := inputs(sh, 6)
	for _, m := range masks {
		if !slices.Contains([]string{"causal", "sliding_window(20, 3)", "document"}, m.expr) {
			continue
		}
		var outs [3][2][]float32
		for i, consts := range []map[string]string{nil, {"heads_minor": "true"}, {"heads_minor": "true", "persistent": "true"}} {
			fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, Consts: consts}, dim)
			if err != nil {
				t.Fatal(err)
			}
			if outs[i][0], outs[i][1], err = fwd.RunCPU(only(fwd, in), sh); err != nil {
				t.Fatal(err)
			}
		}
		ro, rlse := goReference(in, sh, m.fn, nil)
		check(t, m.expr, outs[1][0], outs[1][1], ro, rlse, sh, 1e-5)
		for k := 1; k < 3; k++ {
			for j, out := range []string{"O", "LSE"} {
				if i := firstDiff(outs[k][j], outs[0][j]); i >= 0 {
					t.Errorf("%s, build %d: %s[%d] = %v, the heads-major kernel's %v", m.expr, k, out, i, outs[k][j][i], outs[0][j][i])
				}
			}
		}
	}
}
