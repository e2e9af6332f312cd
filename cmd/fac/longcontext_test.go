package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/blockmask"
)

// TestSampledCheck: above fullCheckPairs pairs fac run checks a sample of
// rows against a float64 reference of those rows and says so; the sample
// still catches a result outside the tolerance; --full-check checks
// every row.
func TestSampledCheck(t *testing.T) {
	args := []string{"run", "--mask", "sliding_window(60, 0)", "--batch", "1", "--heads", "1", "--seqlen-q", "8200", "--seqlen-k", "8200", "--dim", "8"}
	r := runFac(t, "", args...)
	if r.code != 0 || !strings.Contains(r.stdout, "check sampled: 64 of the 8200 query rows") || !strings.Contains(r.stdout, "check passed") {
		t.Fatalf("sampled check: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	wantFail(t, runFac(t, "", append(args, "--tol", "1e-15")...), "check FAILED")
	small := []string{"run", "--mask", "causal", "--batch", "1", "--heads", "2", "--seqlen-q", "100", "--seqlen-k", "90", "--dim", "8"}
	for _, a := range [][]string{small, append(small, "--full-check")} {
		if r := runFac(t, "", a...); r.code != 0 || strings.Contains(r.stdout, "sampled") || !strings.Contains(r.stdout, "check passed") {
			t.Errorf("%v: %d\n%s\n%s", a, r.code, r.stdout, r.stderr)
		}
	}
}

// TestCheckRows: the sample is deterministic, sorted, without repeats, and
// holds the first and last rows and a row of every batch and head.
func TestCheckRows(t *testing.T) {
	for _, sh := range []fac.Shape{{Batch: 1, Heads: 1, SeqQ: 1 << 20}, {Batch: 2, Heads: 40, SeqQ: 3000}, {Batch: 1, Heads: 2, SeqQ: 10}} {
		rows := checkRows(sh)
		want := min(max(sampleRows, sh.Batch*sh.Heads+2), sh.Batch*sh.Heads*sh.SeqQ)
		if len(rows) != want {
			t.Errorf("%+v: %d rows, want %d", sh, len(rows), want)
		}
		seen := map[[2]int]bool{}
		for i, r := range rows {
			if i > 0 {
				p := rows[i-1]
				if !(p.B < r.B || p.B == r.B && (p.H < r.H || p.H == r.H && p.I < r.I)) {
					t.Fatalf("%+v: rows not sorted or repeated at %d: %v %v", sh, i, p, r)
				}
			}
			seen[[2]int{r.B, r.H}] = true
		}
		if len(seen) != sh.Batch*sh.Heads || rows[0] != (fac.RefRow{}) || rows[len(rows)-1] != (fac.RefRow{B: sh.Batch - 1, H: sh.Heads - 1, I: sh.SeqQ - 1}) {
			t.Errorf("%+v: %d of %d heads, first %v, last %v", sh, len(seen), sh.Batch*sh.Heads, rows[0], rows[len(rows)-1])
		}
		again := checkRows(sh)
		for i := range rows {
			if rows[i] != again[i] {
				t.Fatalf("%+v: not deterministic", sh)
			}
		}
	}
}

// TestBlockmaskLongContext: fac blockmask at a million positions builds
// the sliding window's lists in rows of 7 blocks (a MiB, where full rows
// took a GiB); --full-width writes FlexAttention's full rows.
func TestBlockmaskLongContext(t *testing.T) {
	dir := t.TempDir()
	r := runFac(t, dir, "blockmask", "--mask", "sliding_window(1024, 0)", "--seqlen-q", "1048576", "--seqlen-k", "1048576",
		"--batch", "1", "--heads", "16", "--out", "bm")
	if r.code != 0 || !strings.Contains(r.stdout, "index rows: 7 kv blocks (of 8192), 7 q blocks (of 8192); lists take 1.0 MiB") {
		t.Fatalf("%d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	bm, err := blockmask.Load(filepath.Join(dir, "bm"), 0, 0, 0, 0)
	if err != nil || bm.KVWidth != 7 || bm.QWidth != 7 {
		t.Fatalf("load: %v", err)
	}
	r = runFac(t, dir, "blockmask", "--mask", "causal", "--seqlen-q", "1000", "--seqlen-k", "1000", "--full-width", "--out", "full")
	if r.code != 0 || !strings.Contains(r.stdout, "index rows: 8 kv blocks (of 8), 8 q blocks (of 8)") {
		t.Fatalf("--full-width: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
