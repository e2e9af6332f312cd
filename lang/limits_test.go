package lang_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/parser"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// within runs fn and fails the test if it takes longer than limit: the
// inputs below took minutes (or overflowed the stack) before their fix.
func within(t *testing.T, limit time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("still running after %v", limit)
	}
}

// wantCheckError checks src (as x.fa) and wants its first error at
// line:col, containing frag, with the source line and a caret.
func wantCheckError(t *testing.T, src string, line, col int, frag string) {
	t.Helper()
	var err error
	within(t, 10*time.Second, func() { err = checkFiles(map[string]string{"x.fa": src}) })
	if err == nil {
		t.Fatalf("checks, want an error at %d:%d: %s", line, col, frag)
	}
	le, ok := lang.AsError(err)
	if !ok {
		t.Fatalf("error is %T, not a *lang.Error: %.300v", err, err)
	}
	head := strings.SplitN(le.Error(), "\n", 2)[0]
	if le.Pos.Line != line || le.Pos.Column != col || !strings.Contains(head, frag) {
		t.Fatalf("got %.300s\nwant x.fa:%d:%d: ...%s...", head, line, col, frag)
	}
	if !strings.HasPrefix(head, fmt.Sprintf("x.fa:%d:%d: ", line, col)) {
		t.Errorf("error does not start with its position: %.200s", head)
	}
	if lines := strings.Split(le.Error(), "\n"); len(lines) < 3 || !strings.HasSuffix(lines[2], "^") {
		t.Errorf("no excerpt and caret")
	}
}

func mask(body string) string {
	return "mask m(b, h, q_idx, kv_idx) {\n" + body + "\n}\n"
}

// TestPythonOperators: a FlexAttention mask written with Python's
// operators must not check as something else. `q_idx // 16` used to read
// as q_idx followed by a comment.
func TestPythonOperators(t *testing.T) {
	cases := []struct {
		name, body string
		line, col  int
		frag       string
	}{
		{"floor div in let", "    let x = q_idx // 16\n    return x >= kv_idx", 2, 19, "// is not an operator (Python's floor division)"},
		{"floor div in return", "    return q_idx // 16 >= kv_idx", 2, 18, "write / (it truncates toward zero"},
		{"floor div no spaces", "    return q_idx//16 >= kv_idx", 2, 17, "// is not an operator"},
		{"floor div after paren", "    return (q_idx + 1) // 16 >= kv_idx", 2, 24, "// is not an operator"},
		{"floor div after index", "    return causal(b, h, q_idx, kv_idx) // comment", 2, 40, "a comment after an operand needs a ; before it"},
		{"floor div after true", "    return true // keep all", 2, 17, "// is not an operator"},
		{"bit and", "    return q_idx >= kv_idx & q_idx < 10", 2, 28, "& is not an operator: for bools write &&"},
		{"bit or", "    return q_idx >= kv_idx | q_idx < 10", 2, 28, "| is not an operator: for bools write ||"},
		{"bit not", "    return ~(q_idx < kv_idx)", 2, 12, "~ is not an operator: for bools write !"},
		{"xor", "    return (q_idx < 4) ^ (kv_idx < 4)", 2, 24, "^ is not an operator: for bools write !="},
		{"and", "    return q_idx >= kv_idx and q_idx < 10", 2, 28, "and is not an operator: write &&"},
		{"or", "    return q_idx >= kv_idx or q_idx < 10", 2, 28, "or is not an operator: write ||"},
		{"not", "    return not (q_idx < kv_idx)", 2, 12, "not is not an operator: write !"},
		{"power", "    return q_idx ** 2 >= kv_idx", 2, 18, "** is not an operator"},
		// A syntax error on an earlier line is reported first.
		{"earlier syntax error", "    let = 5\n    return q_idx // 2 > 0", 2, 9, `syntax error: unexpected "=" (expected a name)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantCheckError(t, mask(c.body), c.line, c.col, c.frag) })
	}
}

// TestComments: // comments work wherever they are not right after an
// operand: on their own line, after ; { } ( , and operators, after a
// declaration's ;.
func TestComments(t *testing.T) {
	src := `// a file comment
const N = 16; // after a declaration's ;
mask m(b, h, // after a comma
       q_idx, kv_idx) { // after {
    // on its own line
    let x = q_idx / N;   // after a statement's ;
    let y = ( // after (
        x + 1)
    let z = y + // after an operator
        1
    if seqlen_q > 1 { // after {
    } // after }
    return z >= kv_idx / N && !(q_idx < 0)
}
// at the end`
	if err := checkFiles(map[string]string{"x.fa": src}); err != nil {
		t.Fatal(err)
	}
	// Names spelled like Python's operators stay names where Python would
	// not read them as operators.
	names := mask("    let not = q_idx\n    let or = not - 1\n    return or > kv_idx")
	if err := checkFiles(map[string]string{"x.fa": names}); err != nil {
		t.Fatal(err)
	}
}

// TestNestingLimit: deep nesting is an error, not a stack overflow (100k
// parentheses) nor minutes of work (10k nested or chained ifs).
func TestNestingLimit(t *testing.T) {
	const n = 100000 // 200 KB of parentheses overflowed the stack
	t.Run("parentheses", func(t *testing.T) {
		src := mask("    return " + strings.Repeat("(", n) + "q_idx >= kv_idx" + strings.Repeat(")", n))
		// The mod's { is the first level.
		wantCheckError(t, src, 2, 12+lang.MaxNesting-1, "nesting too deep: more than 100 levels")
	})
	t.Run("brackets", func(t *testing.T) {
		src := mask("    return causal" + strings.Repeat("(b, h, q_idx, kv_idx)", 3) + strings.Repeat("[", n))
		wantCheckError(t, src, 2, 18+3*len("(b, h, q_idx, kv_idx)")+lang.MaxNesting-1, "nesting too deep")
	})
	t.Run("prefix operators", func(t *testing.T) {
		src := mask("    return q_idx >= " + strings.Repeat("- ", n) + "kv_idx")
		wantCheckError(t, src, 2, 21+2*(lang.MaxNesting-1), "nesting too deep")
	})
	t.Run("nested if", func(t *testing.T) {
		const ifs = 10000
		src := mask("    var k = true\n" + strings.Repeat("if seqlen_q > 1 {\n", ifs) + "k = false\n" + strings.Repeat("}\n", ifs) + "    return k")
		wantCheckError(t, src, 2+lang.MaxNesting, 17, "nesting too deep")
	})
	t.Run("else if chain", func(t *testing.T) {
		const arms = 10000
		src := mask("    var k = true\n    " + strings.Repeat("if seqlen_q > 1 { k = false } else ", arms) + "{ k = true }\n    return k")
		// Each else if is a level: at the { of the 100th if, the mod's {, 98
		// else ifs and the if's own { make 101.
		arm := len("if seqlen_q > 1 { k = false } else ")
		wantCheckError(t, src, 3, 5+arm*(lang.MaxNesting-1)+len("if seqlen_q > 1 "), "nesting too deep")
	})
	t.Run("at the limit", func(t *testing.T) {
		// The mod's { is one level; 99 parentheses fit.
		src := mask("    return " + strings.Repeat("(", lang.MaxNesting-1) + "q_idx >= kv_idx" + strings.Repeat(")", lang.MaxNesting-1))
		if err := checkFiles(map[string]string{"x.fa": src}); err != nil {
			t.Fatal(err)
		}
		chain := mask("    var k = true\n    " + strings.Repeat("if seqlen_q > 1 { k = false } else ", 40) + "{ k = true }\n    " +
			strings.Repeat("if seqlen_q > 2 { k = false } else ", 40) + "{ k = true }\n    return k")
		if err := checkFiles(map[string]string{"x.fa": chain}); err != nil {
			t.Fatal(err) // two chains of 40 do not add up
		}
	})
}

// TestExpressionLimit: an expression has at most lang.MaxExprOps
// operators. A million && terms used to take 80 s and 4.5 GB.
func TestExpressionLimit(t *testing.T) {
	at := func(n int) string { return mask("    return " + strings.Repeat("true && ", n) + "q_idx >= kv_idx") }
	wantCheckError(t, at(lang.MaxExprOps), 2, 12, "expression too large: more than 10000 operators")
	if err := checkFiles(map[string]string{"x.fa": at(lang.MaxExprOps - 1)}); err != nil {
		t.Fatal(err)
	}
	// In a constant, a compile-time parameter's default, a call argument.
	over := lang.MaxExprOps + 1
	wantCheckError(t, "const C = "+strings.Repeat("1 + ", over)+"1", 1, 11, "expression too large")
	wantCheckError(t, "kernel k<N: i32 = "+strings.Repeat("1 + ", over)+"1>(o: ptr[i32]) {\n}", 1, 19, "expression too large")
	wantCheckError(t, mask("    return causal(b, h, q_idx, "+strings.Repeat("kv_idx + ", over)+"0)"), 2, 12, "expression too large")
}

// TestSizeLimits: the source size and token count are bounded; a file
// past either is refused before it is parsed.
func TestSizeLimits(t *testing.T) {
	big := "// " + strings.Repeat("x", lang.MaxSourceSize) + "\n"
	var err error
	within(t, 5*time.Second, func() { _, err = parser.ParseFile("big.fa", big) })
	if err == nil || err.Error() != "big.fa: source file is larger than 1 MiB, the limit for one file" {
		t.Errorf("got %v", err)
	}
	if _, err := parser.ParseExpr("<mask>", big); err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") {
		t.Errorf("ParseExpr: got %v", err)
	}
	// 2^17 tokens fit in a few hundred KB: 1e6 && terms are refused by
	// their size, a dense file by its tokens.
	dense := mask("    return " + strings.Repeat("q&&", lang.MaxTokens/2) + "q")
	// 13 tokens come before the first q (column 12); each q&& is 2 tokens
	// and 3 columns; the error is at the first token past the limit.
	k := lang.MaxTokens - 13
	wantCheckError(t, dense, 2, 12+3*(k/2)+k%2, "more than 131072 tokens in one file")
}

// TestConstChains: constants are computed once (a chain doubling at each
// step took exponential time) and nest at most MaxRefDepth deep; whether a
// program checks does not depend on what was checked before.
func TestConstChains(t *testing.T) {
	var b strings.Builder
	for i := range 60 {
		fmt.Fprintf(&b, "const A%d = A%d + A%d\n", i, i+1, i+1)
	}
	b.WriteString("const A60 = 1\nkernel k(o: ptr[i32]) {\n    store(o, A58)\n}\n")
	within(t, 10*time.Second, func() {
		if err := checkFiles(map[string]string{"x.fa": b.String()}); err != nil {
			t.Fatal(err)
		}
	})

	chain := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "const C%d = C%d + 1\n", i, i+1)
		}
		fmt.Fprintf(&b, "const C%d = 0\n", n)
		return b.String()
	}
	if err := checkFiles(map[string]string{"x.fa": chain(lang.MaxRefDepth - 1)}); err != nil {
		t.Fatal(err)
	}
	wantCheckError(t, chain(lang.MaxRefDepth), 100, 13, "constants use each other too deep: using C100 here makes a chain of 101 constants")
	// A long chain fails fast, and the same way in any order.
	src := chain(5000)
	prog, err := attention.Load(map[string]string{"x.fa": src})
	if err != nil {
		t.Fatal(err)
	}
	within(t, 20*time.Second, func() {
		fwd := prog.CheckDecl("C0")
		for i := 4999; i >= 0; i-- {
			prog.CheckDecl(fmt.Sprintf("C%d", i))
		}
		if again := prog.CheckDecl("C0"); fwd == nil || again == nil || fwd.Error() != again.Error() {
			t.Errorf("C0: %v, then %v", fwd, again)
		}
	})
}

// TestModChains: mods call each other at most MaxRefDepth deep, and
// checking every declaration of many mods that call many mods takes time
// about linear in the file (it was cubic: 7 s for 170 KB).
func TestModChains(t *testing.T) {
	chain := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "mask m%d(b, h, q_idx, kv_idx) {\n    return m%d(b, h, q_idx, kv_idx)\n}\n", i, i+1)
		}
		fmt.Fprintf(&b, "mask m%d(b, h, q_idx, kv_idx) {\n    return q_idx >= kv_idx\n}\n", n)
		return b.String()
	}
	if err := checkFiles(map[string]string{"x.fa": chain(lang.MaxRefDepth - 1)}); err != nil {
		t.Fatal(err)
	}
	wantCheckError(t, chain(lang.MaxRefDepth), 299, 16, "mods call each other too deep: calling m100 here makes a chain of 101 (m0 -> ... -> m100)")

	// Each mod calls all the ones before it: 100 mods, 5000 calls, 130 KB.
	// Checking each declaration lowered every mod below it anew: 5 s.
	var b strings.Builder
	const n = 100
	for i := range n {
		calls := []string{"q_idx >= kv_idx"}
		for j := range i {
			calls = append(calls, fmt.Sprintf("m%d(b, h, q_idx, kv_idx)", j))
		}
		fmt.Fprintf(&b, "mask m%d(b, h, q_idx, kv_idx) {\n    return %s\n}\n", i, strings.Join(calls, " || "))
	}
	fmt.Fprintf(&b, "mask bad(b, h, q_idx, kv_idx) {\n    return m%d(b, h, q_idx, kv_idx) && m0(b, h, q_idx, kv_idx) > 1\n}\n", n-1)
	prog, err := attention.Load(map[string]string{"x.fa": b.String()})
	if err != nil {
		t.Fatal(err)
	}
	names := prog.DeclaredIn("x.fa")
	fwd := map[string]string{}
	within(t, 3*time.Second, func() {
		for _, d := range names {
			fwd[d] = fmt.Sprint(prog.CheckDecl(d))
		}
	})
	if got := fwd["bad"]; !strings.Contains(got, "cannot use integer constant 1 as bool") {
		t.Fatalf("bad: %s", got)
	}
	// Checking reuses what earlier checks found, but never changes the
	// answer: in reverse order, every declaration gives the same result.
	prog, _ = attention.Load(map[string]string{"x.fa": b.String()})
	for i := len(names) - 1; i >= 0; i-- {
		if got := fmt.Sprint(prog.CheckDecl(names[i])); got != fwd[names[i]] {
			t.Errorf("%s: %s forwards, %s backwards", names[i], fwd[names[i]], got)
		}
	}
}

// TestTileLimit: a tile has at most lang.MaxTileElements elements,
// checked where it is made; zeros([65536, 65536]) ran code generation out
// of memory.
func TestTileLimit(t *testing.T) {
	kernel := func(body string) string { return "kernel k(o: ptr[f32], n: i32) {\n" + body + "\n}\n" }
	cases := []struct {
		name, src string
		line, col int
		frag      string
	}{
		{"zeros", kernel("    let z = zeros([65536, 65536], f32)"), 2, 18, "zeros makes a tile of 4294967296 elements ([65536, 65536]); a tile may have at most 65536"},
		{"full", kernel("    let z = full([512, 256], 1.0, f32)"), 2, 17, "full makes a tile of 131072 elements"},
		{"overflow", kernel("    let z = zeros([2147483647, 2147483647, 2147483647], f32)"), 2, 18, "zeros makes a tile of too many elements ([2147483647, 2147483647, 2147483647])"},
		{"arange", kernel("    let r = arange(0, 1000000)"), 2, 19, "arange makes a tile of 1000000 elements"},
		{"broadcast", kernel("    let r = arange(0, 512)[:, None] < arange(0, 256)[None, :]"), 2, 13, "comparison makes a tile of 131072 elements ([512, 256])"},
		{"pointers", kernel("    let p = o + arange(0, 512)[:, None] * 256 + arange(0, 256)[None, :]"), 2, 47, "+ makes a tile of 131072"},
		{"dot", kernel("    let a = zeros([512, 16], f32)\n    let c = dot(a, zeros([16, 512], f32))"), 3, 16, "dot makes a tile of 262144 elements ([512, 512])"},
		{"select", kernel("    let c = select(arange(0, 512)[:, None] < n, 1.0, zeros([1, 256], f32))"), 2, 19, "select makes a tile of 131072"},
		{"mod call", "kernel k<mask: mask = causal>(o: ptr[i32], seqlen_q: i32, seqlen_k: i32) {\n    let m = mask(0, 0, arange(0, 512)[:, None], arange(0, 256)[None, :])\n}\n", 2, 49, "call of causal makes a tile of 131072"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantCheckError(t, c.src, c.line, c.col, c.frag) })
	}
	// The largest tile passes; the block-mask builders may ask for bigger
	// tiles of a mod, which they evaluate on the CPU.
	if err := checkFiles(map[string]string{"x.fa": kernel("    store(o + arange(0, 256)[:, None] * 256 + arange(0, 256)[None, :], zeros([256, 256], f32))")}); err != nil {
		t.Fatal(err)
	}
	prog, err := attention.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := parser.ParseExpr("<mask>", "causal")
	mi, err := prog.ResolveMod(e, "mask")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prog.LowerModTile(mi, 512, 512); err != nil {
		t.Fatalf("LowerModTile(512, 512): %v", err)
	}
}
