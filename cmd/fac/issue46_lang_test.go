package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Regression tests for issue 46 ("Trust, second pass"), the front end's
// items as the CLI shows them; each failed on the code before its fix.

// TestNestedCombinatorsIssue46Item1: the nesting example of
// docs/language.md and not_mask(not_mask(causal)) run on the CPU device
// and pass the check against the reference (they failed with
// "and_masks calls itself; recursion is not allowed").
func TestNestedCombinatorsIssue46Item1(t *testing.T) {
	for _, m := range []string{
		"and_masks(causal, and_masks(document, sliding_window(1024, 0)))",
		"not_mask(not_mask(causal))",
	} {
		r := runFac(t, "", "run", "--mask", m, "--random-aux", "--seqlen-q", "64", "--seqlen-k", "64", "--dim", "16")
		wantOK(t, r)
		if !strings.Contains(r.stdout, "kernel flash_fwd mask="+m+" ") || !strings.Contains(r.stdout, "\ncheck passed") {
			t.Errorf("fac run --mask %q:\n%s%s", m, r.stdout, r.stderr)
		}
	}
	// Recursion is still refused.
	dir := t.TempDir()
	src := "mask same<n: i32 = 0>(b, h, q_idx, kv_idx) {\n    return same(n)(b, h, q_idx, kv_idx)\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "rec.fa"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	wantFail(t, runFac(t, dir, "check", "rec.fa"), "fac: rec.fa:2:19: same calls itself; recursion is not allowed")
}

// TestConstOverflowIssue46Item5: sliding_window(65536*65536*65536*65536,
// 0) compiled as sliding_window(0, 0) (the product wrapped at int64); it
// is an error at the operator, with the --mask value and a caret.
func TestConstOverflowIssue46Item5(t *testing.T) {
	r := runFac(t, "", "run", "--mask", "sliding_window(65536*65536*65536*65536, 0)", "--seqlen-q", "64", "--seqlen-k", "64", "--dim", "16")
	want := "fac: <mask>:1:33: constant 281474976710656 * 65536 overflows: compile-time integers are exact, in 64 bits\n" +
		"    sliding_window(65536*65536*65536*65536, 0)\n" +
		"                                    ^\n"
	if r.code != 1 || r.stderr != want || r.stdout != "" {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant stderr:\n%s", r.code, r.stdout, r.stderr, want)
	}
	wantFail(t, runFac(t, "", "run", "--mask", "sliding_window(65536*65536, 0)", "--seqlen-q", "64", "--seqlen-k", "64", "--dim", "16"),
		"fac: <mask>:1:16: mask sliding_window parameter left is i32, got 4294967296, which overflows i32\n    sliding_window(65536*65536, 0)\n                   ^")
}

// TestHintsIssue46Item18: a new user's mistakes get a hint: an unknown mod
// close to one of the user's says which; one that is no stdlib mod, with
// no file given, says to give the file with -f; Python's chained
// comparison, = for == and torch.where say what to write; an error in a
// --mask value shows it with a caret; a mod's independent errors are all
// reported.
func TestHintsIssue46Item18(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("patch.fa", "mask patch_neighborhood(b, h, q_idx, kv_idx) {\n    return abs(q_idx - kv_idx) < 16\n}\n")
	run := func(args ...string) cliResult {
		t.Helper()
		return runFac(t, dir, append([]string{"run", "--seqlen-q", "32", "--seqlen-k", "32", "--dim", "16"}, args...)...)
	}
	wantFail(t, run("-f", "patch.fa", "--mask", "patch_neighbourhood"),
		"fac: <mask>:1:1: unknown mask mod patch_neighbourhood; did you mean patch_neighborhood?\n    patch_neighbourhood\n    ^\n")
	r := run("--mask", "patch_neighborhood")
	wantFail(t, r, "fac: <mask>:1:1: unknown mask mod patch_neighborhood (mask mods: and_masks, ",
		"; no source file was given: if patch_neighborhood is declared in your file, pass it: -f FILE --mask patch_neighborhood\n    patch_neighborhood\n    ^\n")
	// With a file, no -f hint: the name is not in it.
	if r := run("-f", "patch.fa", "--mask", "zzz"); !strings.Contains(r.stderr, "unknown mask mod zzz") || strings.Contains(r.stderr, "-f FILE") {
		t.Errorf("with -f given:\n%s", r.stderr)
	}
	wantOK(t, run("-f", "patch.fa", "--mask", "patch_neighborhood"))

	write("chain.fa", "mask m(b, h, q_idx, kv_idx) {\n    let d = q_idx - kv_idx\n    return 0 <= d < 64\n}\n")
	write("assign.fa", "mask m(b, h, q_idx, kv_idx) {\n    return q_idx = kv_idx\n}\n")
	write("torch.fa", "score m(s, b, h, q_idx, kv_idx) {\n    return torch.where(q_idx >= kv_idx, s, -inf)\n}\n")
	for _, c := range []struct{ file, want string }{
		{"chain.fa", "fac: chain.fa:3:19: syntax error: unexpected \"<\": comparisons do not chain (Python's a < b < c): write 0 <= d && d < 64\n        return 0 <= d < 64\n                      ^\n"},
		{"assign.fa", "fac: assign.fa:2:18: syntax error: unexpected \"=\": = assigns (a var); to compare, write q_idx == kv_idx\n        return q_idx = kv_idx\n                     ^\n"},
		{"torch.fa", "fac: torch.fa:2:17: syntax error: unexpected character '.': fac has no modules or attributes (torch.where): write select(cond, a, b) (or where(cond, a, b))\n        return torch.where(q_idx >= kv_idx, s, -inf)\n                    ^\n"},
	} {
		r := runFac(t, dir, "check", c.file)
		if r.code != 1 || r.stderr != c.want {
			t.Errorf("fac check %s: exit %d\n%s\nwant\n%s", c.file, r.code, r.stderr, c.want)
		}
	}
	wantFail(t, run("--mask", "sliding_window(64, 1.5)"),
		"fac: <mask>:1:20: mask sliding_window parameter right is i32, got float constant 1.5\n    sliding_window(64, 1.5)\n                       ^\n")

	write("multi.fa", "mask m(b, h, q_idx, kv_idx) {\n    let a = q_idx + 1.5\n    let c = undefined_x + 1\n    let e = kv_idx * true\n    return q_idx >= kv_idx\n}\n")
	wantFail(t, runFac(t, dir, "check", "multi.fa"),
		"fac: multi.fa:2:21: cannot use float constant 1.5 as i32",
		"\nmulti.fa:3:13: undefined: undefined_x\n",
		"\nmulti.fa:4:22: cannot use bool constant true as i32\n")
}

// TestDuplicateFileIssue46Item20: fac check a.fa a.fa said "ok" (the file
// was read once, its declarations counted twice); a file given twice, by
// any name, is an error, for every command.
func TestDuplicateFileIssue46Item20(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.fa"), []byte("mask a(b, h, q_idx, kv_idx) { return true }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.fa", filepath.Join(dir, "link.fa")); err != nil {
		t.Fatal(err)
	}
	wantFail(t, runFac(t, dir, "check", "a.fa", "a.fa"), "fac: a.fa is given twice: give each file once (its declarations would be declared twice)\n")
	wantFail(t, runFac(t, dir, "check", "a.fa", "./a.fa"), "fac: a.fa and ./a.fa are the same file: give each file once")
	wantFail(t, runFac(t, dir, "check", "a.fa", "link.fa"), "fac: a.fa and link.fa are the same file")
	wantFail(t, runFac(t, dir, "run", "a.fa", "-f", "a.fa", "--mask", "a"), "fac: a.fa is given twice")
	r := runFac(t, dir, "check", "a.fa")
	if r.code != 0 || r.stdout != "ok: 1 declarations in 1 files\n" {
		t.Errorf("fac check a.fa: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestLanguageTourIssue46Item20: the tour of docs/language.md shows what
// its commands print today: the file it has the reader save, the output
// of fac check and fac run on it (timings aside), and the error of the
// example with a typo, as fac check prints it for that file name. Its
// sample output was out of date.
func TestLanguageTourIssue46Item20(t *testing.T) {
	data, err := os.ReadFile("../../docs/language.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "## A five-minute tour")
	end := strings.Index(doc, "### The standard library")
	if start < 0 || end < start {
		t.Fatal("docs/language.md has no tour")
	}
	tour := doc[start:end]
	block := func(fence string) string {
		t.Helper()
		i := strings.Index(tour, "```"+fence+"\n")
		if i < 0 {
			t.Fatalf("the tour has no ```%s block", fence)
		}
		body := tour[i+len(fence)+4:]
		j := strings.Index(body, "```\n")
		if j < 0 {
			t.Fatalf("unclosed ```%s block", fence)
		}
		tour = body[j+4:]
		return body[:j]
	}
	src := block("fa strided.fa")
	commands := block("sh")
	output := block("text")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "strided.fa"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(commands), "\n") {
		args := strings.Fields(line)
		if len(args) == 0 || args[0] != "fac" {
			t.Fatalf("tour command %q does not run fac", line)
		}
		r := runFac(t, dir, args[1:]...)
		wantOK(t, r)
		got.WriteString(r.stdout)
	}
	timing := regexp.MustCompile(`(?m)^compile [0-9.]+ ms, run [0-9.]+ ms$`)
	norm := func(s string) string { return timing.ReplaceAllString(s, "compile T ms, run T ms") }
	if norm(got.String()) != norm(output) {
		t.Errorf("the tour shows\n%s\nbut its commands print\n%s", output, got.String())
	}
	// The mistake, checked as the file the reader saved.
	bad := block("fa-error strided.fa")
	want := block("text")
	if err := os.WriteFile(filepath.Join(dir, "strided.fa"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runFac(t, dir, "check", "strided.fa")
	if r.code != 1 || r.stderr != want {
		t.Errorf("fac check strided.fa (with the typo): exit %d\n%s\nthe tour shows\n%s", r.code, r.stderr, want)
	}
}
