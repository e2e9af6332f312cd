package main

import (
	"strings"
	"testing"
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
		{[]string{"--page-size", "16", "--sinks", "s.npy"}, "--sinks does not work with --page-size"},
		{[]string{"--page-size", "16", "--backward"}, "--backward does not work with --page-size"},
		{[]string{"--page-size", "16", "--score", "alibi"}, "no aux tensors"},
	} {
		wantFail(t, runFac(t, "", append(append([]string{}, base...), c.args...)...), c.want)
	}
}
