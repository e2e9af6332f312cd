package codegen

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCoreImportsNoTarget keeps the dependency one way: targets import
// codegen/async and codegen/core, async imports core, never the reverse
// (and no target imports this package).
func TestCoreImportsNoTarget(t *testing.T) {
	for dir, banned := range map[string][]string{
		"core":  {"codegen/sm", "codegen/async", "fac/codegen\""},
		"async": {"codegen/sm", "fac/codegen\""},
		"sm80":  {"fac/codegen\"", "codegen/sm90", "codegen/async"},
		"sm90":  {"fac/codegen\""},
	} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range ast.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				for _, b := range banned {
					if strings.Contains(p+"\"", b) {
						t.Errorf("%s imports %s", f, p)
					}
				}
			}
		}
	}
}
