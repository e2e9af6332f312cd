package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen/llc"
)

// TestRunPaged: --page-size runs flash_fwd_paged over shuffled pages with
// the given cache lengths (0 and 1 among them) and checks it; bad sizes,
// length counts and flags the paged call does not take are errors that
// name the value.
func TestRunPaged(t *testing.T) {
	r := runFac(t, "", "run", "--mask", "causal_bottom_right", "--batch", "4", "--heads", "8", "--kv-heads", "2",
		"--seqlen-q", "2", "--dim", "16", "--page-size", "16", "--cache-seqlens", "300,0,1,65")
	wantOK(t, r)
	for _, want := range []string{"kernel flash_fwd_paged", "pages of 16 keys (shuffled), cache lengths [300 0 1 65]",
		"decoding: flash_fwd_paged", "check passed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	base := []string{"run", "--batch", "2", "--seqlen-q", "1", "--seqlen-k", "40", "--dim", "16"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--page-size", "0"}, "--page-size 0"},
		{[]string{"--page-size", "-4"}, "--page-size -4"},
		{[]string{"--page-size", "16", "--cache-seqlens", "1,2,3"}, "--cache-seqlens has 3 lengths: want one per sequence (--batch 2)"},
		{[]string{"--page-size", "16", "--cache-seqlens", "5,-1"}, "length -1 of sequence 1"},
		{[]string{"--page-size", "16", "--sinks", "s.npy"}, "--sinks: open s.npy"},
		{[]string{"--page-size", "16", "--backward"}, "--backward does not work with --page-size"},
		{[]string{"--page-size", "16", "--score", "alibi"}, "no aux tensors"},
	} {
		wantFail(t, runFac(t, "", append(append([]string{}, base...), c.args...)...), c.want)
	}
}

// TestRunPagedAppend: --append N appends N keys a sequence before the
// attention (rotated by --rotary, over --rotary-dim columns) and checks
// the output and the cache; the flags' bad values and combinations are
// errors that name them.
func TestRunPagedAppend(t *testing.T) {
	for _, rot := range [][]string{{"--rotary", "neox"}, {"--rotary", "gptj", "--rotary-dim", "8"}} {
		r := runFac(t, "", append([]string{"run", "--mask", "causal_bottom_right", "--batch", "3", "--heads", "4", "--kv-heads", "2",
			"--dim", "16", "--page-size", "16", "--cache-seqlens", "30,0,15", "--append", "3"}, rot...)...)
		wantOK(t, r)
		for _, want := range []string{"cache lengths [30 0 15]", "append: 3 keys and values a sequence (rotary " + rot[1],
			"then attention over lengths [33 3 18]", "decoding: kv_append + flash_fwd_paged", "cache lengths now [33 3 18]",
			"check passed", "cache check passed"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%v: stdout lacks %q:\n%s", rot, want, r.stdout)
			}
		}
	}
	base := []string{"run", "--batch", "2", "--seqlen-k", "40", "--dim", "16"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--append", "2"}, "--append is for a paged KV cache: give --page-size N too"},
		{[]string{"--page-size", "16", "--append", "0"}, "--append 0: want 1 to 2^20"},
		{[]string{"--page-size", "16", "--append", "2", "--seqlen-q", "3"}, "--seqlen-q must be 2"},
		{[]string{"--page-size", "16", "--rotary", "neox"}, "--rotary rotates the keys --append N appends"},
		{[]string{"--page-size", "16", "--append", "2", "--rotary", "rope"}, "--rotary rope: want neox"},
		{[]string{"--page-size", "16", "--append", "2", "--rotary-dim", "8"}, "--rotary-dim 8 without --rotary"},
		{[]string{"--page-size", "16", "--append", "2", "--rotary", "gptj", "--rotary-dim", "7"}, "--rotary-dim 7: want an even count"},
		{[]string{"--page-size", "16", "--append", "2", "--rotary", "gptj", "--rotary-dim", "32"}, "--rotary-dim 32"},
	} {
		wantFail(t, runFac(t, "", append(append([]string{}, base...), c.args...)...), c.want)
	}
}

// TestRunRagged: --seqlens-q with --page-size runs a ragged batch
// (flash_fwd_paged_varlen): decode rows, a chunk across a page boundary, a
// whole sequence and one with no queries, checked in full, and, over
// fullCheckPairs, on sampled rows; counts that do not fit the caches and
// flags of the other paged calls are errors that name them.
func TestRunRagged(t *testing.T) {
	r := runFac(t, "", "run", "--mask", "sliding_window(40, 0)", "--batch", "5", "--heads", "8", "--kv-heads", "2",
		"--dim", "16", "--page-size", "16", "--cache-seqlens", "300,1,70,50,20", "--seqlens-q", "1,1,37,0,20")
	wantOK(t, r)
	for _, want := range []string{"kernel flash_fwd_paged_varlen", "59 queries (2 decode rows, 2 prefill chunks)",
		"query counts [1 1 37 0 20], cache lengths [300 1 70 50 20]", "decoding: flash_fwd_paged_varlen", "check passed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runFac(t, "", "run", "--mask", "sliding_window(60, 0)", "--batch", "2", "--heads", "1", "--dim", "8", "--page-size", "64",
		"--cache-seqlens", "8200,8200", "--seqlens-q", "1,8200")
	wantOK(t, r)
	if !strings.Contains(r.stdout, "check sampled") || !strings.Contains(r.stdout, "check passed") {
		t.Errorf("a batch over 2^26 pairs: not a sampled check:\n%s", r.stdout)
	}
	base := []string{"run", "--batch", "2", "--seqlen-k", "40", "--dim", "16"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--seqlens-q", "1,1"}, "--seqlens-q is for a paged KV cache: give --page-size N too"},
		{[]string{"--page-size", "16", "--seqlens-q", "1,2,3"}, "--seqlens-q has 3 counts: want one per sequence (--batch 2)"},
		{[]string{"--page-size", "16", "--seqlens-q", "1,41"}, "41 queries for sequence 1, whose cache holds 40 keys"},
		{[]string{"--page-size", "16", "--seqlens-q", "1,-1"}, "-1 queries for sequence 1"},
		{[]string{"--page-size", "16", "--seqlens-q", "1,1", "--append", "1"}, "--append does not work with --seqlens-q"},
		{[]string{"--page-size", "16", "--seqlens-q", "1,1", "--seqlen-q", "2"}, "--seqlen-q does not work with --seqlens-q"},
	} {
		wantFail(t, runFac(t, "", append(append([]string{}, base...), c.args...)...), c.want)
	}
}

// TestBenchPagedFlags: fac bench --page-size refuses what it cannot time,
// before looking for a GPU.
func TestBenchPagedFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--decode", "--page-size", "0"}, "--page-size 0"},
		{[]string{"--decode", "--page-size", "16,-2"}, "--page-size -2"},
		{[]string{"--page-size", "16"}, "give --decode"},
		{[]string{"--page-size", "16", "--step"}, "--page-size [16] times paged decoding"},
		{[]string{"--page-size", "16", "--varlen-len", "1000"}, "--page-size"},
		{[]string{"--ragged", "--decode"}, "--ragged times its own batch"},
		{[]string{"--ragged", "--page-size", "16,64"}, "--ragged times one page size"},
		{[]string{"--ragged", "--cache-range", "4096"}, "--cache-range [4096]: want LO,HI"},
		{[]string{"--ragged", "--decode-rows", "-1"}, "--decode-rows -1"},
		{[]string{"--ragged", "--prefill", "0"}, "--prefill 0"},
		{[]string{"--prefill", "16"}, "give --ragged"},
	} {
		wantFail(t, runFac(t, "", append([]string{"bench"}, c.args...)...), c.want)
	}
}

// TestBuildPaged: fac build --paged bundles flash_fwd_paged and
// flash_fwd_paged_varlen at both tile heights, keys gathered and 1, 2 and
// 4 pages per tile, and kv_append, beside the decoding kernels,
// and refuses a mask that has no paged form, naming it.
func TestBuildPaged(t *testing.T) {
	if _, err := llc.Find(); err != nil {
		t.Skipf("no llc: %v", err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "p.bundle")
	r := runFac(t, "", "build", "--paged", "--mask", "causal_bottom_right", "--dim", "64", "--cache-dir", "-", "-v", "-o", out)
	wantOK(t, r)
	if n := strings.Count(r.stderr, "build: flash_fwd_paged "); n != 8 {
		t.Errorf("%d flash_fwd_paged kernels, want 8 (BLOCK_M 16 and 64, TILE_PAGES 0, 1, 2 and 4):\n%s", n, r.stderr)
	}
	if n := strings.Count(r.stderr, "build: flash_fwd_paged_varlen "); n != 8 {
		t.Errorf("%d flash_fwd_paged_varlen kernels, want 8 (ragged batches; BLOCK_M 16 and 64, TILE_PAGES 0, 1, 2 and 4):\n%s", n, r.stderr)
	}
	if n := strings.Count(r.stderr, "build: kv_append "); n != 1 {
		t.Errorf("%d kv_append kernels, want 1 (appending calls):\n%s", n, r.stderr)
	}
	wantFail(t, runFac(t, "", "build", "--paged", "--mask", "document", "--dim", "64", "--cache-dir", "-", "-o", out), "--paged, mask document", "no aux tensors")
}
