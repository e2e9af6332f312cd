package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRunSinks: --sinks runs flash_fwd_sinks and checks it against the
// reference with sinks; its length gives or must match --heads.
func TestRunSinks(t *testing.T) {
	dir := t.TempDir()
	sinks := filepath.Join(dir, "sinks.npy")
	writeF32s(t, sinks, []int{4})
	r := runFac(t, "", "run", "--mask", "sliding_window(20, 0)", "--sinks", sinks, "--kv-heads", "2",
		"--seqlen-q", "70", "--seqlen-k", "33", "--dim", "16")
	wantOK(t, r)
	for _, want := range []string{"kernel flash_fwd_sinks", "H=4 Hkv=2", "check passed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	wantFail(t, runFac(t, "", "run", "--sinks", sinks, "--heads", "3", "--seqlen-q", "8", "--seqlen-k", "8", "--dim", "16"),
		"--heads is 3", "--sinks")
	wantFail(t, runFac(t, "", "run", "--sinks", sinks, "--backward", "--seqlen-q", "8", "--seqlen-k", "8", "--dim", "16"),
		"no sinks yet")
}
