package lang_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/parser"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// Regression tests for issue 46 ("Trust, second pass"), the front end's
// items; each failed on the code before its fix.

// TestNestedCombinatorsIssue46Item1: a combinator nested in itself is
// another instance, not recursion. and_masks(causal, and_masks(document,
// sliding_window(1024, 0))), the nesting example of docs/language.md, and
// not_mask(not_mask(causal)) were refused with "and_masks calls itself;
// recursion is not allowed": the check compared mod names. Recursion (an
// instance calling itself, directly, through other mods, or making new
// instances of itself without end) is still refused, with its message.
func TestNestedCombinatorsIssue46Item1(t *testing.T) {
	prog, err := attention.Load(map[string]string{"x.fa": `
mask late_documents(b, h, q_idx, kv_idx) {
    return and_masks(causal, document)(b, h, q_idx, kv_idx) && not_mask(prefix_lm(16))(b, h, q_idx, kv_idx)
}
`})
	if err != nil {
		t.Fatal(err)
	}
	for _, expr := range []string{
		"and_masks(causal, and_masks(document, sliding_window(1024, 0)))",
		"not_mask(not_mask(causal))",
		"or_masks(and_masks(causal, not_mask(causal)), and_masks(causal, and_masks(causal, causal)))",
		"and_masks(late_documents, causal)", // and_masks made in a mod and_masks calls
	} {
		m := resolve(t, prog, expr, "mask")
		mod, err := prog.Lower(lang.Instance{Kernel: "flash_fwd", Args: map[string]lang.Const{"mask": {Kind: lang.CMod, Mod: m}}})
		if err != nil {
			t.Fatalf("flash_fwd with %s: %v", expr, err)
		}
		if err := tir.Verify(mod); err != nil {
			t.Fatalf("flash_fwd with %s: %v", expr, err)
		}
	}
	// Nested, the instances compute what they say, pair by pair.
	call := func(m *lang.ModInst, q, kv int, doc []int32) bool {
		t.Helper()
		mod, err := prog.LowerMod(m)
		if err != nil {
			t.Fatal(err)
		}
		args := []any{0, 0, q, kv, 8, 8, 1, 1}
		if len(m.AuxParams()) > 0 {
			args = append(args, cpu.FromI32("doc", doc), len(doc))
		}
		res, err := cpu.Call(mod, "mask", args...)
		if err != nil {
			t.Fatal(err)
		}
		return res[0].Vals[0] != 0
	}
	nested := resolve(t, prog, "and_masks(causal, and_masks(document, sliding_window(2, 0)))", "mask")
	notnot := resolve(t, prog, "not_mask(not_mask(causal))", "mask")
	doc := []int32{0, 0, 0, 0, 1, 1, 1, 1}
	for q := range 8 {
		for kv := range 8 {
			want := kv <= q && doc[q] == doc[kv] && q-kv <= 2
			if got := call(nested, q, kv, doc); got != want {
				t.Errorf("%s at q=%d kv=%d: %v, want %v", nested, q, kv, got, want)
			}
			if got := call(notnot, q, kv, nil); got != (kv <= q) {
				t.Errorf("%s at q=%d kv=%d: %v, want %v", notnot, q, kv, got, kv <= q)
			}
		}
	}

	// Recursion is refused.
	rec := `mask same<n: i32 = 0>(b, h, q_idx, kv_idx) {
    return same(n)(b, h, q_idx, kv_idx)
}
`
	wantCheckError(t, rec, 2, 19, "same calls itself; recursion is not allowed")
	rec = `mask r<m: mask>(b, h, q_idx, kv_idx) { return m(b, h, q_idx, kv_idx) }
mask s(b, h, q_idx, kv_idx) { return r(s)(b, h, q_idx, kv_idx) }
`
	wantCheckError(t, rec, 1, 48, "s calls itself (s -> r(s) -> s); recursion is not allowed")
	rec = `mask grow<n: i32 = 0>(b, h, q_idx, kv_idx) {
    return grow(n + 1)(b, h, q_idx, kv_idx)
}
`
	wantCheckError(t, rec, 2, 23, "grow calls itself (grow(0) -> grow(1) -> ... -> grow(100)), with new compile-time arguments each time; recursion is not allowed")
	// Nesting deeper than the limit is only too deep.
	deep := "causal"
	for range lang.MaxRefDepth {
		deep = "not_mask(" + deep + ")"
	}
	e, err := parser.ParseExpr("<mask>", deep)
	if err != nil {
		t.Fatal(err)
	}
	m, err := prog.ResolveMod(e, "mask")
	if err != nil {
		t.Fatal(err)
	}
	_, err = prog.Lower(lang.Instance{Kernel: "flash_fwd", Args: map[string]lang.Const{"mask": {Kind: lang.CMod, Mod: m}}})
	if err == nil || !strings.Contains(err.Error(), "mods call each other too deep") || strings.Contains(err.Error(), "recursion") {
		t.Errorf("flash_fwd with %d nested not_mask: %v", lang.MaxRefDepth, err)
	}
}

// TestConstOverflowIssue46Item5: compile-time integer arithmetic that
// leaves 64 bits is an error at the operator; it wrapped, so that
// sliding_window(65536*65536*65536*65536, 0) compiled as
// sliding_window(0, 0). A value beyond i32 given to an i32 compile-time
// parameter is reported at the argument (it was reported in masks.fa).
func TestConstOverflowIssue46Item5(t *testing.T) {
	prog, err := attention.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ src, want string }{
		{"sliding_window(65536*65536*65536*65536, 0)", "<mask>:1:33: constant 281474976710656 * 65536 overflows: compile-time integers are exact, in 64 bits\n" +
			"    sliding_window(65536*65536*65536*65536, 0)\n" +
			"                                    ^"},
		{"sliding_window(65536*65536, 0)", "<mask>:1:16: mask sliding_window parameter left is i32, got 4294967296, which overflows i32\n" +
			"    sliding_window(65536*65536, 0)\n" +
			"                   ^"},
		{"prefix_lm(n=0 - 65536*65536)", "<mask>:1:11: mask prefix_lm parameter n is i32, got -4294967296, which overflows i32"},
	} {
		e, err := parser.ParseExpr("<mask>", c.src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = prog.ResolveMod(e, "mask")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("--mask %q: %v\nwant %s", c.src, err, c.want)
		}
	}
	const big = "const A = 65536 * 65536 * 65536 * 16384\n" // 2^62
	for _, c := range []struct {
		src       string
		line, col int
		frag      string
	}{
		{big + "const B = A + A", 2, 13, "constant 4611686018427387904 + 4611686018427387904 overflows"},
		{big + "const B = -A - A - A", 2, 18, "constant -9223372036854775808 - 4611686018427387904 overflows"},
		{big + "const B = 2 * A", 2, 13, "constant 2 * 4611686018427387904 overflows"},
		{big + "const M = -A - A\nconst B = M / -1", 3, 13, "constant -9223372036854775808 / -1 overflows"},
		{big + "const M = -A - A\nconst B = -M", 3, 11, "constant -(-9223372036854775808) overflows"},
		{big + "const M = -A - A\nconst B = abs(M)", 3, 14, "constant -(-9223372036854775808) overflows"},
		{"const B = i32(1e30)", 1, 14, "constant 1e+30 overflows when converted to an integer"},
		{"const B = 65536 * 65536 * 65536 * 65536", 1, 33, "constant 281474976710656 * 65536 overflows"},
		{"mask m(b, h, q_idx, kv_idx, t: tensor[i32][seqlen_q * (65536 * 65536 * 65536 * 65536)]) {\n    return t[q_idx] > 0\n}", 1, 78, "dimension of aux tensor t overflows"},
		{"kernel k(o: ptr[i32]) {\n    store(o, arange(0 - 65536*65536*65536*32767, 65536*65536*65536*32767))\n}", 2, 20, "overflows"},
	} {
		wantCheckError(t, c.src, c.line, c.col, c.frag)
	}
	// What fits still folds, cdiv of the largest constant included.
	prog, err = attention.Load(map[string]string{"x.fa": big + "const B = A - 1 + A\nconst C = -B - 1\nconst D = cdiv(B, 2) - cdiv(C + 1, 3) + cdiv(-7, 2)"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := parser.ParseExpr("<const>", "D")
	if err != nil {
		t.Fatal(err)
	}
	// cdiv(2^63 - 1, 2) = 2^62; cdiv(-(2^63 - 1), 3) = (-(2^63 - 1) + 2) / 3 = -3074457345618258601; cdiv(-7, 2) = -6 / 2.
	const want = 1<<62 + 3074457345618258601 - 3
	if d, err := prog.EvalConst(e); err != nil || d.I != want {
		t.Errorf("D = %v, %v; want %d", d, err, int64(want))
	}
}

// TestDidYouMeanIssue46Item18: an unknown mod name or an undefined name
// close to a known one says which (patch_neighbourhood against
// patch_neighborhood); an unknown mod is a *lang.UnknownModError, so that
// the CLI can add its hint about -f.
func TestDidYouMeanIssue46Item18(t *testing.T) {
	prog, err := attention.Load(map[string]string{"p.fa": "mask patch_neighborhood(b, h, q_idx, kv_idx) {\n    return abs(q_idx - kv_idx) < 16\n}\n"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ src, kind, want string }{
		{"patch_neighbourhood", "mask", "<mask>:1:1: unknown mask mod patch_neighbourhood; did you mean patch_neighborhood?\n    patch_neighbourhood\n    ^"},
		{"casual", "mask", "<mask>:1:1: unknown mask mod casual; did you mean causal?"},
		{"softcapp(30.0)", "score", "<score>:1:1: unknown score mod softcapp; did you mean softcap?"},
		{"nosuch", "mask", "<mask>:1:1: unknown mask mod nosuch (mask mods: and_masks, causal, "},
	} {
		e, err := parser.ParseExpr("<"+c.kind+">", c.src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = prog.ResolveMod(e, c.kind)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v\nwant %s", c.src, err, c.want)
		}
		var u *lang.UnknownModError
		if !errors.As(err, &u) || u.Name != strings.Split(c.src, "(")[0] || u.Kind != c.kind {
			t.Errorf("%q: %T %+v is no UnknownModError for it", c.src, err, u)
		}
	}
	wantCheckError(t, mask("    let near = q_idx - kv_idx < 64\n    return near && neer"), 3, 20, "undefined: neer (did you mean near?)")
	wantCheckError(t, "fn f(x: f32) -> f32 { return exq(x) }", 1, 30, "undefined: exq (did you mean exp?)")
	wantCheckError(t, mask("    return q_idx >= kv_indx"), 2, 21, "undefined: kv_indx (did you mean kv_idx?)")
	// Far from every name: no guess.
	wantCheckError(t, mask("    return q_idx >= zzzz"), 2, 21, "undefined: zzzz")
	if err := checkFiles(map[string]string{"x.fa": mask("    return q_idx >= zzzz")}); strings.Contains(err.Error(), "did you mean") {
		t.Errorf("guessed: %v", err)
	}
	if got := lang.Suggest("kv_indx", []string{"q_idx", "kv_idx", "b", "h"}); got != "kv_idx" {
		t.Errorf("Suggest(kv_indx) = %q", got)
	}
}

// TestPythonHabitsIssue46Item18: Python's chained comparison, = for ==,
// torch.where and += were bare syntax errors ("unexpected "<" (expected
// "}")"); they say what to write.
func TestPythonHabitsIssue46Item18(t *testing.T) {
	for _, c := range []struct {
		body      string
		line, col int
		want      string
	}{
		{"    let d = q_idx - kv_idx\n    return 0 <= d < 64", 3, 19, `syntax error: unexpected "<": comparisons do not chain (Python's a < b < c): write 0 <= d && d < 64`},
		{"    return select(0 < q_idx <= min(kv_idx, 3), true, false)", 2, 29, "write 0 < q_idx && q_idx <= min(kv_idx, 3)"},
		{"    return q_idx = kv_idx", 2, 18, `syntax error: unexpected "=": = assigns (a var); to compare, write q_idx == kv_idx`},
		{"    if q_idx = 3 { return true }\n    return false", 2, 14, "to compare, write q_idx == 3"},
		{"    return torch.where(q_idx >= kv_idx, true, false)", 2, 17, "syntax error: unexpected character '.': fac has no modules or attributes (torch.where): write select(cond, a, b) (or where(cond, a, b))"},
		{"    var k = q_idx\n    k += 1\n    return k > 0", 3, 7, `syntax error: unexpected "+": fac has no compound assignment (+=): write k = k + ...`},
		{"    return q_idx > .5", 2, 20, "a float needs a digit before the point: write 0.5"},
	} {
		src := mask(c.body)
		_, err := parser.ParseFile("x.fa", src)
		le, ok := lang.AsError(err)
		if !ok || le.Pos.Line != c.line || le.Pos.Column != c.col || !strings.Contains(le.Msg, c.want) {
			t.Errorf("%s\ngot %v\nwant x.fa:%d:%d: ...%s", src, err, c.line, c.col, c.want)
		}
	}
	// The same in a --mask value.
	_, err := parser.ParseExpr("<mask>", "0 <= q_idx < 64")
	if err == nil || !strings.HasPrefix(err.Error(), "<mask>:1:12: syntax error: unexpected \"<\": comparisons do not chain (Python's a < b < c): write 0 <= q_idx && q_idx < 64\n    0 <= q_idx < 64\n               ^") {
		t.Errorf("--mask 0 <= q_idx < 64: %v", err)
	}
}

// TestMaskValueCaretIssue46Item18: an error inside a --mask value shows
// the value and a caret, as a syntax error in it already did.
func TestMaskValueCaretIssue46Item18(t *testing.T) {
	prog, err := attention.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ src, want string }{
		{"sliding_window(64, 1.5)", "<mask>:1:20: mask sliding_window parameter right is i32, got float constant 1.5\n    sliding_window(64, 1.5)\n                       ^"},
		{"and_masks(causal, softcap)", "<mask>:1:19: mask and_masks parameter m2 needs a mask mod, got score mod softcap\n    and_masks(causal, softcap)\n                      ^"},
		{"causal(1)", "<mask>:1:7: mask mod causal takes no compile-time arguments; write just causal\n    causal(1)\n          ^"},
	} {
		e, err := parser.ParseExpr("<mask>", c.src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = prog.ResolveMod(e, "mask")
		if err == nil || err.Error() != c.want {
			t.Errorf("--mask %q:\n%v\nwant\n%s", c.src, err, c.want)
		}
	}
}

// TestSeveralErrorsIssue46Item18: checking goes on after an error, so
// that independent errors of one mod or kernel are reported together (it
// stopped at the first); what depends on a failed let is skipped, not
// reported again; at most lang.MaxErrorsPerDecl are.
func TestSeveralErrorsIssue46Item18(t *testing.T) {
	src := `mask m(b, h, q_idx, kv_idx) {
    let a = q_idx + 1.5
    let c = a * 2
    let d = undefined_x + 1
    let e = kv_idx * true
    if seqlen_q > 4 {
        let f = q_idx / 2.5
    }
    return q_idx >= kv_idx && c > 0
}
kernel k(o: ptr[f32]) {
    let x = zeros([4], f32) + true
    store(o, 1.5 + x)
    let y = zeros([4], i32) * 1.5
    store(o + arange(0, 4), 1.0)
}
`
	err := checkFiles(map[string]string{"x.fa": src})
	var heads []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(line, "x.fa:") {
			heads = append(heads, line)
		}
	}
	want := []string{
		"x.fa:2:21: cannot use float constant 1.5 as i32 (convert explicitly, e.g. i32(x))",
		"x.fa:4:13: undefined: undefined_x",
		"x.fa:5:22: cannot use bool constant true as i32",
		"x.fa:7:25: cannot use float constant 2.5 as i32 (convert explicitly, e.g. i32(x))",
		"x.fa:12:31: cannot use bool constant true as f32",
		"x.fa:14:31: cannot use float constant 1.5 as i32 (convert explicitly, e.g. i32(x))",
	}
	if strings.Join(heads, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(heads, "\n"), strings.Join(want, "\n"))
	}
	// Each declaration's errors come as one entry of fac check's list.
	var list lang.ErrorList
	if !errors.As(err, &list) || len(list) != 2 {
		t.Errorf("want the errors of 2 declarations, got %#v", err)
	}
	// A body of many errors stops at the limit.
	var b strings.Builder
	b.WriteString("mask many(b, h, q_idx, kv_idx) {\n")
	for range 2 * lang.MaxErrorsPerDecl {
		b.WriteString("    let x = q_idx + 1.5\n")
	}
	b.WriteString("    return true\n}\n")
	err = checkFiles(map[string]string{"x.fa": b.String()})
	if n := strings.Count(err.Error(), "cannot use float constant"); n != lang.MaxErrorsPerDecl || !strings.HasSuffix(err.Error(), "too many errors: checking stops after 10 in one declaration") {
		t.Errorf("%d errors reported:\n%v", n, err)
	}
	// A good file still checks, and lowers to the same IR.
	if err := checkFiles(map[string]string{"ok.fa": mask("    let a = q_idx + 1\n    return a > kv_idx")}); err != nil {
		t.Error(err)
	}
}
