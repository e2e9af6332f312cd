package cache

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func open(t *testing.T) *Cache {
	t.Helper()
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewKey(t *testing.T) {
	k := NewKey("flash_fwd", "sm_90a", "causal")
	if !k.Valid() || k != NewKey("flash_fwd", "sm_90a", "causal") {
		t.Errorf("key %q not valid or not deterministic", k)
	}
	if NewKey("ab", "c") == NewKey("a", "bc") || NewKey("a", "") == NewKey("a") {
		t.Error("concatenated parts collide")
	}
	for _, bad := range []Key{"", "../../etc/passwd", Key(strings.Repeat("A", 64)), k[:63]} {
		if bad.Valid() {
			t.Errorf("%q is valid", bad)
		}
	}
	if k.Short() != string(k[:12]) {
		t.Error("Short")
	}
}

func TestDefaultDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "xdg"))
	if d, err := DefaultDir(); err != nil || d != filepath.Join(dir, "xdg", "fac") {
		t.Errorf("DefaultDir() = %q, %v", d, err)
	}
	c, err := Open("")
	if err != nil || c.Dir() != filepath.Join(dir, "xdg", "fac") {
		t.Fatalf("Open(\"\") = %v, %v; want the default folder", c, err)
	}
}

func TestRoundTrip(t *testing.T) {
	c := open(t)
	k := NewKey("k1")
	if data, st, err := c.Get(k); data != nil || st != Miss || err != nil {
		t.Fatalf("Get(empty) = %q, %v, %v", data, st, err)
	}
	payload := []byte(".version 8.0\n.target sm_90a\n")
	if err := c.Put(k, "flash_fwd mask=causal", payload); err != nil {
		t.Fatal(err)
	}
	data, st, err := c.Get(k)
	if !bytes.Equal(data, payload) || st != Hit || err != nil {
		t.Fatalf("Get = %q, %v, %v", data, st, err)
	}
	// Empty payload and overwrite.
	if err := c.Put(k, "", nil); err != nil {
		t.Fatal(err)
	}
	if data, st, _ := c.Get(k); len(data) != 0 || st != Hit {
		t.Errorf("empty payload: %q, %v", data, st)
	}
	if err := c.Put("nope", "", payload); err == nil {
		t.Error("Put with invalid key succeeded")
	}
	if _, _, err := c.Get("../x"); err == nil {
		t.Error("Get with invalid key succeeded")
	}
	if err := c.Put(k, strings.Repeat("m", 70000), payload); err == nil {
		t.Error("oversized metadata accepted")
	}
}

func TestCorrupt(t *testing.T) {
	payload := bytes.Repeat([]byte("ptx "), 100)
	for name, damage := range map[string]func([]byte) []byte{
		"flipped payload byte": func(b []byte) []byte { b[len(b)-10] ^= 1; return b },
		"flipped checksum":     func(b []byte) []byte { b[10] ^= 1; return b },
		"truncated":            func(b []byte) []byte { return b[:len(b)-1] },
		"truncated header":     func(b []byte) []byte { return b[:20] },
		"empty":                func(b []byte) []byte { return nil },
		"bad magic":            func(b []byte) []byte { b[0] = 'X'; return b },
		"trailing garbage":     func(b []byte) []byte { return append(b, 0) },
		"huge meta length":     func(b []byte) []byte { b[hdrSize-1] = 0xff; return b },
	} {
		t.Run(name, func(t *testing.T) {
			c := open(t)
			k := NewKey(name)
			if err := c.Put(k, "meta", payload); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(c.Dir(), string(k)+ext)
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, damage(bytes.Clone(b)), 0o644); err != nil {
				t.Fatal(err)
			}
			data, st, err := c.Get(k)
			if data != nil || st != Corrupt || err != nil {
				t.Fatalf("Get = %q, %v, %v; want Corrupt", data, st, err)
			}
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("corrupt entry not deleted: %v", err)
			}

			// Damage again and let GetOrBuild rebuild it.
			os.WriteFile(p, damage(bytes.Clone(b)), 0o644)
			builds := 0
			data, st, err = c.GetOrBuild(k, "meta", func() ([]byte, error) { builds++; return payload, nil })
			if !bytes.Equal(data, payload) || st != Corrupt || err != nil || builds != 1 {
				t.Fatalf("GetOrBuild = %v, %v, builds %d", st, err, builds)
			}
			if data, st, _ := c.Get(k); !bytes.Equal(data, payload) || st != Hit {
				t.Errorf("after rebuild: %v", st)
			}
		})
	}
}

func TestGetOrBuild(t *testing.T) {
	c := open(t)
	k := NewKey("g")
	data, st, err := c.GetOrBuild(k, "m", func() ([]byte, error) { return []byte("x"), nil })
	if string(data) != "x" || st != Miss || err != nil {
		t.Fatalf("first = %q, %v, %v", data, st, err)
	}
	data, st, err = c.GetOrBuild(k, "m", func() ([]byte, error) { t.Error("rebuilt a hit"); return nil, nil })
	if string(data) != "x" || st != Hit || err != nil {
		t.Fatalf("second = %q, %v, %v", data, st, err)
	}
	boom := errors.New("boom")
	if _, _, err := c.GetOrBuild(NewKey("fail"), "", func() ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("build error = %v", err)
	}
	if _, st, _ := c.Get(NewKey("fail")); st != Miss {
		t.Error("failed build was cached")
	}

	// An unusable directory still yields the built payload, plus ErrStore.
	os.RemoveAll(c.Dir())
	os.WriteFile(c.Dir(), nil, 0o644) // a file where the directory was
	data, _, err = c.GetOrBuild(NewKey("nodir"), "", func() ([]byte, error) { return []byte("y"), nil })
	if string(data) != "y" || !errors.Is(err, ErrStore) {
		t.Errorf("unusable dir: %q, %v", data, err)
	}
}

func TestList(t *testing.T) {
	c := open(t)
	k1, k2, k3 := NewKey("1"), NewKey("2"), NewKey("3")
	c.Put(k1, "flash_fwd causal", []byte("aaaa"))
	c.Put(k2, "", []byte("b"))
	c.Put(k3, "x", []byte("c"))
	os.WriteFile(filepath.Join(c.Dir(), string(k3)+ext), []byte("FAC"), 0o644)
	os.WriteFile(filepath.Join(c.Dir(), "README"), []byte("not ours"), 0o644)
	entries, err := c.List()
	if err != nil || len(entries) != 3 {
		t.Fatalf("List = %v, %v", entries, err)
	}
	meta := map[Key]string{}
	for _, e := range entries {
		meta[e.Key] = e.Meta
		if e.ModTime.IsZero() || e.Size <= 0 {
			t.Errorf("entry %+v", e)
		}
	}
	if meta[k1] != "flash_fwd causal" || meta[k2] != "" || meta[k3] != "<corrupt>" {
		t.Errorf("metas = %q", meta)
	}
}

func TestClear(t *testing.T) {
	c := open(t)
	for i := range 5 {
		c.Put(NewKey(fmt.Sprint(i)), "", []byte("x"))
	}
	stale := filepath.Join(c.Dir(), tmpPfx+"0123456789ab-123")
	other := filepath.Join(c.Dir(), "keep.txt")
	os.WriteFile(stale, []byte(magic+"partial"), 0o644)
	os.WriteFile(other, []byte("x"), 0o644)
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := c.List(); len(entries) != 0 {
		t.Errorf("entries left: %v", entries)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("stale temp file left")
	}
	if _, err := os.Stat(other); err != nil {
		t.Error("Clear removed a foreign file")
	}
}

// payloadFor is what every writer stores for key i, so readers can verify.
func payloadFor(i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("kernel %d;", i)), 1000+i*37)
}

// hammer mixes GetOrBuild, Put and Get on a few keys and checks every
// result.
func hammer(c *Cache, worker, iters int) error {
	for it := range iters {
		i := (worker + it) % 7
		k := NewKey("hammer", fmt.Sprint(i))
		switch it % 3 {
		case 0:
			data, _, err := c.GetOrBuild(k, fmt.Sprint("k", i), func() ([]byte, error) { return payloadFor(i), nil })
			if err != nil || !bytes.Equal(data, payloadFor(i)) {
				return fmt.Errorf("GetOrBuild %d: %v (%d bytes)", i, err, len(data))
			}
		case 1:
			if err := c.Put(k, fmt.Sprint("k", i), payloadFor(i)); err != nil {
				return err
			}
		case 2:
			data, st, err := c.Get(k)
			if err != nil || st == Corrupt || st == Hit && !bytes.Equal(data, payloadFor(i)) {
				return fmt.Errorf("Get %d: %v, %v", i, st, err)
			}
		}
	}
	return nil
}

func TestConcurrentGoroutines(t *testing.T) {
	c := open(t)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hammer(c, w, 60); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Same-key GetOrBuild calls in one process share a single build.
	var builds atomic.Int32
	k := NewKey("once")
	start := make(chan struct{})
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c.GetOrBuild(k, "", func() ([]byte, error) { builds.Add(1); return []byte("z"), nil })
		}()
	}
	close(start)
	wg.Wait()
	if builds.Load() != 1 {
		t.Errorf("%d builds for one key", builds.Load())
	}
}

const childEnv = "FAC_CACHE_TEST_CHILD"

// TestChildProcess is the body of the subprocesses started by
// TestConcurrentProcesses; it does nothing in a normal run.
func TestChildProcess(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("only run as a subprocess")
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := hammer(c, os.Getpid(), 300); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentProcesses(t *testing.T) {
	dir := t.TempDir()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"="+dir)
		out := new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	c, _ := Open(dir)
	if err := hammer(c, 3, 300); err != nil {
		t.Error(err)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child %d: %v\n%s", i, err, outs[i])
		}
	}
	entries, err := c.List()
	if err != nil || len(entries) != 7 {
		t.Errorf("List after concurrent writes: %d entries, %v", len(entries), err)
	}
	for _, e := range entries {
		if _, st, _ := c.Get(e.Key); st != Hit {
			t.Errorf("entry %s: %v", e.Key.Short(), st)
		}
	}
}

func TestMemo(t *testing.T) {
	var m Memo[int]
	var calls atomic.Int32
	var wg sync.WaitGroup
	k := NewKey("mod")
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := m.Do(k, func() (int, error) { calls.Add(1); return 42, nil })
			if v != 42 || err != nil {
				t.Errorf("Do = %d, %v", v, err)
			}
		}()
	}
	wg.Wait()
	if calls.Load() != 1 {
		t.Errorf("computed %d times", calls.Load())
	}
	if v, ok := m.Get(k); v != 42 || !ok {
		t.Errorf("Get = %d, %v", v, ok)
	}

	k2 := NewKey("bad")
	if _, err := m.Do(k2, func() (int, error) { return 0, errors.New("x") }); err == nil {
		t.Error("error lost")
	}
	if _, ok := m.Get(k2); ok {
		t.Error("failed value remembered")
	}
	if v, err := m.Do(k2, func() (int, error) { return 7, nil }); v != 7 || err != nil {
		t.Errorf("retry = %d, %v", v, err)
	}

	func() {
		defer func() { recover() }()
		m.Do(NewKey("panic"), func() (int, error) { panic("boom") })
	}()
	if v, err := m.Do(NewKey("panic"), func() (int, error) { return 1, nil }); v != 1 || err != nil {
		t.Errorf("after panic: %d, %v", v, err)
	}

	n := 0
	m.Range(func(Key, int) bool { n++; return true })
	if n != 3 {
		t.Errorf("Range saw %d values", n)
	}
	m.Delete(k)
	if _, ok := m.Get(k); ok {
		t.Error("Delete")
	}
}
