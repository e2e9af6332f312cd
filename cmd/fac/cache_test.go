package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/artifact/cache"
)

// TestCacheLsCreatesNothing is issue 46 item 10: `fac cache ls` and `fac
// cache clear` of a folder that does not exist create nothing (ls made
// new/a/b before) and say the folder is empty.
func TestCacheLsCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"ls", "clear"} {
		r := runFac(t, dir, "cache", sub, "--cache-dir", filepath.Join("new", "a", "b"))
		if r.code != 0 {
			t.Fatalf("cache %s: exit %d: %s", sub, r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
			t.Fatalf("cache %s --cache-dir new/a/b made new: %v", sub, err)
		}
		if sub == "ls" && !strings.Contains(r.stdout, "0 entries, 0 bytes") {
			t.Errorf("cache ls of no folder: %s", r.stdout)
		}
	}
}

// TestCacheClearKeepsUsersFiles is issue 46 item 10: `fac cache clear`
// removes entries and fac's own temporary files, not a user's .tmp-* file.
func TestCacheClearKeepsUsersFiles(t *testing.T) {
	dir := t.TempDir()
	c, err := cache.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Put(cache.NewKey("a"), "flash_fwd mask=causal", []byte("ptx")); err != nil {
		t.Fatal(err)
	}
	users := []string{".tmp-notes", ".tmp-draft.txt", "README"}
	for _, name := range users {
		os.WriteFile(filepath.Join(dir, name), []byte("mine"), 0o644)
	}
	if r := runFac(t, dir, "cache", "clear", "--cache-dir", dir); r.code != 0 {
		t.Fatalf("cache clear: exit %d: %s", r.code, r.stderr)
	}
	for _, name := range users {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("cache clear removed the user's %s: %v", name, err)
		}
	}
	if entries, _ := c.List(); len(entries) != 0 {
		t.Errorf("entries left: %v", entries)
	}
}

// TestCacheLsHeader is issue 46 item 21: `fac cache ls` starts with a line
// naming the folder, the entry count and their total size.
func TestCacheLsHeader(t *testing.T) {
	dir := t.TempDir()
	c, err := cache.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for i, n := range []int{1000, 3000} {
		k := cache.NewKey(fmt.Sprint(i))
		if err := c.Put(k, fmt.Sprint("kernel ", i), make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(filepath.Join(dir, string(k)+".facc"))
		total += fi.Size()
	}
	r := runFac(t, dir, "cache", "ls", "--cache-dir", dir)
	if r.code != 0 {
		t.Fatalf("cache ls: exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	want := fmt.Sprintf("cache %s: 2 entries, %d bytes (", dir, total)
	if len(lines) != 3 || !strings.HasPrefix(lines[0], want) || !strings.Contains(lines[0], "KiB") {
		t.Errorf("cache ls:\n%s\nwant a first line starting %q, then 2 entries", r.stdout, want)
	}
}
