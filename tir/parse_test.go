package tir

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestParseSampleRoundTrip(t *testing.T) {
	want := sampleModule().String()
	m, err := Parse("sample.tir", want)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.String(); got != want {
		t.Fatalf("print(parse(print(m))) differs:\n%s", got)
	}
	if err := Verify(m); err != nil {
		t.Fatal(err)
	}
	// The golden file is the printed sample.
	golden, err := os.ReadFile("testdata/sample.tir")
	if err != nil {
		t.Fatal(err)
	}
	if string(golden) != want {
		t.Errorf("testdata/sample.tir is not the printed sampleModule():\n%s", want)
	}
}

func TestParseTestdata(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.tir")
	if len(files) < 2 {
		t.Fatalf("found %d .tir files", len(files))
	}
	commentLine := regexp.MustCompile(`(?m)^[ \t]*//.*\n`)
	comment := regexp.MustCompile(`[ \t]*//.*`)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Parse(file, string(src))
			if err != nil {
				t.Fatal(err)
			}
			if err := Verify(m); err != nil {
				t.Fatal(err)
			}
			// Files are in printed form up to comments.
			want := strings.TrimLeft(comment.ReplaceAllString(commentLine.ReplaceAllString(string(src), ""), ""), "\n")
			got := m.String()
			if got != want {
				t.Errorf("print(parse(file)) differs from the file without comments:\n%s", got)
			}
			m2, err := Parse(file, got)
			if err != nil {
				t.Fatal(err)
			}
			if got2 := m2.String(); got2 != got {
				t.Errorf("second round trip differs:\n%s", got2)
			}
		})
	}
}

func TestParsePositions(t *testing.T) {
	src := "// c\nfunc @f(%a: i32) -> i32 {\n  %0 = neg %a : i32\n  return %0\n}\n"
	m, err := Parse("p.tir", src)
	if err != nil {
		t.Fatal(err)
	}
	f := m.Funcs[0]
	if got := f.Pos.String(); got != "p.tir:2:1" {
		t.Errorf("func pos %s", got)
	}
	if got := f.Body.Ops[1].Pos.String(); got != "p.tir:4:3" {
		t.Errorf("op pos %s", got)
	}
	if f.Params[0].Name != "a" || f.Body.Ops[0].Results[0].Def != f.Body.Ops[0] {
		t.Errorf("bad param name or Def link")
	}
}

func TestParseAttrValues(t *testing.T) {
	src := "func @f() attributes {a = 1, b = -2, c = 1.5, d = 1e+06, e = -inf, f = inf, g = nan, h = true, i = false, j = max, k = @g.h, l = -0.0, m = 9223372036854775807} {\n  return\n}\n"
	m, err := Parse("a.tir", src)
	if err != nil {
		t.Fatal(err)
	}
	f := m.Funcs[0]
	want := map[string]string{"a": "int64 1", "b": "int64 -2", "c": "float64 1.5", "d": "float64 1e+06",
		"e": "float64 -inf", "f": "float64 inf", "g": "float64 nan", "h": "bool true", "i": "bool false",
		"j": "tir.Ident max", "k": "tir.Ident @g.h", "l": "float64 -0.0", "m": "int64 9223372036854775807"}
	for _, a := range f.Attrs {
		got := typeName(a.Val) + " " + FormatAttr(a.Val)
		if got != want[a.Key] {
			t.Errorf("%s = %s, want %s", a.Key, got, want[a.Key])
		}
	}
	if m.String() != src {
		t.Errorf("round trip:\n%s", m.String())
	}
}

func typeName(v any) string {
	switch v.(type) {
	case int64:
		return "int64"
	case float64:
		return "float64"
	case bool:
		return "bool"
	case Ident:
		return "tir.Ident"
	}
	return "?"
}

func TestParseErrors(t *testing.T) {
	deep := "func @f(%c: i1) {\n" + strings.Repeat("if %c {\n", 300)
	tests := []struct{ name, src, want string }{
		{"undefined value", "func @f() {\n  %0 = add %1, %1 : i32\n  return\n}", "t.tir:2:12: undefined value %1"},
		{"use before def", "func @f() {\n  %0 = neg %1 : i32\n  %1 = const {value = 1} : i32\n  return\n}", "t.tir:2:12: undefined value %1"},
		{"own result", "func @f() {\n  %0 = neg %0 : i32\n}", "t.tir:2:12: undefined value %0"},
		{"out of region", "func @f(%n: i32) {\n  for %n, %n, %n {\n  ^(%i: i32):\n    yield\n  }\n  %0 = neg %i : i32\n}", "t.tir:6:12: undefined value %i"},
		{"redefinition", "func @f(%a: i32) {\n  %a = neg %a : i32\n}", "t.tir:2:3: redefinition of %a"},
		{"shadowing result", "func @f(%n: i32) {\n  %0 = for %n, %n, %n, %n : i32 {\n  ^(%0: i32, %1: i32):\n    yield %1\n  }\n}", "t.tir:3:5: redefinition of %0"},
		{"unknown op", "func @f() {\n  %0 = frob : i32\n}", `t.tir:2:8: unknown op "frob"`},
		{"bad type", "func @f() {\n  %0 = const {value = 1} : tensor<0xf32>\n}", `t.tir:2:28: bad type "tensor<0xf32>"`},
		{"bad elem", "func @f(%a: f8) {\n}", `t.tir:1:13: bad type "f8"`},
		{"unterminated type", "func @f(%a: tensor<4xf32) {\n}", `t.tir:1:13: unterminated type`},
		{"missing types", "func @f() {\n  %0 = const {value = 1}\n  return\n}", "t.tir:3:3: expected : and result types"},
		{"type count", "func @f() {\n  %0, %1 = const {value = 1} : i32\n}", "t.tir:2:30: const has 2 results but 1 types"},
		{"types without results", "func @f(%p: ptr<f32>, %x: f32) {\n  store %p, %x : f32\n}", "t.tir:2:16: store has 0 results but 1 types"},
		{"missing brace", "func @f() {\n  return\n", "t.tir:3:1: expected }, found end of input"},
		{"bad char", "func @f() {\n  # nope\n}", "t.tir:2:3: unexpected character '#'"},
		{"bad number", "func @f() attributes {a = 1e} {\n}", `t.tir:1:27: bad number "1e"`},
		{"int range", "func @f() attributes {a = 9223372036854775808} {\n}", "t.tir:1:27: integer 9223372036854775808 out of range"},
		{"float range", "func @f() attributes {a = 1e999} {\n}", "t.tir:1:27: bad float 1e999"},
		{"missing attr value", "func @f() attributes {a = } {\n}", `t.tir:1:27: expected attribute value, found "}"`},
		{"duplicate attr", "func @f() attributes {a = 1, a = 2} {\n}", `t.tir:1:30: duplicate attribute "a"`},
		{"duplicate func", "func @f() {\n}\nkernel @f() {\n}", "t.tir:3:8: duplicate function @f"},
		{"numeric param", "func @f(%0: i32) {\n}", "t.tir:1:9: parameter %0: parameter names must not be numbers"},
		{"bad value name", "func @f(%1a: i32) {\n}", `t.tir:1:9: bad value name "%1a"`},
		{"bad symbol", "func @1() {\n}", `t.tir:1:6: bad symbol name "@1"`},
		{"not a func", "%0 = const {value = 1} : i32", "t.tir:1:1: expected func or kernel, found %0"},
		{"body args", "func @f() {\n^(%a: i32):\n}", "t.tir:2:1: function body cannot have block arguments"},
		{"missing comma", "func @f(%a: i32 %b: i32) {\n}", "t.tir:1:17: expected , or ), found %b"},
		{"too deep", deep, "regions nested too deeply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse("t.tir", tt.src)
			if err == nil {
				t.Fatalf("no error; parsed:\n%s", m)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q, want %q", err, tt.want)
			}
			if !regexp.MustCompile(`^t\.tir:\d+:\d+: `).MatchString(err.Error()) {
				t.Fatalf("error %q has no position", err)
			}
		})
	}
}

// FuzzParse checks that Parse never panics, reports positioned errors, and
// that whatever parses and verifies prints to text that parses back to the
// same text. Seeds: testdata/fuzz/FuzzParse and the .tir files.
func FuzzParse(f *testing.F) {
	f.Add(sampleModule().String())
	files, _ := filepath.Glob("testdata/*.tir")
	for _, file := range files {
		if src, err := os.ReadFile(file); err == nil {
			f.Add(string(src))
		}
	}
	pos := regexp.MustCompile(`^f\.tir:\d+:\d+: `)
	f.Fuzz(func(t *testing.T, src string) {
		m, err := Parse("f.tir", src)
		if err != nil {
			if !pos.MatchString(err.Error()) {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		if Verify(m) != nil {
			return
		}
		text := m.String()
		m2, err := Parse("g.tir", text)
		if err != nil {
			t.Fatalf("printed module does not parse: %v\n%s", err, text)
		}
		if err := Verify(m2); err != nil {
			t.Fatalf("printed module does not verify: %v\n%s", err, text)
		}
		if text2 := m2.String(); text2 != text {
			t.Fatalf("round trip differs:\n%s\nvs\n%s", text, text2)
		}
	})
}
