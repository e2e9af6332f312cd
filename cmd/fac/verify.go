package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"
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
	maxAbs, rel, lseErr float64
	nans                int // NaN in the kernel's O or LSE
	refNaNs             int // NaN in the reference's
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
