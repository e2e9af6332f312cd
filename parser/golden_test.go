package parser

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGolden parses each testdata/*.fa and compares the AST dump with the
// .ast file beside it; go test ./parser -update rewrites them.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.fa")
	if len(files) == 0 {
		t.Fatal("no golden inputs")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ast, err := ParseFile(f, string(src))
		if err != nil {
			t.Fatalf("%v", err)
		}
		got := Dump(ast)
		want := strings.TrimSuffix(f, ".fa") + ".ast"
		if *update {
			if err := os.WriteFile(want, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		exp, err := os.ReadFile(want)
		if err != nil {
			t.Fatalf("%v (run go test ./parser -update)", err)
		}
		if string(exp) != got {
			t.Errorf("%s: AST differs from %s (run go test ./parser -update and review the diff)", f, want)
		}
	}
}
