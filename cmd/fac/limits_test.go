package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCheckLimits: fac check ends quickly with a positioned error on
// inputs that used to overflow the stack, fill memory or check as
// something else.
func TestCheckLimits(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	timed := func(args ...string) cliResult {
		t.Helper()
		start := time.Now()
		r := runFac(t, "", args...)
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("fac %s took %v", strings.Join(args, " "), d)
		}
		return r
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		wantFail(t, timed("check", "/dev/zero"), "fac: /dev/zero: source file is larger than 1 MiB, the limit for one file")
	}
	big := write("big.fa", "// "+strings.Repeat("x", 1<<20)+"\n")
	wantFail(t, timed("check", big), big+": source file is larger than 1 MiB")

	parens := write("parens.fa", "mask m(b, h, q_idx, kv_idx) {\n    return "+strings.Repeat("(", 50000)+"q_idx >= kv_idx"+strings.Repeat(")", 50000)+"\n}\n")
	r := timed("check", parens)
	wantFail(t, r, parens+":2:111: nesting too deep")
	if strings.Contains(r.stderr, "stack overflow") {
		t.Errorf("stack overflow:\n%.500s", r.stderr)
	}

	floor := write("floor.fa", "mask m(b, h, q_idx, kv_idx) {\n    return q_idx // 16 >= kv_idx // 16\n}\n")
	wantFail(t, timed("check", floor), floor+":2:18: // is not an operator (Python's floor division)")

	tile := write("tile.fa", "kernel k(o: ptr[f32]) {\n    store(o, sum(sum(zeros([65536, 65536], f32), axis=0), axis=0))\n}\n")
	wantFail(t, timed("check", tile), tile+":2:27: zeros makes a tile of 4294967296 elements")
}
