package cache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fac-compiler/fac/artifact"
)

// testArtifact is a small launchable artifact.
func testArtifact(mask string) *artifact.Artifact {
	return &artifact.Artifact{
		Ident: artifact.Ident{Kernel: "flash_fwd", Mods: map[string]string{"mask": mask}, DType: "bf16", Arch: "sm_90a", Sources: "s", Fac: "f", LLC: "l"},
		Entry: "flash_fwd", PTX: ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry flash_fwd() { ret; }\n// " + mask + "\n",
		Threads: 384, SharedBytes: 1024, Attrs: map[string]int64{"BLOCK_M": 128},
		Params: []artifact.Param{{Name: "q", Kind: artifact.KindPtr, Elem: "bf16"}, {Name: "n", Kind: artifact.KindI32, Elem: "i32"}},
	}
}

// TestArtifactEntryMetadataBound is issue 46 item 3 for cache entries: an
// entry whose artifact has edited launch metadata, or an empty "sha256" or
// "digest", is refused and rebuilt even when the entry's own checksum is
// right (the entry rewritten through Put), never served.
func TestArtifactEntryMetadataBound(t *testing.T) {
	want := testArtifact("none")
	id := want.Ident
	key := NewKey("artifact", id.Key())
	for name, edit := range map[string]func(m map[string]any){
		"threads":       func(m map[string]any) { m["threads"] = 128 },
		"shared_bytes":  func(m map[string]any) { m["shared_bytes"] = 0 },
		"attrs":         func(m map[string]any) { m["attrs"] = map[string]any{"BLOCK_M": 64} },
		"params order":  func(m map[string]any) { p := m["params"].([]any); p[0], p[1] = p[1], p[0] },
		"param kind":    func(m map[string]any) { m["params"].([]any)[1].(map[string]any)["kind"] = "i64" },
		"entry":         func(m map[string]any) { m["entry"] = "flash" },
		"empty sha256":  func(m map[string]any) { m["sha256"] = ""; m["ptx"] = m["ptx"].(string) + "// edited\n" },
		"no sha256":     func(m map[string]any) { delete(m, "sha256") },
		"empty digest":  func(m map[string]any) { m["digest"] = ""; m["threads"] = 128 },
		"no checksums":  func(m map[string]any) { delete(m, "sha256"); delete(m, "digest"); m["threads"] = 128 },
		"identity llc":  func(m map[string]any) { m["ident"].(map[string]any)["llc"] = "other" },
		"identity mask": func(m map[string]any) { m["ident"].(map[string]any)["mods"] = map[string]any{"mask": "causal"} },
	} {
		t.Run(name, func(t *testing.T) {
			c := open(t)
			a := *want
			payload, err := a.Encode()
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(payload, &m); err != nil {
				t.Fatal(err)
			}
			edit(m)
			edited, _ := json.Marshal(m)
			if err := c.Put(key, "edited", edited); err != nil { // a well-formed entry around edited metadata
				t.Fatal(err)
			}
			builds := 0
			got, st, err := c.Artifact(id, func() (*artifact.Artifact, error) { builds++; b := *want; return &b, nil })
			if err != nil {
				t.Fatal(err)
			}
			if st != Corrupt || builds != 1 {
				t.Errorf("status %v after %d builds: the edited entry was served", st, builds)
			}
			if got.Threads != want.Threads || got.SharedBytes != want.SharedBytes || got.Entry != want.Entry ||
				got.Params[0] != want.Params[0] || got.Attrs["BLOCK_M"] != 128 || got.PTX != want.PTX {
				t.Errorf("got %+v", got)
			}
		})
	}
}

// TestClearOnlyOwnFiles is issue 46 item 10: Clear removes entries and
// fac's own temporary files (its naming, and an entry's magic or nothing
// inside), never a user's file that merely starts with ".tmp-".
func TestClearOnlyOwnFiles(t *testing.T) {
	c := open(t)
	c.Put(NewKey("x"), "", []byte("x"))
	ours := map[string]string{
		tmpPfx + "0123456789ab-42":  magic + "partial",
		tmpPfx + "0123456789ab-43":  "",
		".tmp-0123456789ab-2981237": "FACC2 partial entry of an older fac",
	}
	users := map[string]string{
		".tmp-notes":                        "my notes",
		".tmp-0123456789ab-7":               "my data, named like an old temp file",
		tmpPfx + "0123456789ab-8":           "not an entry",
		tmpPfx + "notakey-1":                magic,
		".facc-lock-notakey":                lockMagic,
		".facc-lock-" + string(NewKey("u")): "someone else's",
	}
	for _, files := range []map[string]string{ours, users} {
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(c.Dir(), name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour)
			os.Chtimes(filepath.Join(c.Dir(), name), old, old)
		}
	}
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	for name := range ours {
		if _, err := os.Stat(filepath.Join(c.Dir(), name)); !os.IsNotExist(err) {
			t.Errorf("fac's file %s left: %v", name, err)
		}
	}
	for name := range users {
		if _, err := os.Stat(filepath.Join(c.Dir(), name)); err != nil {
			t.Errorf("a user's file %s was removed: %v", name, err)
		}
	}
	if entries, _ := c.List(); len(entries) != 0 {
		t.Errorf("entries left: %v", entries)
	}
}

// TestLocateCreatesNothing is issue 46 item 10: looking at a cache folder
// that does not exist creates nothing.
func TestLocateCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "a", "b")
	c, err := Locate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if entries, err := c.List(); err != nil || len(entries) != 0 {
		t.Errorf("List = %v, %v", entries, err)
	}
	if err := c.Clear(); err != nil {
		t.Errorf("Clear = %v", err)
	}
	if _, st, err := c.Get(NewKey("k")); st != Miss || err != nil {
		t.Errorf("Get = %v, %v", st, err)
	}
	if _, err := os.Stat(filepath.Dir(filepath.Dir(dir))); !os.IsNotExist(err) {
		t.Errorf("Locate, List, Clear or Get made %s: %v", filepath.Dir(filepath.Dir(dir)), err)
	}
}

const lockChildEnv = "FAC_CACHE_TEST_LOCK_CHILD"

// TestLockChild is the body of TestOneBuildAcrossProcesses's processes: it
// builds one key slowly, counting its builds in a file.
func TestLockChild(t *testing.T) {
	dir := os.Getenv(lockChildEnv)
	if dir == "" {
		t.Skip("only run as a subprocess")
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := c.GetOrBuild(NewKey("one build"), "m", func() ([]byte, error) {
		f, err := os.OpenFile(filepath.Join(dir, "builds.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		fmt.Fprintln(f, os.Getpid())
		f.Close()
		time.Sleep(300 * time.Millisecond) // an llc run
		return []byte("ptx"), nil
	})
	if err != nil || string(data) != "ptx" {
		t.Fatalf("GetOrBuild = %q, %v", data, err)
	}
}

// TestOneBuildAcrossProcesses is issue 46 item 15 (the cache's half): 8
// processes asking for one key at once build it once; the others wait for
// the entry and hit it.
func TestOneBuildAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range 8 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLockChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), lockChildEnv+"="+dir)
		out := new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "builds.log"))
	if n := strings.Count(string(log), "\n"); n != 1 {
		t.Errorf("%d builds of one key by 8 processes, want 1", n)
	}
	if locks, _ := filepath.Glob(filepath.Join(dir, lockPfx+"*")); len(locks) != 0 {
		t.Errorf("locks left: %v", locks)
	}
}

// TestOneBuildAcrossCaches is item 15 within one test process: Caches
// opened separately on one folder (as separate processes have) share one
// build per key.
func TestOneBuildAcrossCaches(t *testing.T) {
	dir := t.TempDir()
	var builds atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 8 {
		c, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			data, _, err := c.GetOrBuild(NewKey("k"), "", func() ([]byte, error) {
				builds.Add(1)
				time.Sleep(100 * time.Millisecond)
				return []byte("v"), nil
			})
			if err != nil || string(data) != "v" {
				t.Errorf("GetOrBuild = %q, %v", data, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}
}

// TestStaleLock: a lock left by a process that died is broken once it is
// older than staleLock, and Clear removes it then, not before; a failed
// build releases its lock; a wait is bounded by maxLockWait.
func TestStaleLock(t *testing.T) {
	defer func(s, w time.Duration) { staleLock, maxLockWait = s, w }(staleLock, maxLockWait)
	staleLock, maxLockWait = 300*time.Millisecond, time.Minute
	c := open(t)
	k := NewKey("stale")
	lp := c.lockPath(k)
	if err := os.WriteFile(lp, []byte(lockMagic+"pid 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lp); err != nil {
		t.Fatal("Clear removed a fresh lock")
	}
	t0 := time.Now()
	data, st, err := c.GetOrBuild(k, "", func() ([]byte, error) { return []byte("v"), nil })
	if err != nil || string(data) != "v" || st != Miss {
		t.Fatalf("GetOrBuild = %q, %v, %v", data, st, err)
	}
	if d := time.Since(t0); d < staleLock || d > 20*staleLock {
		t.Errorf("took %v to break a lock stale after %v", d, staleLock)
	}
	if _, err := os.Stat(lp); !os.IsNotExist(err) {
		t.Errorf("lock left after the build: %v", err)
	}

	// A failed build leaves no lock.
	if _, _, err := c.GetOrBuild(NewKey("fails"), "", func() ([]byte, error) { return nil, fmt.Errorf("boom") }); err == nil {
		t.Fatal("no error")
	}
	if _, err := os.Stat(c.lockPath(NewKey("fails"))); !os.IsNotExist(err) {
		t.Errorf("lock left after a failed build: %v", err)
	}

	// Clear removes a stale lock.
	os.WriteFile(lp, []byte(lockMagic), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(lp, old, old)
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lp); !os.IsNotExist(err) {
		t.Errorf("Clear left a stale lock: %v", err)
	}

	// A live holder (refreshing its lock) is waited for no longer than
	// maxLockWait.
	staleLock, maxLockWait = time.Hour, 200*time.Millisecond
	k2 := NewKey("held")
	os.WriteFile(c.lockPath(k2), []byte(lockMagic+"pid "+strconv.Itoa(os.Getpid())+"\n"), 0o644)
	t0 = time.Now()
	if data, _, err := c.GetOrBuild(k2, "", func() ([]byte, error) { return []byte("w"), nil }); err != nil || string(data) != "w" {
		t.Fatalf("GetOrBuild under a held lock = %q, %v", data, err)
	}
	if d := time.Since(t0); d < maxLockWait || d > 20*maxLockWait {
		t.Errorf("waited %v for a lock, max %v", d, maxLockWait)
	}
}
