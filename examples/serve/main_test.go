package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// tinyArgs is a run small enough for the CPU reference device in well
// under a second: GQA 2, a page size that prompts cross, prefill chunks
// shorter than most prompts, requests that generate one token (no decode
// step) and a cache too small for the batch, so admissions wait for pages.
var tinyArgs = []string{"-requests", "10", "-prompt", "3:40", "-gen", "1:10", "-arrival", "0.7",
	"-page-size", "8", "-pages", "14", "-heads", "4", "-kv-heads", "2", "-dim", "16", "-hidden", "16",
	"-max-batch", "4", "-chunk", "16", "-seed", "7"}

func tinyConfig(t *testing.T, extra ...string) config {
	t.Helper()
	c, err := parseFlags(append(append([]string{}, tinyArgs...), extra...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServeCPU runs the loop on the CPU device with every step checked
// and checks its counts against what the requests it drew must give:
// every request finished and gave back its pages, each prompt token
// prefilled and each generated token but the first decoded once, the KV
// bytes the calls attended over, one check per call, all passed. Without
// checks the run is the same (the checks draw from a stream of their own).
func TestServeCPU(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"keys gathered by page", nil}, // 8-key pages
		{"4 pages per tile, gptj, bf16", []string{"-page-size", "16", "-pages", "7", "-rotary", "gptj", "-dtype", "bf16"}},
	} {
		t.Run(tc.name, func(t *testing.T) { serveCPU(t, tc.extra) })
	}
}

func serveCPU(t *testing.T, extra []string) {
	c := tinyConfig(t, append([]string{"-check-every", "1"}, extra...)...)
	var out bytes.Buffer
	st, err := run(c, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	reqs := makeRequests(c)
	prompts, decodes, generated := 0, 0, 0
	prefillKV, decodeKV := 0.0, 0.0
	elem := 4
	if c.dtype == "bf16" {
		elem = 2
	}
	row := float64(c.kvHeads * 2 * c.dim * elem) // bytes of a key and its value
	oneToken := 0
	for _, r := range reqs {
		prompts += r.prompt
		decodes += r.gen - 1
		generated += r.gen
		if r.gen == 1 {
			oneToken++
		}
		for n := 0; n < r.prompt; {
			n = min(n+c.chunk, r.prompt)
			prefillKV += float64(n) * row
		}
		for j := 1; j < r.gen; j++ {
			decodeKV += float64(r.prompt+j) * row
		}
	}
	if oneToken == 0 || decodes == 0 {
		t.Fatalf("the requests drawn exercise too little: %d generate one token, %d decode steps", oneToken, decodes)
	}
	for _, f := range []struct {
		name      string
		got, want int
	}{
		{"finished requests", st.finished, c.requests},
		{"prefill tokens", st.prefillTokens, prompts},
		{"decode tokens", st.decodeTokens, decodes},
		{"generated tokens", st.generated, generated},
		{"checks", st.checks, st.prefillCalls + st.decodeCalls},
		{"pages held at the end", st.pagesLeft, 0},
	} {
		if f.got != f.want {
			t.Errorf("%s: %d, want %d", f.name, f.got, f.want)
		}
	}
	if st.prefillKV != prefillKV || st.decodeKV != decodeKV {
		t.Errorf("KV bytes attended over: prefill %g, decode %g; want %g, %g", st.prefillKV, st.decodeKV, prefillKV, decodeKV)
	}
	if st.checks == 0 || st.pageWaits == 0 || st.peakBatch > c.maxBatch || st.peakPages > c.numPages || st.peakBatch < 2 {
		t.Errorf("checks %d, steps waiting for pages %d, batch up to %d (of %d), pages up to %d (of %d): want checks, waits and batches of several",
			st.checks, st.pageWaits, st.peakBatch, c.maxBatch, st.peakPages, c.numPages)
	}
	for _, want := range []string{
		fmt.Sprintf("prefill: %d tokens in ", prompts),
		fmt.Sprintf("decode: %d tokens in ", decodes),
		fmt.Sprintf("generated %d tokens for %d requests", generated, c.requests),
		fmt.Sprintf("checks: %d sampled calls passed", st.checks),
		"device: cpu", "kv_append + flash_fwd_paged",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q", want)
		}
	}

	quiet, err := run(tinyConfig(t, append([]string{"-check-every", "0"}, extra...)...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if quiet.checks != 0 || quiet.steps != st.steps || quiet.prefillCalls != st.prefillCalls || quiet.decodeCalls != st.decodeCalls ||
		quiet.pageWaits != st.pageWaits || quiet.peakPages != st.peakPages {
		t.Errorf("without checks: %+v\nwith them: %+v", quiet, st)
	}
}

// TestServeCheckFails: an output that is off fails the first check, and
// the error says where.
func TestServeCheckFails(t *testing.T) {
	c := tinyConfig(t, "-check-every", "1", "-requests", "2", "-rotary", "gptj")
	c.tamper = func(o []float32) {
		for i := range o {
			o[i] *= 1.01
		}
	}
	_, err := run(c, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "step 0, prefill call") || !strings.Contains(err.Error(), "check FAILED against the float64 reference") ||
		!strings.Contains(err.Error(), "O's relative error") {
		t.Fatalf("error %v: want a failed check of step 0's prefill call", err)
	}
}

// TestServeFlags: what the command line refuses.
func TestServeFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-prompt", "5:3"}, "-prompt 5:3: want 1 ≤ MIN ≤ MAX"},
		{[]string{"-gen", "x"}, `-gen "x": want MIN:MAX or N`},
		{[]string{"-heads", "3"}, "want kv heads that divide the query heads"},
		{[]string{"-dim", "15"}, "want an even head dim"},
		{[]string{"-pages", "4"}, "-pages 4: the longest request (40 prompt and 10 generated tokens, 49 keys in the cache) needs 7 pages of 8 keys"},
		{[]string{"-device", "tpu"}, `-device "tpu": want cpu or cuda`},
		{[]string{"-rotary", "yarn"}, "-rotary: rotary form"},
		{[]string{"-dtype", "f64"}, `-dtype "f64"`},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		c, err := parseFlags(append(append([]string{}, tinyArgs...), tc.args...), io.Discard)
		if err == nil {
			_, err = run(c, io.Discard)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
