package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fac-compiler/fac"
)

// tolerance is what fac run's check accepts for a dtype: O's largest error
// relative to the largest |O| of the reference, and LSE's largest absolute
// error. The reference sees the inputs rounded to the dtype, so what is
// left is the kernel's own rounding: f32 computes in f32 (errors near
// 1e-6); bf16 and f16 round O, and P before P·V, to 8 and 11 significant
// bits (2^-8 ≈ 4e-3, 2^-11 ≈ 5e-4, with headroom for long sums), while LSE
// stays f32 (1e-2 covers the GPU's approximate exp2). The same bounds as
// the GPU tests (tests/gpu_test.go).
type tolerance struct{ o, lse float64 }

var tolerances = map[string]tolerance{
	"f32":  {o: 1e-4, lse: 1e-4},
	"bf16": {o: 2e-2, lse: 1e-2},
	"f16":  {o: 5e-3, lse: 1e-2},
}

type report struct {
	maxAbs, maxRef, rel, lseErr float64
	nans                        int // NaN in the kernel's O or LSE
	refNaNs                     int // NaN in the reference's
}

// compare measures O and LSE against the reference; -inf LSE must match
// exactly, NaN is counted, never hidden.
func compare(o, lse []float32, ro, rlse []float64) report {
	var r report
	maxRef := 0.0
	for i := range o {
		x := float64(o[i])
		if math.IsNaN(ro[i]) {
			r.refNaNs++
		}
		if math.IsNaN(x) {
			r.nans++
			continue
		}
		r.maxAbs = math.Max(r.maxAbs, math.Abs(x-ro[i]))
		maxRef = math.Max(maxRef, math.Abs(ro[i]))
	}
	r.maxRef = maxRef
	if maxRef > 0 {
		r.rel = r.maxAbs / maxRef
	} else {
		r.rel = r.maxAbs
	}
	for i := range lse {
		x := float64(lse[i])
		switch {
		case math.IsNaN(rlse[i]):
			r.refNaNs++
			if !math.IsNaN(x) {
				r.lseErr = math.Inf(1)
			} else {
				r.nans++
			}
		case math.IsNaN(x):
			r.nans++
		case math.IsInf(rlse[i], -1) || math.IsInf(x, -1):
			if x != rlse[i] {
				r.lseErr = math.Inf(1)
			}
		default:
			r.lseErr = math.Max(r.lseErr, math.Abs(x-rlse[i]))
		}
	}
	return r
}

// verdict is nil when the report is within tolerance t, else the error
// fac run exits with. NaN anywhere fails: attention of finite inputs is
// finite, so NaN is a bug in the kernel or in a mod, never a result.
func (r report) verdict(t tolerance, dtype string) error {
	var why []string
	if r.nans > 0 || r.refNaNs > 0 {
		why = append(why, fmt.Sprintf("NaN in the output (%d) or the reference (%d)", r.nans, r.refNaNs))
	}
	// Written so that a NaN error fails too.
	if !(r.rel <= t.o) {
		why = append(why, fmt.Sprintf("O's relative error %.3g > %.3g", r.rel, t.o))
	}
	if !(r.lseErr <= t.lse) {
		why = append(why, fmt.Sprintf("LSE's error %.3g > %.3g", r.lseErr, t.lse))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("check FAILED against float64 attention (tolerance for %s: %.3g relative on O, %.3g on LSE): %s",
		dtype, t.o, t.lse, strings.Join(why, "; "))
}

// report prints r's line and its verdict: the error where r is outside
// tolerance t for dtype (the caller then writes no output: a result that
// fails its check is no result), else the tolerance it met.
func (r report) report(w io.Writer, t tolerance, dtype string) error {
	fmt.Fprintln(w, r.line())
	if err := r.verdict(t, dtype); err != nil {
		return err
	}
	fmt.Fprintf(w, "check passed (tolerance for %s: %.3g relative on O, %.3g on LSE)\n", dtype, t.o, t.lse)
	return nil
}

// checkAgainst compares O and LSE with the float64 reference ref computes
// and reports the verdict (report.report).
func checkAgainst(w io.Writer, o, lse []float32, ref func() (ro, rlse []float64, err error), t tolerance, dtype string) error {
	ro, rlse, err := ref()
	if err != nil {
		return err
	}
	return compare(o, lse, ro, rlse).report(w, t, dtype)
}

// Progress lines: the first after progressAfter, then one every
// progressEvery on a terminal (every progressEveryLog into a log). Vars
// so that tests can shorten them.
var (
	progressAfter    = 2 * time.Second
	progressEvery    = time.Second
	progressEveryLog = 10 * time.Second
)

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// withProgress runs fn; while it runs longer than progressAfter it writes
// a line about it to w now and then, so long work (the O(S²) float64
// reference at large S, the CPU interpreter) is never silent. hint is
// appended to each line (how to skip the work).
func withProgress(w io.Writer, terminal bool, what, hint string, fn func() error) error {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	go func() {
		defer wg.Done()
		every := progressEveryLog
		if terminal {
			every = progressEvery
		}
		wait := progressAfter
		for {
			select {
			case <-done:
				return
			case <-time.After(wait):
				fmt.Fprintf(w, "fac: %s: %.0fs so far%s\n", what, time.Since(start).Seconds(), hint)
				wait = every
			}
		}
	}()
	err := fn()
	close(done)
	wg.Wait() // no line after fn's result is reported
	return err
}

// fullCheckPairs is the largest problem, in (q, kv) pairs over every batch
// and head (B·H·Sq·Sk), that fac run checks against the whole float64
// reference (O(B·H·Sq·Sk·D): about 30 s at this size on two cores). Above
// it, it checks sampleRows rows against a float64 reference of those rows
// only (O(rows·Sk·D)), unless --full-check.
const fullCheckPairs = 1 << 26

// sampleRows is how many query rows a sampled check compares.
const sampleRows = 64

// checkRows picks a sampled check's rows, deterministically: the first and
// the last row of the problem, a row of every (batch, head) (up to 1024 of
// them), then rows from a fixed-seed generator, spread over batches and
// heads in turn, until there are max(sampleRows, B·H + 2); no row twice.
func checkRows(sh fac.Shape) []fac.RefRow {
	bh := sh.Batch * sh.Heads
	n := max(sampleRows, min(bh, 1024)+2)
	total := int64(bh) * int64(sh.SeqQ)
	if int64(n) > total {
		n = int(total)
	}
	seen := map[fac.RefRow]bool{}
	var rows []fac.RefRow
	add := func(r fac.RefRow) {
		if !seen[r] && len(rows) < n {
			seen[r] = true
			rows = append(rows, r)
		}
	}
	add(fac.RefRow{})
	add(fac.RefRow{B: sh.Batch - 1, H: sh.Heads - 1, I: sh.SeqQ - 1})
	rng := rand.New(rand.NewPCG(0x5eed, 0xcafe))
	for m := 0; len(rows) < n; m++ {
		k := m % bh
		add(fac.RefRow{B: k / sh.Heads, H: k % sh.Heads, I: rng.IntN(sh.SeqQ)})
	}
	slices.SortFunc(rows, func(a, b fac.RefRow) int {
		return cmp.Or(cmp.Compare(a.B, b.B), cmp.Compare(a.H, b.H), cmp.Compare(a.I, b.I))
	})
	return rows
}

// checkForward runs fac run's check of O and LSE: against the whole float64
// reference, or, above fullCheckPairs pairs (and without full), against
// the reference of checkRows' rows, saying so on w. The report covers the
// rows compared.
func checkForward(w, stderr io.Writer, term bool, fwd *fac.Forward, in fac.Inputs, sh fac.Shape, o, lse []float32, full bool) (report, error) {
	pairs := int64(sh.Batch) * int64(sh.Heads) * int64(sh.SeqQ) * int64(sh.SeqK)
	if full || pairs <= fullCheckPairs {
		var ro, rlse []float64
		what := fmt.Sprintf("float64 reference, %d×%d pairs per head", sh.SeqQ, sh.SeqK)
		if err := withProgress(stderr, term, what, " (--no-check skips it)", func() (err error) {
			ro, rlse, err = fwd.Reference(in, sh)
			return err
		}); err != nil {
			return report{}, err
		}
		return compare(o, lse, ro, rlse), nil
	}
	rows := checkRows(sh)
	fmt.Fprintf(w, "check sampled: %d of the %d query rows (the first, the last, every batch and head) against a float64 reference of those rows; "+
		"B·H·Sq·Sk = %d pairs is over %d (--full-check computes the whole reference)\n", len(rows), sh.Batch*sh.Heads*sh.SeqQ, pairs, fullCheckPairs)
	var ro, rlse []float64
	what := fmt.Sprintf("float64 reference of %d rows, %d keys each", len(rows), sh.SeqK)
	if err := withProgress(stderr, term, what, " (--no-check skips it)", func() (err error) {
		ro, rlse, err = fwd.ReferenceRows(in, sh, rows)
		return err
	}); err != nil {
		return report{}, err
	}
	d := sh.VDim() // O's rows
	so, slse := make([]float32, len(rows)*d), make([]float32, len(rows))
	for n, r := range rows {
		at := (r.B*sh.Heads+r.H)*sh.SeqQ + r.I
		copy(so[n*d:][:d], o[at*d:][:d])
		slse[n] = lse[at]
	}
	return compare(so, slse, ro, rlse), nil
}

// line is the check's figures for the report, each one named (issue 46
// item 20: "relative to max |ref| = 2.6e-07" read as if 2.6e-07 were max
// |ref|): O's largest error, the reference's largest |O|, their ratio
// (the relative error the tolerance bounds), then LSE's largest error and
// the NaN counts.
func (r report) line() string {
	return fmt.Sprintf("O: max |O - ref| = %.3g, max |ref| = %.3g, relative error %.3g; LSE: max |LSE - ref| = %.3g; NaN: %d (reference: %d)",
		r.maxAbs, r.maxRef, r.rel, r.lseErr, r.nans, r.refNaNs)
}
