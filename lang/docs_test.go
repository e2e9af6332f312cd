package lang_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/parser"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

const docPath = "../docs/language.md"

// docBlock is a fenced block of docs/language.md: a ```fa example, which
// must check, or a ```fa-error example, which must fail with exactly the
// text of the ```text block after it. The example is checked as
// example.fa, or as the file named after the block's kind (```fa-error
// strided.fa), so that the text shows what `fac check` prints for the
// file the guide tells the reader to save.
type docBlock struct {
	line     int    // line of the opening fence, 1-based
	file     string // the example's file name
	err      bool   // fa-error
	src      string // the example
	want     string // for fa-error: the text block's content
	textFrom int    // for fa-error: index of the text block's first content line, 0-based
	textTo   int    // ... and of its closing fence
}

// docBlocks parses the fenced blocks out of the markdown lines.
func docBlocks(t *testing.T, lines []string) []docBlock {
	t.Helper()
	var out []docBlock
	for i := 0; i < len(lines); i++ {
		info, ok := strings.CutPrefix(lines[i], "```")
		if !ok || info == "" {
			continue
		}
		end := closing(lines, i+1)
		if end < 0 {
			t.Fatalf("%s:%d: unclosed ``` block", docPath, i+1)
		}
		kind, file, _ := strings.Cut(info, " ")
		if file == "" {
			file = "example.fa"
		}
		if kind == "fa" || kind == "fa-error" {
			b := docBlock{line: i + 1, file: file, err: kind == "fa-error", src: strings.Join(lines[i+1:end], "\n") + "\n"}
			if b.err {
				// The expected text follows, after blank lines only.
				j := end + 1
				for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
					j++
				}
				if j >= len(lines) || lines[j] != "```text" {
					t.Fatalf("%s:%d: fa-error block is not followed by a ```text block", docPath, i+1)
				}
				tend := closing(lines, j+1)
				if tend < 0 {
					t.Fatalf("%s:%d: unclosed ```text block", docPath, j+1)
				}
				b.want, b.textFrom, b.textTo = strings.Join(lines[j+1:tend], "\n"), j+1, tend
			}
			out = append(out, b)
		}
		i = end
	}
	return out
}

func closing(lines []string, from int) int {
	for j := from; j < len(lines); j++ {
		if lines[j] == "```" {
			return j
		}
	}
	return -1
}

// docCheck returns what `fac check FILE` prints on stderr for src saved as
// file, without the trailing newline; "" when the file checks.
func docCheck(file, src string) string {
	if err := checkFiles(map[string]string{file: src}); err != nil {
		return "fac: " + err.Error()
	}
	return ""
}

// TestDocExamples checks every example of docs/language.md. With -update it
// rewrites the expected text after each fa-error block.
func TestDocExamples(t *testing.T) {
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	blocks := docBlocks(t, lines)
	var good, bad int
	for _, b := range blocks {
		if b.err {
			bad++
		} else {
			good++
		}
	}
	if good < 25 || bad < 8 {
		t.Fatalf("found %d fa and %d fa-error blocks in %s; the guide has more", good, bad, docPath)
	}
	changed := false
	for i := len(blocks) - 1; i >= 0; i-- { // backwards, so edits keep earlier line numbers
		b := blocks[i]
		got := docCheck(b.file, b.src)
		switch {
		case !b.err && got != "":
			t.Errorf("%s:%d: example does not check:\n%s", docPath, b.line, got)
		case !b.err:
			if err := useMods(map[string]string{b.file: b.src}); err != nil {
				t.Errorf("%s:%d: %v", docPath, b.line, err)
			}
		case b.err && got == "":
			t.Errorf("%s:%d: fa-error example checks without error", docPath, b.line)
		case b.err && got != b.want:
			if *update {
				lines = append(lines[:b.textFrom], append(strings.Split(got, "\n"), lines[b.textTo:]...)...)
				changed = true
				continue
			}
			t.Errorf("%s:%d: fa-error example fails with\n%s\nbut the guide says\n%s", docPath, b.line, got, b.want)
		}
		if b.err && strings.Contains(got, "internal compiler error") {
			t.Errorf("%s:%d: not a user error:\n%s", docPath, b.line, got)
		}
	}
	if changed {
		if err := os.WriteFile(docPath, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDocExampleNames makes sure examples do not lean on each other: each
// one is a file of its own, so the names it uses are its own or the
// stdlib's.
func TestDocExampleNames(t *testing.T) {
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range docBlocks(t, strings.Split(string(data), "\n")) {
		f, err := parser.ParseFile("example.fa", b.src)
		if err != nil {
			continue // fa-error blocks may not parse
		}
		if len(f.Decls) == 0 {
			t.Errorf("%s:%d: example declares nothing", docPath, b.line)
		}
	}
}

// exampleMasks reads examples/masks/*.fa.
func exampleMasks(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("../examples/masks/*.fa")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 4 {
		t.Fatalf("want at least 4 examples in examples/masks, found %d", len(paths))
	}
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out["examples/masks/"+filepath.Base(p)] = string(b)
	}
	return out
}

// TestExampleMasks checks examples/masks/*.fa, alone and all together, and
// compiles flash_fwd with each mod they declare.
func TestExampleMasks(t *testing.T) {
	files := exampleMasks(t)
	for name, src := range files {
		if err := checkFiles(map[string]string{name: src}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := checkFiles(files); err != nil {
		t.Fatalf("all examples together: %v", err)
	}
	if err := useMods(files); err != nil {
		t.Fatal(err)
	}
}

// useMods compiles flash_fwd (in bf16) with each mod the files declare, as
// `fac run --mask NAME` or `--score NAME` would. Mods whose compile-time
// parameters have no defaults are skipped.
func useMods(files map[string]string) error {
	prog, err := attention.Load(files)
	if err != nil {
		return err
	}
	for name := range files {
		for _, decl := range prog.DeclaredIn(name) {
			md, ok := prog.Mod(decl)
			if !ok {
				continue
			}
			e, err := parser.ParseExpr("<"+md.Kind+">", decl)
			if err != nil {
				return err
			}
			mi, err := prog.ResolveMod(e, md.Kind)
			if err != nil {
				if strings.Contains(err.Error(), "needs a value for compile-time parameter") {
					continue
				}
				return err
			}
			m, err := prog.Lower(lang.Instance{Kernel: "flash_fwd", Args: map[string]lang.Const{
				md.Kind: {Kind: lang.CMod, Mod: mi},
				"DTYPE": lang.TypeConst(tir.BF16),
			}})
			if err != nil {
				return fmt.Errorf("flash_fwd with %s %s: %w", md.Kind, decl, err)
			}
			if err := tir.Verify(m); err != nil {
				return fmt.Errorf("flash_fwd with %s %s: %w", md.Kind, decl, err)
			}
			k := m.Func("flash_fwd")
			for _, a := range mi.AuxParams() {
				want := md.Kind + "." + a.Name
				found := false
				for _, p := range k.Params {
					found = found || p.Name == want
				}
				if !found {
					return fmt.Errorf("flash_fwd with %s %s has no parameter %s", md.Kind, decl, want)
				}
			}
		}
	}
	return nil
}
