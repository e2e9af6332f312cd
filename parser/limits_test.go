package parser

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fac-compiler/fac/lang"
)

// TestReadFile: sources are read whole only up to the size limit; an
// endless stream such as /dev/zero used to fill memory.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.fa")
	if err := os.WriteFile(small, []byte("const N = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if src, err := ReadFile(small); err != nil || src != "const N = 1\n" {
		t.Errorf("ReadFile(small) = %q, %v", src, err)
	}
	exact := filepath.Join(dir, "exact.fa")
	if err := os.WriteFile(exact, []byte(strings.Repeat("\n", lang.MaxSourceSize)), 0o644); err != nil {
		t.Fatal(err)
	}
	if src, err := ReadFile(exact); err != nil || len(src) != lang.MaxSourceSize {
		t.Errorf("ReadFile(exactly the limit) = %d bytes, %v", len(src), err)
	}
	big := filepath.Join(dir, "big.fa")
	if err := os.WriteFile(big, []byte(strings.Repeat("\n", lang.MaxSourceSize+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(big); err == nil || err.Error() != big+": source file is larger than 1 MiB, the limit for one file" {
		t.Errorf("ReadFile(big) = %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.fa")); err == nil || !os.IsNotExist(err) {
		t.Errorf("ReadFile(missing) = %v", err)
	}
	if _, err := ReadFile(dir); err == nil {
		t.Errorf("ReadFile(a directory) succeeded")
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		done := make(chan error, 1)
		go func() { _, err := ReadFile("/dev/zero"); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") {
				t.Errorf("ReadFile(/dev/zero) = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("ReadFile(/dev/zero) still reading after 10 s")
		}
	}
}

// TestParseExprSlips: values given on a command line get the same checks.
func TestParseExprSlips(t *testing.T) {
	cases := []struct{ src, want string }{
		{"sliding_window(256 // 2, 0)", "<mask>:1:20: // is not an operator (Python's floor division)"},
		{"sliding_window(256 & 2, 0)", "<mask>:1:20: & is not an operator"},
		{strings.Repeat("(", 200) + "causal" + strings.Repeat(")", 200), "<mask>:1:101: nesting too deep"},
		{"f(" + strings.Repeat("1 + ", lang.MaxExprOps+1) + "1)", "<mask>:1:1: expression too large"},
	}
	for _, c := range cases {
		_, err := ParseExpr("<mask>", c.src)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("ParseExpr(%.40q) = %.200v, want prefix %q", c.src, err, c.want)
		}
	}
	// A comment not right after an operand is still a comment.
	if _, err := ParseExpr("<mask>", "sliding_window(256, // left\n 0)"); err != nil {
		t.Errorf("comment after a comma: %v", err)
	}
}

// TestNestingCount pins what counts as a level: brackets, prefix
// operators still being applied, else ifs; binary - is no level.
func TestNestingCount(t *testing.T) {
	level := func(src string) int {
		toks, _ := significant("x", src)
		for n := 0; n <= 200; n++ {
			if _, deep := tooDeepAt(toks, n); !deep {
				return n
			}
		}
		return -1
	}
	cases := []struct {
		src  string
		want int // the deepest level reached
	}{
		{"a", 0},
		{"(a)", 1},
		{"-a", 1},
		{"a - b - c - d", 0},
		{"- - a", 2},
		{"-(-(a))", 4},
		{"-f(x)(y)[z]", 2},
		{"-a + (b)", 1},
		{"!a && !(b)", 2},
		{"{ if a { } else if b { } else if c { x } }", 4},
		{"{ if a { } else if b { } } { if c { } }", 3},
		{"{ if a { } else { } }", 2},
		{"a)))) (b)", 1}, // stray closers do not go below the file
	}
	for _, c := range cases {
		if got := level(c.src); got != c.want {
			t.Errorf("%q reaches level %d, want %d", c.src, got, c.want)
		}
	}
}
