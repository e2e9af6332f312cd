package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fac-compiler/fac"
)

// TestKeptPairs cross-checks the O(S) counts of the stdlib's masks against
// counting through the block mask (fac.Forward.CountPairs; the blockmask
// tests check that against every pair), at small S, with
// arguments at and past the edges (windows reaching outside the sequence,
// empty windows, prefixes longer than it, document ids that recur apart).
func TestKeptPairs(t *testing.T) {
	masks := []string{"none", "causal", "causal_bottom_right", "sliding_window(5, 3)", "sliding_window(-3, 10)",
		"sliding_window(4, -6)", "sliding_window(1023, 0)", "prefix_lm(0)", "prefix_lm(13)", "prefix_lm(500)",
		"chunked(7)", "chunked(1)", "document"}
	for _, m := range masks {
		fwd, err := fac.CompileForward(fac.Options{Mask: m}, 16)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []int{1, 37, 100} {
			doc := make([]int32, s)
			for i := range doc {
				doc[i] = int32(i * 7 / 10 % 4)
			}
			fast, ok := keptPairsFast(fwd.Mask(), s, doc)
			if !ok {
				t.Fatalf("%s: no O(S) count", m)
			}
			want, err := fwd.CountPairs(fac.Shape{Batch: 1, Heads: 1, KVHeads: 1, SeqQ: s, SeqK: s, Dim: 1}, map[string]any{"doc": doc})
			if err != nil {
				t.Fatal(err)
			}
			if fast != want {
				t.Errorf("%s S=%d: %d pairs, counting each pair gives %d", m, s, fast, want)
			}
		}
	}
	// A user mask is counted through its block mask.
	fwd, err := fac.CompileForward(fac.Options{Mask: "band", Sources: map[string]string{"b.fa": "mask band(b, h, q_idx, kv_idx) {\n    return q_idx - kv_idx < 3 && kv_idx - q_idx < 3\n}\n"}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := keptPairsFast(fwd.Mask(), 10, nil); ok {
		t.Error("a user mask counted by a stdlib formula")
	}
	if n, err := keptPairs(fwd, 10, nil); err != nil || n != 10+2*9+2*8 {
		t.Errorf("band: %d, %v; want 44", n, err)
	}
}

// TestKeptPairsLongContext: counting the anchor masks' pairs at S = 2^17
// takes well under a second. Before, it looped over S² = 1.7e10 pairs a
// mask (`fac bench --seqlen 32768` spent seconds per mask on it).
func TestKeptPairsLongContext(t *testing.T) {
	const s = 1 << 17
	doc := make([]int32, s)
	for i := range doc {
		doc[i] = int32(i / 1000)
	}
	for _, m := range anchorMasks {
		fwd, err := fac.CompileForward(fac.Options{Mask: m}, 16)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan int64, 1)
		go func() {
			n, err := keptPairs(fwd, s, map[string]any{"doc": doc})
			if err != nil {
				t.Error(err)
			}
			done <- n
		}()
		select {
		case n := <-done:
			if n <= 0 || n > int64(s)*s {
				t.Errorf("%s: %d pairs", m, n)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: counting kept pairs at S=%d took over 20 s", m, s)
		}
	}
}

// TestProgress: long work prints a line now and then; short work nothing.
func TestProgress(t *testing.T) {
	defer func(a, e, l time.Duration) { progressAfter, progressEvery, progressEveryLog = a, e, l }(progressAfter, progressEvery, progressEveryLog)
	progressAfter, progressEvery, progressEveryLog = 30*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond
	var buf bytes.Buffer
	err := withProgress(&buf, false, "float64 reference", " (--no-check skips it)", func() error {
		time.Sleep(300 * time.Millisecond)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "fac: float64 reference: ") || !strings.HasSuffix(lines[0], "so far (--no-check skips it)") {
		t.Errorf("progress lines:\n%s", buf.String())
	}
	buf.Reset()
	if err := withProgress(&buf, false, "quick", "", func() error { return nil }); err != nil || buf.Len() != 0 {
		t.Errorf("quick work printed %q", buf.String())
	}
}
