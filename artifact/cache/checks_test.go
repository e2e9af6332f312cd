package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A valid entry copied under another key's file name must not be served
// for that key: it would hand mask=none PTX to a causal request.
func TestEntryBoundToKey(t *testing.T) {
	c := open(t)
	none, causal := NewKey("flash_fwd", "mask=none"), NewKey("flash_fwd", "mask=causal")
	if err := c.Put(none, "mask=none", []byte("none ptx")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(c.Dir(), string(none)+ext))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(c.Dir(), string(causal)+ext)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	metas := map[Key]string{}
	entries, _ := c.List()
	for _, e := range entries {
		metas[e.Key] = e.Meta
	}
	if len(metas) != 2 || metas[none] != "mask=none" || metas[causal] != "<corrupt>" {
		t.Errorf("List metas = %q, want the copy shown as <corrupt>", metas)
	}
	data, st, err := c.Get(causal)
	if data != nil || st != Corrupt || err != nil {
		t.Fatalf("Get(causal) of a copied entry = %q, %v, %v; want Corrupt", data, st, err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("copied entry not removed: %v", err)
	}
	os.WriteFile(p, b, 0o644)
	data, st, err = c.GetOrBuild(causal, "mask=causal", func() ([]byte, error) { return []byte("causal ptx"), nil })
	if string(data) != "causal ptx" || st != Corrupt || err != nil {
		t.Fatalf("GetOrBuild(causal) = %q, %v, %v; want the rebuilt causal payload", data, st, err)
	}
	if data, st, _ := c.Get(causal); string(data) != "causal ptx" || st != Hit {
		t.Errorf("after rebuild: %q, %v", data, st)
	}
	if data, st, _ := c.Get(none); string(data) != "none ptx" || st != Hit {
		t.Errorf("original entry: %q, %v", data, st)
	}
}

// fakeArtifact stands in for compiler.Artifact, whose decoding the caller
// does in the validate function.
type fakeArtifact struct {
	Kernel string `json:"kernel"`
	PTX    string `json:"ptx"`
}

func validateArtifact(b []byte) error {
	var a fakeArtifact
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	if a.Kernel == "" || !strings.Contains(a.PTX, ".entry "+a.Kernel) {
		return errors.New("artifact has no PTX entry for its kernel")
	}
	return nil
}

// Entries the caller cannot decode (not JSON, or "{}", which decodes to an
// empty artifact and used to give an empty .ptx) are removed and rebuilt
// through GetOrBuildChecked instead of failing every compile.
func TestGetOrBuildCheckedRebuildsBadPayload(t *testing.T) {
	good, _ := json.Marshal(fakeArtifact{Kernel: "flash_fwd", PTX: ".visible .entry flash_fwd("})
	for name, bad := range map[string]string{"not an artifact": "garbage\x00", "empty object": "{}", "empty": ""} {
		t.Run(name, func(t *testing.T) {
			c := open(t)
			k := NewKey(name)
			if err := c.Put(k, "m", []byte(bad)); err != nil {
				t.Fatal(err)
			}
			builds := 0
			build := func() ([]byte, error) { builds++; return good, nil }
			for i, want := range []Status{Corrupt, Hit} {
				data, st, err := c.GetOrBuildChecked(k, "m", build, validateArtifact)
				if !bytes.Equal(data, good) || st != want || err != nil {
					t.Fatalf("call %d: GetOrBuildChecked = %q, %v, %v; want the good artifact, %v", i, data, st, err, want)
				}
			}
			if builds != 1 {
				t.Errorf("%d builds, want 1", builds)
			}
		})
	}
}

func TestGetOrBuildCheckedRejectsBadBuild(t *testing.T) {
	c := open(t)
	k := NewKey("bad build")
	data, _, err := c.GetOrBuildChecked(k, "m", func() ([]byte, error) { return []byte("{}"), nil }, validateArtifact)
	if data != nil || err == nil || !strings.Contains(err.Error(), "fails its check") || errors.Is(err, ErrStore) {
		t.Fatalf("GetOrBuildChecked with a bad build = %q, %v; want an error", data, err)
	}
	if _, st, _ := c.Get(k); st != Miss {
		t.Errorf("a payload that failed its check was stored (%v)", st)
	}
}

func TestRemove(t *testing.T) {
	c := open(t)
	k := NewKey("r")
	c.Put(k, "", []byte("x"))
	if err := c.Remove(k); err != nil {
		t.Fatal(err)
	}
	if _, st, _ := c.Get(k); st != Miss {
		t.Errorf("after Remove: %v", st)
	}
	if err := c.Remove(k); err != nil {
		t.Errorf("Remove of a missing entry: %v", err)
	}
	if err := c.Remove("../x"); err == nil {
		t.Error("Remove with an invalid key succeeded")
	}
}

// unusable replaces the cache folder with a file, so every write fails even
// as root (where a read-only mode would not stop writes).
func unusable(t *testing.T, c *Cache) {
	t.Helper()
	if err := os.RemoveAll(c.Dir()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.Dir(), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestStoreFailureWarnsOnce(t *testing.T) {
	c := open(t)
	var w bytes.Buffer
	c.Warn = &w
	unusable(t, c)
	for i := range 3 {
		k := NewKey("w", string(rune('a'+i)))
		data, _, err := c.GetOrBuild(k, "", func() ([]byte, error) { return []byte("ptx"), nil })
		if string(data) != "ptx" || !errors.Is(err, ErrStore) {
			t.Fatalf("GetOrBuild on an unusable folder = %q, %v; want the payload and ErrStore", data, err)
		}
	}
	if got := w.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "warning: kernel cache "+c.Dir()) {
		t.Errorf("warnings = %q, want one line naming the folder", got)
	}

	// Without Warn the warning goes to stderr once per process, however
	// many Caches fail.
	var se bytes.Buffer
	old := stderr
	stderr = &se
	stderrWarned.Store(false)
	t.Cleanup(func() { stderr = old })
	for range 2 {
		c := open(t)
		unusable(t, c)
		if data, _, _ := c.GetOrBuild(NewKey("x"), "", func() ([]byte, error) { return []byte("y"), nil }); string(data) != "y" {
			t.Fatalf("GetOrBuild = %q", data)
		}
	}
	if strings.Count(se.String(), "\n") != 1 {
		t.Errorf("stderr = %q, want one warning", se.String())
	}
}

func TestReadOnlyDirWarns(t *testing.T) {
	c := open(t)
	if err := os.Chmod(c.Dir(), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(c.Dir(), 0o755) })
	if f, err := os.CreateTemp(c.Dir(), "probe"); err == nil {
		f.Close()
		os.Remove(f.Name())
		t.Skip("a read-only mode does not stop writes here (root)")
	}
	var w bytes.Buffer
	c.Warn = &w
	data, _, err := c.GetOrBuild(NewKey("ro"), "", func() ([]byte, error) { return []byte("ptx"), nil })
	if string(data) != "ptx" || !errors.Is(err, ErrStore) || !strings.Contains(w.String(), "warning") {
		t.Errorf("read-only folder: %q, %v, warning %q", data, err, w.String())
	}
}

// encodeV1 writes an entry in the first format (no key in the header).
func encodeV1(meta string, payload []byte) []byte {
	sum := sha256.Sum256(payload)
	b := append([]byte("FACC1"), sum[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(payload)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(meta)))
	return append(append(b, meta...), payload...)
}

func TestOldFormatIsMiss(t *testing.T) {
	c := open(t)
	k := NewKey("old")
	p := filepath.Join(c.Dir(), string(k)+ext)
	os.WriteFile(p, encodeV1("flash_fwd", []byte("ptx")), 0o644)
	if entries, _ := c.List(); len(entries) != 1 || entries[0].Meta != "<old format>" {
		t.Errorf("List = %+v", entries)
	}
	if data, st, err := c.Get(k); data != nil || st != Miss || err != nil {
		t.Errorf("Get of a v1 entry = %q, %v, %v; want Miss", data, st, err)
	}
	os.WriteFile(p, encodeV1("flash_fwd", []byte("ptx")), 0o644)
	data, st, err := c.GetOrBuild(k, "m", func() ([]byte, error) { return []byte("new"), nil })
	if string(data) != "new" || st != Miss || err != nil {
		t.Errorf("GetOrBuild over a v1 entry = %q, %v, %v", data, st, err)
	}
	if data, st, _ := c.Get(k); string(data) != "new" || st != Hit {
		t.Errorf("after rebuild: %q, %v", data, st)
	}
}

// Only regular files of a plausible size are read: a directory or a huge
// (sparse) file under an entry's name is damage, not a hang or an OOM.
func TestOddEntryFiles(t *testing.T) {
	c := open(t)
	k := NewKey("dir")
	p := filepath.Join(c.Dir(), string(k)+ext)
	os.Mkdir(p, 0o755)
	if data, st, err := c.Get(k); data != nil || st != Corrupt || err != nil {
		t.Errorf("Get of a directory entry = %q, %v, %v; want Corrupt", data, st, err)
	}
	k = NewKey("huge")
	p = filepath.Join(c.Dir(), string(k)+ext)
	c.Put(k, "", []byte("x"))
	if err := os.Truncate(p, maxEntry+1); err != nil {
		t.Fatal(err)
	}
	if data, st, err := c.Get(k); data != nil || st != Corrupt || err != nil {
		t.Errorf("Get of a huge entry = %d bytes, %v, %v; want Corrupt", len(data), st, err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("huge entry not removed: %v", err)
	}
}
