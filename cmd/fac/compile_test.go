package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fac-compiler/fac/codegen/llc"
)

// TestCompileCache: two fac processes compile the same kernel at once into
// one cache; a hand-damaged entry is reported and rebuilt; -v prints stage
// times; cache ls and clear work.
func TestCompileCache(t *testing.T) {
	if _, err := llc.Find(); err != nil {
		t.Skipf("no llc: %v", err)
	}
	dir := t.TempDir()
	cacheDir := filepath.Join(dir, "cache")
	args := func(out string) []string {
		return []string{"compile", "--mask", "causal", "--const", "DTYPE=bf16", "--const", "HEAD_DIM=64",
			"--arch", "sm_90a", "--emit", "ptx", "--cache-dir", cacheDir, "-v", "-o", filepath.Join(dir, out)}
	}
	var wg sync.WaitGroup
	res := make([]cliResult, 2)
	for i := range res {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res[i] = runFac(t, dir, args([]string{"a.ptx", "b.ptx"}[i])...)
		}(i)
	}
	wg.Wait()
	for i, r := range res {
		if r.code != 0 {
			t.Fatalf("process %d: exit %d: %s", i, r.code, r.stderr)
		}
		for _, stage := range []string{"parse", "lower", "tile passes", "assign-layouts", "lower-llvm", "llc", "total"} {
			if !strings.Contains(r.stderr, stage) && !strings.Contains(r.stderr, "cache hit") {
				t.Errorf("process %d: -v lacks stage %s: %s", i, stage, r.stderr)
			}
		}
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a.ptx"))
	b, _ := os.ReadFile(filepath.Join(dir, "b.ptx"))
	if len(a) == 0 || string(a) != string(b) {
		t.Fatal("the two processes wrote different or empty PTX")
	}
	entries, _ := filepath.Glob(filepath.Join(cacheDir, "*.facc"))
	if len(entries) != 1 {
		t.Fatalf("cache entries: %v", entries)
	}
	if r := runFac(t, dir, "cache", "ls", "--cache-dir", cacheDir); r.code != 0 || !strings.Contains(r.stdout, "1 entries") || !strings.Contains(r.stdout, "mask=causal") {
		t.Errorf("cache ls: %d %s %s", r.code, r.stdout, r.stderr)
	}
	raw, _ := os.ReadFile(entries[0])
	if err := os.WriteFile(entries[0], raw[:len(raw)-100], 0o644); err != nil { // truncate by hand
		t.Fatal(err)
	}
	r := runFac(t, dir, args("c.ptx")...)
	if r.code != 0 || !strings.Contains(r.stderr, "corrupt") || !strings.Contains(r.stderr, "rebuilt") {
		t.Fatalf("corrupt entry: exit %d, stderr %s", r.code, r.stderr)
	}
	if c, _ := os.ReadFile(filepath.Join(dir, "c.ptx")); string(c) != string(a) {
		t.Error("rebuilt PTX differs")
	}
	if r := runFac(t, dir, args("d.ptx")...); !strings.Contains(r.stderr, "cache hit") {
		t.Errorf("after rebuild, no cache hit: %s", r.stderr)
	}
	if r := runFac(t, dir, "cache", "clear", "--cache-dir", cacheDir); r.code != 0 {
		t.Errorf("cache clear: %s", r.stderr)
	}
	if entries, _ := filepath.Glob(filepath.Join(cacheDir, "*.facc")); len(entries) != 0 {
		t.Errorf("entries left after clear: %v", entries)
	}
}

// TestCompileNoCacheDash: --cache-dir - means no cache for compile, as it
// does for build (it made a folder named "-" before), and fac cache refuses it.
func TestCompileNoCacheDash(t *testing.T) {
	if _, err := llc.Find(); err != nil {
		t.Skipf("no llc: %v", err)
	}
	dir := t.TempDir()
	r := runFac(t, dir, "compile", "--mask", "causal", "--const", "DTYPE=bf16", "--const", "HEAD_DIM=64",
		"--arch", "sm_90a", "--cache-dir", "-", "-o", filepath.Join(dir, "k.ptx"))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); err == nil {
		t.Error(`compile --cache-dir - made a folder named "-"`)
	}
	if r := runFac(t, dir, "cache", "ls", "--cache-dir", "-"); r.code != 1 || !strings.Contains(r.stderr, "--cache-dir -") {
		t.Errorf("cache ls --cache-dir -: exit %d: %s", r.code, r.stderr)
	}
}

// TestCompileVerboseTuned: -v says which tuned arguments the compiler
// added for the arch: the consumer groups for causal at D = 64, the
// 128×128 set when the request's mask blocks break them, none on sm_80.
func TestCompileVerboseTuned(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mask", "causal"}, "consumer_groups=3"},
		{[]string{"--mask", "causal", "--const", "SPARSE_Q=128"}, "tuned arguments: BLOCK_M=128 BLOCK_N=128"},
		{[]string{"--mask", "causal", "--score", "alibi"}, "tuned arguments: BLOCK_M=128 BLOCK_N=128"},
		{[]string{"--mask", "causal", "--arch", "sm_80"}, "tuned arguments: none"},
	} {
		args := append([]string{"compile", "--emit", "tir", "--const", "DTYPE=bf16", "--const", "HEAD_DIM=64", "-v", "-o", "-"}, c.args...)
		r := runFac(t, t.TempDir(), args...)
		if r.code != 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("fac %s: exit %d, stderr lacks %q:\n%s", strings.Join(args, " "), r.code, c.want, r.stderr)
		}
	}
}

// TestTargetOpt: --target-opt sets the code generation switches (the tuned
// sets follow: no consumer groups without TMA's producer, none without
// wgmma); a switch left unset takes the environment's; bad options fail
// with the value named.
func TestTargetOpt(t *testing.T) {
	base := []string{"compile", "--emit", "tir", "--const", "DTYPE=bf16", "--const", "HEAD_DIM=64", "-v", "-o", "-", "--mask", "causal"}
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--target-opt", "tma=off"}, "", "tuned arguments: BLOCK_M=128 BLOCK_N=128"},
		{[]string{"--target-opt", "tma=off,ctas-per-sm=2"}, "", "tuned arguments: BLOCK_M=128 BLOCK_N=128"},
		{[]string{"--target-opt", "wgmma=off"}, "", "tuned arguments: none"},
		{nil, "FAC_TMA=0", "tuned arguments: BLOCK_M=128 BLOCK_N=128"},
		{[]string{"--target-opt", "tma-store=on"}, "FAC_WGMMA=0", "tuned arguments: none"},
	} {
		args := append(append([]string{}, base...), c.args...)
		cmd := exec.Command(facBin, args...)
		cmd.Dir = t.TempDir()
		cmd.Env = os.Environ()
		if c.env != "" {
			cmd.Env = append(cmd.Env, c.env)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s fac %s: %v, stderr lacks %q:\n%s", c.env, strings.Join(args, " "), err, c.want, stderr.String())
		}
	}
	wantFail(t, runFac(t, t.TempDir(), append(base, "--target-opt", "tma=maybe")...), "--target-opt: target option tma=maybe: want on or off")
	wantFail(t, runFac(t, t.TempDir(), "run", "--target-opt", "ctas-per-sm=1", "--mask", "causal"), "target option ctas-per-sm=1: want 2 to 32")
	wantFail(t, runFac(t, t.TempDir(), "build", "--target-opt", "speed=fast", "-o", "x.bundle"), `unknown name "speed"`)
	wantFail(t, runFac(t, t.TempDir(), "bench", "--target-opt", "dq"), `target option "dq": want NAME=VALUE`)
	if r := runFac(t, "", "compile", "--help"); r.code != 0 || !strings.Contains(r.stdout, "--target-opt") || !strings.Contains(r.stdout, "release=counters|barrier: ") {
		t.Errorf("compile --help does not describe --target-opt:\n%s", r.stdout)
	}
	if r := runFac(t, "", "bench", "--help"); r.code != 0 || strings.Contains(r.stdout, "../") || strings.Contains(r.stdout, "session") {
		t.Errorf("bench --help names a path outside the repository or a session:\n%s", r.stdout)
	}
}
