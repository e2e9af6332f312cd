package blockmask

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// twoMasks are block masks of one geometry with different lists: a
// "causal" one and a "none" one.
func twoMasks(t *testing.T) (causal, none *BlockMask) {
	t.Helper()
	var err error
	shape, opts := Shape{B: 1, H: 2, SeqQ: 70, SeqK: 70}, Options{BlockQ: 16, BlockK: 16}
	causal, err = BruteForceFunc(shape, opts, func(b, h, q, kv int) bool { return kv <= q })
	if err != nil {
		t.Fatal(err)
	}
	none, err = BruteForceFunc(shape, opts, func(b, h, q, kv int) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	// One width, so that both load against either's json.
	if causal, err = causal.WithWidths(causal.NumK, causal.NumQ); err != nil {
		t.Fatal(err)
	}
	if none, err = none.WithWidths(none.NumK, none.NumQ); err != nil {
		t.Fatal(err)
	}
	causal.Mask, none.Mask = "causal", "none"
	return causal, none
}

// wantSaved checks that dir holds exactly bm (lists and mask) and nothing
// but the nine files of a save.
func wantSaved(t *testing.T, dir string, bm *BlockMask) {
	t.Helper()
	got, err := Load(dir, 0, 0, 0, 0)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got.Mask != bm.Mask || !got.Equal(bm) {
		t.Fatalf("the folder holds mask %q with other lists than the %q save: %s", got.Mask, bm.Mask, Diff(got, bm))
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := []string{fileFullKVIdx, fileFullKVNum, fileFullQIdx, fileFullQNum, fileMeta, fileKVIdx, fileKVNum, fileQIdx, fileQNum}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("folder holds %v, want the nine files of a save", names)
	}
}

// TestSaveReadOnlyMetaLeavesFolderWhole is issue 46 item 6: saving another
// mask into a folder whose block_mask.json is read-only failed after
// writing the .npy files, leaving a folder that claimed causal but held
// none's lists, which Load (and fac run --blockmask) accepted. Now it fails
// before writing anything.
func TestSaveReadOnlyMetaLeavesFolderWhole(t *testing.T) {
	causal, none := twoMasks(t)
	dir := filepath.Join(t.TempDir(), "bm")
	if err := causal.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, MetaFile), 0o444); err != nil {
		t.Fatal(err)
	}
	err := none.Save(dir)
	if err == nil || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), MetaFile) {
		t.Fatalf("save over a read-only %s: %v", MetaFile, err)
	}
	wantSaved(t, dir, causal)
	if fi, _ := os.Stat(filepath.Join(dir, MetaFile)); fi.Mode().Perm() != 0o444 {
		t.Errorf("%s mode now %v", MetaFile, fi.Mode())
	}
}

// TestSaveFailureRollsBack is issue 46 item 6: a save that fails at any
// step of putting its files in place leaves the old folder as it was, and
// one that succeeds leaves the new one whole, with no temporary files.
func TestSaveFailureRollsBack(t *testing.T) {
	causal, none := twoMasks(t)
	dir := filepath.Join(t.TempDir(), "bm")
	if err := causal.Save(dir); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, fileKVIdx), 0o640)
	defer func() { rename = os.Rename }()
	boom := errors.New("injected failure")
	for n := 0; ; n++ {
		calls := 0
		rename = func(from, to string) error {
			if calls++; calls > n {
				return boom
			}
			return os.Rename(from, to)
		}
		err := none.Save(dir)
		if err == nil {
			if n < 9 {
				t.Fatalf("the save put its files in place with %d renames", n)
			}
			break
		}
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "unchanged") {
			t.Fatalf("failure after %d renames: %v", n, err)
		}
		wantSaved(t, dir, causal)
	}
	rename = os.Rename
	wantSaved(t, dir, none)
	if fi, _ := os.Stat(filepath.Join(dir, fileKVIdx)); fi.Mode().Perm() != 0o640 {
		t.Errorf("a replaced file's mode is now %v, want 0640", fi.Mode())
	}
}

// TestSaveNewFolderWhole is issue 46 item 6 for a new folder: it is made
// beside its place and renamed there, so a failure leaves no folder and no
// temporary one.
func TestSaveNewFolderWhole(t *testing.T) {
	causal, _ := twoMasks(t)
	parent := t.TempDir()
	dir := filepath.Join(parent, "a", "bm")
	defer func() { rename = os.Rename }()
	rename = func(string, string) error { return fs.ErrPermission }
	if err := causal.Save(dir); err == nil {
		t.Fatal("no error")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a failed save left %s: %v", dir, err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(dir)); len(ents) != 0 {
		t.Errorf("a failed save left %v", ents)
	}
	rename = os.Rename
	if err := causal.Save(dir + string(filepath.Separator)); err != nil { // as in --out bm/
		t.Fatal(err)
	}
	wantSaved(t, dir, causal)
	if ents, _ := os.ReadDir(filepath.Dir(dir)); len(ents) != 1 {
		t.Errorf("beside the folder: %v", ents)
	}
}

// TestSaveRefusesOddFiles: a folder entry that is not a regular file is
// refused before anything is written.
func TestSaveRefusesOddFiles(t *testing.T) {
	causal, none := twoMasks(t)
	dir := filepath.Join(t.TempDir(), "bm")
	if err := causal.Save(dir); err != nil {
		t.Fatal(err)
	}
	os.Rename(filepath.Join(dir, fileFullQIdx), filepath.Join(dir, fileFullQIdx+".keep"))
	os.Mkdir(filepath.Join(dir, fileFullQIdx), 0o755)
	if err := none.Save(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("save over a folder named %s: %v", fileFullQIdx, err)
	}
	os.Remove(filepath.Join(dir, fileFullQIdx))
	os.Rename(filepath.Join(dir, fileFullQIdx+".keep"), filepath.Join(dir, fileFullQIdx))
	wantSaved(t, dir, causal)
}
