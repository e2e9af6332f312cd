package lang_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/parser"
	"github.com/fac-compiler/fac/stdlib/attention"
)

var update = flag.Bool("update", false, "rewrite lang/testdata/errors/*.err and the error texts in docs/language.md")

// checkFiles does what `fac check FILE...` does: load the files with the
// stdlib, then check every declaration they make. The error text is the one
// the CLI prints after "fac: ".
func checkFiles(files map[string]string) error {
	prog, err := attention.Load(files)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs lang.ErrorList
	for _, f := range names {
		for _, d := range prog.DeclaredIn(f) {
			if err := prog.CheckDecl(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// errorCase is one bad input: a file under testdata/errors, where its
// first error must be, and a fragment of its message.
type errorCase struct {
	file      string
	line, col int
	frag      string
}

var errorCases = []errorCase{
	// Syntax.
	{"syntax_missing_paren.fa", 3, 33, `syntax error: unexpected "{" (expected ")")`},
	{"syntax_missing_expr.fa", 5, 5, `syntax error: unexpected "return" (expected an expression)`},
	{"syntax_unclosed_paren.fa", 5, 1, `syntax error: unexpected "}" (expected ")")`},
	{"syntax_bad_char.fa", 3, 18, `syntax error: unexpected character '@'`},
	{"syntax_string.fa", 2, 12, `syntax error: unexpected character '"' (the language has no strings)`},
	{"syntax_eof.fa", 4, 1, `syntax error: unexpected end of file (expected "}")`},
	{"syntax_toplevel.fa", 1, 1, `syntax error: unexpected "def" (expected a declaration: const, mask, score, fn or kernel)`},
	{"syntax_keyword_name.fa", 2, 9, `syntax error: unexpected "range" (expected a name)`},
	{"syntax_bad_type.fa", 1, 10, `syntax error: unexpected "=" (expected a type)`},
	// Python operators fac does not have: never silently something else.
	{"syntax_floor_div.fa", 3, 20, "// is not an operator (Python's floor division): write / (it truncates toward zero"},
	{"syntax_floor_div_return.fa", 2, 18, "for b > 0 and any a, floor division is select(a < 0, (a - b + 1) / b, a / b)"},
	{"syntax_bit_and.fa", 4, 22, "& is not an operator: for bools write &&"},
	{"syntax_bit_or.fa", 2, 25, "| is not an operator: for bools write ||"},
	{"syntax_bit_not.fa", 3, 12, "~ is not an operator: for bools write !"},
	{"syntax_python_and.fa", 2, 28, "and is not an operator: write &&"},
	// Limits.
	{"limit_nesting.fa", 2, 111, "nesting too deep: more than 100 levels"},
	{"limit_tile.fa", 3, 20, "zeros makes a tile of 4294967296 elements ([65536, 65536]); a tile may have at most 65536"},
	{"limit_tile_broadcast.fa", 4, 28, "+ makes a tile of 131072 elements ([512, 256])"},
	// Names.
	{"unknown_name.fa", 3, 21, "undefined: kv_indx"},
	{"unknown_type.fa", 1, 28, "unknown type f64 (want f32, f16, bf16, i32, bool, or a type parameter)"},
	{"unknown_cparam_kind.fa", 1, 10, `unknown compile-time parameter kind "int32"`},
	{"duplicate_decl.fa", 6, 1, "window is already declared at duplicate_decl.fa:2:1"},
	{"duplicate_stdlib.fa", 2, 1, "causal is already declared at stdlib/attention/masks.fa:"},
	{"shadowing.fa", 4, 5, "d is already defined at line 3 (names cannot be shadowed)"},
	{"redefine_builtin.fa", 2, 5, "exp is a built-in name and cannot be redefined"},
	{"const_cycle.fa", 1, 1, "constant C refers to itself (C -> A -> B -> C)"},
	{"const_self.fa", 1, 1, "constant N refers to itself"},
	{"mod_recursion.fa", 6, 16, "ping calls itself (ping -> pong -> ping); recursion is not allowed"},
	// Arity.
	{"arity_builtin.fa", 3, 31, "exp takes at most 1 argument, got 2"},
	{"arity_builtin_missing.fa", 2, 21, "arange needs argument end (start, end)"},
	{"builtin_num_sms_in_mod.fa", 3, 36, "num_sms is for kernels, not mods: a mod's value depends only on its arguments"},
	{"builtin_prefetch_value.fa", 3, 16, "prefetch needs pointers, got i32[16]"},
	{"builtin_group_id_in_mod.fa", 3, 32, "group_id is for kernels, not mods: a mod's value depends only on its arguments"},
	{"builtin_num_programs_axis.fa", 3, 26, "num_programs axis must be 0, 1 or 2, got 3"},
	{"builtin_last_arrival_counter.fa", 3, 21, "last_arrival's counter must be one ptr[i32] (a scalar pointer), got ptr[f32]"},
	{"builtin_last_arrival_tile.fa", 3, 23, "last_arrival's counter must be one ptr[i32] (a scalar pointer), got ptr[i32][16]"},
	{"builtin_last_arrival_n.fa", 3, 24, "last_arrival's n must be an i32 scalar (the programs that arrive), got f32"},
	{"builtin_last_arrival_zero.fa", 3, 24, "last_arrival's n must be at least 1 (the programs that arrive), got 0"},
	{"builtin_last_arrival_in_mod.fa", 3, 43, "last_arrival is for kernels, not mods: a mod's value depends only on its arguments"},
	{"arity_mod_call.fa", 3, 18, "mask causal takes 4 arguments (b, h, q_idx, kv_idx), got 3"},
	{"arity_mod_cparams.fa", 3, 35, "sliding_window takes 2 compile-time arguments, got 3"},
	{"arity_mod_decl.fa", 1, 1, "mask few must take (b, h, q_idx, kv_idx) first, then aux tensors and run-time parameters"},
	{"named_arg_unknown.fa", 3, 37, "sum has no argument named axes (arguments: x, y, axis)"},
	// Types.
	{"mask_returns_f32.fa", 3, 12, "mask half_open must return bool, but returns f32"},
	{"score_returns_bool.fa", 2, 12, "score boolish must return f32, but returns bool"},
	{"mask_result_type.fa", 1, 39, "a mask mod returns bool, not f32"},
	{"aux_float_index.fa", 3, 30, "aux tensor doc must be indexed by an integer, got f32"},
	{"aux_not_indexed.fa", 2, 12, "aux tensor doc can only be indexed, e.g. doc[q_idx]"},
	{"type_mismatch.fa", 3, 20, "mismatched types f32 and i32 in + (convert one, e.g. f32(x))"},
	{"float_const_as_int.fa", 2, 24, "cannot use float constant 0.5 as i32 (convert explicitly, e.g. i32(x))"},
	{"if_not_bool.fa", 3, 8, "if condition must be a scalar bool, got i32 (use select for tensors)"},
	{"if_on_position.fa", 4, 8, "if condition must be a scalar bool, but here it is bool[16, 1]: kernels call mods with tiles of positions"},
	{"if_tile_cond.fa", 4, 8, "if condition must be a scalar bool, got bool[16] (use select for tensors)"},
	{"assign_let.fa", 4, 5, "cannot assign to acc: declared with let (use var)"},
	{"assign_type.fa", 4, 13, "cannot assign f32 to n of type i32"},
	{"missing_return.fa", 4, 1, "mask unfinished must end with a return statement"},
	{"return_in_kernel.fa", 3, 5, "return is only allowed as the last statement of a mod"},
	{"unused_value.fa", 3, 5, "expression value is unused"},
	{"store_dtype.fa", 3, 21, "store of i32[16] through ptr[f32][16]: element types differ (convert with f32(x))"},
	// Shapes.
	{"shape_broadcast.fa", 4, 15, "shape mismatch in +: [16, 32] and [16, 16] do not broadcast"},
	{"shape_dot.fa", 4, 16, "shape mismatch in dot: [16, 32] x [16, 16] (inner dimensions 32 and 16 differ)"},
	{"shape_store.fa", 4, 21, "shape mismatch in store: value [16, 16], pointers [16]"},
	{"shape_load_mask.fa", 4, 33, "shape mismatch in load: mask [8], pointers [16]"},
	{"index_rank.fa", 3, 16, "index has 1 ':' but i32[16, 1] has rank 2"},
	{"axis_range.fa", 3, 25, "axis 2 out of range for f32[16, 16]"},
	// Kernels and mods.
	{"kernel_no_seqlen.fa", 5, 20, "calling mask causal needs seqlen_q and seqlen_k in scope (declare them as i32 kernel parameters)"},
	{"kernel_untyped_param.fa", 1, 23, "kernel parameter n needs a type"},
	{"mod_extra_param.fa", 1, 29, "extra parameter window of w needs a type: a run-time parameter (window: i32) or an aux tensor (window: tensor[i32])"},
	{"aux_mod_from_mod.fa", 8, 53, "aux tensor doc is tensor[i32] in document but tensor[i32][batch, seqlen_k] in doc_rows; mods called together share aux tensors by name"},
	{"aux_rank.fa", 3, 13, "aux tensor m is tensor[bool][num_heads, seqlen_q, seqlen_k], with 3 dimensions: index it with 3 indices, e.g. m[h, q_idx, kv_idx]"},
	{"aux_dim_product.fa", 2, 57, "dimension of aux tensor m: a product of sizes"},
	{"scalar_from_kernel.fa", 9, 55, "offset_causal reads run-time parameter offset; it can only be used as a kernel's mask or score parameter"},
	{"seqlen_outside_mod.fa", 2, 14, "seqlen_q is only available in mods and in kernels that declare it as a parameter"},
	{"cparam_kind_mismatch.fa", 3, 27, "mask sliding_window parameter left is i32, got float constant 0.5"},
	{"wrong_mod_kind.fa", 1, 34, "kernel uses_score parameter score needs a score mod, got mask mod causal"},
	// Functions.
	{"fn_arity.fa", 7, 21, "fn twice takes 1 argument (x), got 2"},
	{"fn_arg_type.fa", 7, 21, "argument x of half must be f32, got i32"},
	{"fn_mod_kind.fa", 7, 35, "argument mask of masked must be a mask mod, got score mod softcap(2.0)"},
	{"fn_recursion.fa", 6, 26, "even calls itself (even -> odd -> even); recursion is not allowed"},
	{"fn_unknown_name.fa", 3, 16, "undefined: scores"},
	{"fn_seqlen.fa", 2, 19, "seqlen_k is not visible in a function, which sees its parameters and the global names only"},
	{"fn_result_count.fa", 6, 16, "twice returns 1 value, but 2 names are given"},
	{"fn_results_declared.fa", 2, 5, "fn split declares 2 results but returns 1"},
	{"fn_return_not_last.fa", 2, 5, "return is only allowed as the last statement of a function"},
	{"fn_body_error.fa", 3, 16, "shape mismatch in *: [16, 32] and [32, 1] do not broadcast (in fn row_scale called at fn_body_error.fa:9:27)"},
	{"fn_not_called.fa", 6, 13, "twice is a function; call it: twice(...)"},
	{"fn_multi_in_expr.fa", 6, 19, "two returns 2 values: bind them with let a, b = two(...)"},
	{"fn_assign_param.fa", 2, 5, "cannot assign to x: declared with let (use var)"},
}

// TestErrors checks, for each bad input, that the first error names the
// right line and column, says what went wrong, and shows the source line
// with a caret under that column; and that the whole text matches its
// golden .err file (go test ./lang -run TestErrors -update rewrites them).
func TestErrors(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range errorCases {
		seen[c.file] = true
		t.Run(strings.TrimSuffix(c.file, ".fa"), func(t *testing.T) {
			path := filepath.Join("testdata", "errors", c.file)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			err = checkFiles(map[string]string{c.file: string(src)})
			if err == nil {
				t.Fatalf("%s checks, want an error at %d:%d", c.file, c.line, c.col)
			}
			text := err.Error()
			if strings.Contains(text, "internal compiler error") || strings.Contains(text, "panic") {
				t.Errorf("error is not a user error:\n%s", text)
			}
			lines := strings.Split(text, "\n")
			if len(lines) < 3 {
				t.Fatalf("want `file:line:col: message`, the source line and a caret, got:\n%s", text)
			}
			wantHead := fmt.Sprintf("%s:%d:%d: ", c.file, c.line, c.col)
			if !strings.HasPrefix(lines[0], wantHead) {
				t.Errorf("error starts %q, want %q", lines[0], wantHead)
			}
			if !strings.Contains(lines[0], c.frag) {
				t.Errorf("message %q does not contain %q", lines[0], c.frag)
			}
			srcLine := strings.Split(string(src), "\n")[c.line-1]
			if lines[1] != "    "+srcLine {
				t.Errorf("excerpt %q, want %q", lines[1], "    "+srcLine)
			}
			if want := "    " + caretPad(srcLine, c.col) + "^"; lines[2] != want {
				t.Errorf("caret line %q, want %q", lines[2], want)
			}
			// The error is a *lang.Error with the same position.
			le, ok := lang.AsError(err)
			if !ok {
				t.Fatalf("error is %T, not a *lang.Error", err)
			}
			if le.Pos.Line != c.line || le.Pos.Column != c.col {
				t.Errorf("Pos %d:%d, want %d:%d", le.Pos.Line, le.Pos.Column, c.line, c.col)
			}
			golden(t, strings.TrimSuffix(path, ".fa")+".err", text+"\n")
		})
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "errors", "*.fa"))
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s has no entry in errorCases", f)
		}
	}
}

// caretPad is the text under line before column col (1-based, in runes):
// tabs stay tabs so the caret lines up, everything else is a space.
func caretPad(line string, col int) string {
	var b strings.Builder
	for i, r := range []rune(line) {
		if i >= col-1 {
			break
		}
		if r == '\t' {
			b.WriteRune('\t')
		} else {
			b.WriteRune(' ')
		}
	}
	return b.String()
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./lang -run TestErrors -update)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs:\n--- want\n%s--- got\n%s", path, want, got)
	}
}

// TestErrorsInline covers errors that need no file of their own: every
// error a user can see is positioned, with an excerpt and a caret.
func TestErrorsInline(t *testing.T) {
	cases := []struct {
		name, src string
		line, col int
		frag      string
	}{
		{"semicolons", "mask m(b, h, q_idx, kv_idx) { let x = 1; return q_idx >= x; }\nmask n(b, h, q_idx, kv_idx) { return 1 }", 2, 38, "mask n must return bool, but returns integer constant 1"},
		{"tab indent", "mask m(b, h, q_idx, kv_idx) {\n\treturn\tq_idx + 1.5 > kv_idx\n}", 2, 17, "cannot use float constant 1.5 as i32"},
		{"empty mod", "mask m(b, h, q_idx, kv_idx) {}", 1, 30, "mask m must end with a return statement"},
		{"return nothing", "mask m(b, h, q_idx, kv_idx) {\n    return\n}", 2, 5, "mask m must return a value"},
		{"int overflow", "const BIG = 4294967296", 1, 13, "integer literal 4294967296 overflows i32"},
		{"folded overflow", "kernel k(o: ptr[i32]) {\n    store(o, 65536 * 65536)\n}", 2, 20, "constant 4294967296 overflows i32"},
		{"division by zero", "const Z = 1 / (2 - 2)", 1, 13, "integer division by zero"},
		{"bad float", "const F = 1e999", 1, 11, "bad float literal 1e999"},
		{"zero shape", "kernel k(o: ptr[f32]) {\n    let z = zeros([0, 4], f32)\n}", 2, 20, "shape dimensions must be positive, got 0"},
		{"shape not list", "kernel k(o: ptr[f32]) {\n    let z = zeros(4, f32)\n}", 2, 19, "zeros needs a shape written as a list, e.g. [BLOCK_M, HEAD_DIM]"},
		{"runtime shape", "kernel k(n: i32) {\n    let z = zeros([n], f32)\n}", 2, 20, "a shape dimension must be a compile-time integer, got i32"},
		{"arange order", "kernel k(o: ptr[i32]) {\n    store(o + arange(0, 4), arange(4, 4))\n}", 2, 35, "arange needs end > start, got arange(4, 4)"},
		{"range step", "kernel k(o: ptr[i32]) {\n    for i in range(0, 8, 0) {\n    }\n}", 2, 26, "range step must be positive, got 0"},
		{"range arity", "kernel k(o: ptr[i32]) {\n    for i in range(0, 8, 1, 2) {\n    }\n}", 2, 5, "range takes 1 to 3 arguments"},
		{"range float", "kernel k(o: ptr[i32]) {\n    for i in range(0, 2.5) {\n    }\n}", 2, 23, "cannot use float constant 2.5 as i32"},
		{"not a function", "kernel k(o: ptr[i32]) {\n    let x = o(1)\n}", 2, 14, "cannot call ptr[i32]"},
		{"builtin not called", "kernel k(o: ptr[i32]) {\n    let x = exp\n}", 2, 13, "exp is a function; call it: exp(...)"},
		{"kernel as value", "kernel k(o: ptr[i32]) {\n    let x = flash_fwd\n}", 2, 13, "kernel flash_fwd cannot be used as a value"},
		{"list value", "kernel k(o: ptr[i32]) {\n    let x = [1, 2]\n}", 2, 13, "a list is only allowed as a shape argument"},
		{"index expr", "kernel k(o: ptr[i32]) {\n    let x = arange(0, 4)[1]\n}", 2, 26, "tiles are indexed with ':' and None only"},
		{"index const", "kernel k(o: ptr[i32]) {\n    let x = 3[:]\n}", 2, 14, "cannot index integer constant 3"},
		{"negate bool", "mask m(b, h, q_idx, kv_idx) {\n    return -(q_idx > 0)\n}", 2, 12, "cannot negate bool"},
		{"not int", "mask m(b, h, q_idx, kv_idx) {\n    return !q_idx\n}", 2, 12, "! needs a bool, got i32"},
		{"and int", "mask m(b, h, q_idx, kv_idx) {\n    return q_idx && true\n}", 2, 12, "&& needs bools, got i32"},
		{"rem float", "score s(score, b, h, q_idx, kv_idx) {\n    return score % 2.0\n}", 2, 18, "% is only defined on integers"},
		{"compare bool order", "mask m(b, h, q_idx, kv_idx) {\n    return (q_idx > 0) < true\n}", 2, 12, "bools compare only with == and !="},
		{"ptr minus", "kernel k(o: ptr[f32]) {\n    let p = o - 1\n}", 2, 15, "only + is defined on pointers"},
		{"ptr float offset", "kernel k(o: ptr[f32], x: f32) {\n    let p = o + x\n}", 2, 15, "pointer offset must be an integer, got f32"},
		{"exp of int", "mask m(b, h, q_idx, kv_idx) {\n    return exp(q_idx) > 1.0\n}", 2, 16, "exp needs a float argument, got i32 (convert with f32(x))"},
		{"convert to bool", "mask m(b, h, q_idx, kv_idx) {\n    return bool(q_idx)\n}", 2, 16, "cannot convert i32 to bool; compare instead (x != 0)"},
		{"dot ints", "kernel k(o: ptr[f32]) {\n    let a = zeros([16, 16], i32)\n    let c = dot(a, a)\n}", 3, 16, "dot needs two float tiles of one type, got i32[16, 16] and i32[16, 16]"},
		{"dot 1d", "kernel k(o: ptr[f32]) {\n    let a = zeros([16], f32)\n    let c = dot(a, a)\n}", 3, 16, "dot needs 2-D tiles, got f32[16] and f32[16]"},
		{"trans 1d", "kernel k(o: ptr[f32]) {\n    let c = trans(zeros([16], f32))\n}", 2, 18, "trans needs a 2-D tile, got f32[16]"},
		{"sum two", "kernel k(o: ptr[f32]) {\n    let c = sum(1.0, 2.0)\n}", 2, 16, "sum(x, axis=N) reduces one axis; sum takes no second value"},
		{"max one", "kernel k(o: ptr[f32]) {\n    let c = max(zeros([4], f32))\n}", 2, 16, "max(x, axis=N) reduces one axis; max(a, b) and min(a, b) take two values"},
		{"reduce bool", "kernel k(n: i32) {\n    let c = max(arange(0, 4) < n, axis=0)\n}", 2, 16, "cannot reduce bool[4]"},
		{"select cond", "mask m(b, h, q_idx, kv_idx) {\n    return select(q_idx, true, false)\n}", 2, 19, "select's condition must be bool, got i32"},
		{"load other without mask", "kernel k(x: ptr[f32]) {\n    let v = load(x, other=0.0)\n}", 2, 17, "load's other needs a mask"},
		{"load non-pointer", "kernel k(x: f32) {\n    let v = load(x)\n}", 2, 18, "load needs pointers, got f32"},
		{"positional after named", "kernel k(x: ptr[f32]) {\n    let v = load(x, mask=true, 0.0)\n}", 2, 32, "positional argument after a named one in load"},
		{"arg twice", "kernel k(x: ptr[f32]) {\n    let v = load(x, mask=true, mask=true)\n}", 2, 32, "argument mask given twice in load"},
		{"program_id axis", "kernel k(x: ptr[f32]) {\n    let p = program_id(3)\n}", 2, 23, "program_id axis must be 0, 1 or 2, got 3"},
		{"cdiv zero", "const C = cdiv(4, 0)", 1, 15, "cdiv needs a positive divisor"},
		{"cdiv runtime", "kernel k(n: i32) {\n    let c = cdiv(n, 4)\n}", 2, 18, "cdiv's a must be a compile-time integer, got i32"},
		{"mod args named", "mask m(b, h, q_idx, kv_idx) {\n    return causal(b, h, q_idx, kv_idx=kv_idx)\n}", 2, 32, "mod arguments are positional"},
		{"mod cparam runtime", "mask m(b, h, q_idx, kv_idx) {\n    return prefix_lm(q_idx)(b, h, q_idx, kv_idx)\n}", 2, 22, "argument n of prefix_lm must be a compile-time constant"},
		{"mod cparam twice", "mask m(b, h, q_idx, kv_idx) {\n    return sliding_window(1, left=2)(b, h, q_idx, kv_idx)\n}", 2, 30, "argument left given twice"},
		{"mod std param type", "mask m(b, h, q_idx: f32, kv_idx) {\n    return true\n}", 1, 21, "parameter q_idx of mask m must be i32, got f32"},
		{"typed const", "const N: i32 = 2.5", 1, 16, "constant N: cannot use float constant 2.5 as i32"},
		{"const not constant", "const N = program_id(0)", 1, 11, "constant N must have a compile-time value"},
		{"tensor kernel param", "kernel k(t: tensor[i32]) {\n}", 1, 13, "tensor[...] is only for aux tensor parameters of mods"},
		{"ptr without elem", "kernel k(p: ptr) {\n}", 1, 13, "ptr needs an element type: ptr[f32]"},
		{"cparam no default", "kernel k<mask: mask = none>(seqlen_q: i32, seqlen_k: i32) {\n    let m = prefix_lm(b=0, h=0, q_idx=0, kv_idx=0)\n}", 2, 22, "mask prefix_lm needs a value for compile-time parameter n (i32)"},
		{"cparam unknown name", "mask m(b, h, q_idx, kv_idx) {\n    return sliding_window(left=1, right=2, up=3)(b, h, q_idx, kv_idx)\n}", 2, 26, "mask sliding_window has no compile-time parameter up"},
		{"cparam default not const", "kernel k<N: i32 = program_id(0)>(o: ptr[i32]) {\n}", 1, 19, "default of N must be a compile-time constant"},
		{"cparam arg runtime", "mask m(b, h, q_idx, kv_idx) {\n    return sliding_window(program_id(0), 1)(b, h, q_idx, kv_idx)\n}", 2, 27, "argument left of sliding_window must be a compile-time constant"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text, lines := errorAt(t, c.src, c.line, c.col, c.frag)
			if len(lines) < 3 {
				t.Fatalf("no excerpt:\n%s", text)
			}
			srcLine := strings.Split(c.src, "\n")[c.line-1]
			if lines[1] != "    "+srcLine || lines[2] != "    "+caretPad(srcLine, c.col)+"^" {
				t.Errorf("excerpt or caret wrong:\n%s", text)
			}
		})
	}
}

// errorAt checks that src, as file x.fa, fails to check with an error
// whose first line is at line:col and contains frag, and returns the
// error's text and lines.
func errorAt(t *testing.T, src string, line, col int, frag string) (string, []string) {
	t.Helper()
	err := checkFiles(map[string]string{"x.fa": src})
	if err == nil {
		t.Fatalf("checks, want an error at %d:%d", line, col)
	}
	text := err.Error()
	lines := strings.Split(text, "\n")
	wantHead := fmt.Sprintf("x.fa:%d:%d: ", line, col)
	if !strings.HasPrefix(lines[0], wantHead) || !strings.Contains(lines[0], frag) {
		t.Fatalf("got:\n%s\nwant %q and %q", text, wantHead, frag)
	}
	return text, lines
}

// TestErrorList checks that `fac check` style checking reports one error
// per bad declaration, in source order, each with its excerpt.
func TestErrorList(t *testing.T) {
	src := "mask a(b, h, q_idx, kv_idx) {\n    return 1.0\n}\n\nmask ok(b, h, q_idx, kv_idx) {\n    return true\n}\n\nscore c(s, b, h, q_idx, kv_idx) {\n    return s > 0.0\n}\n"
	err := checkFiles(map[string]string{"two.fa": src})
	var list lang.ErrorList
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("want 2 errors, got %v", err)
	}
	for i, want := range []string{"two.fa:2:12: mask a must return bool", "two.fa:10:12: score c must return f32"} {
		if !strings.HasPrefix(list[i].Error(), want) {
			t.Errorf("error %d: %q, want prefix %q", i, list[i].Error(), want)
		}
	}
}

// TestCLIExprErrors covers mods and constants given on a command line.
func TestCLIExprErrors(t *testing.T) {
	prog, err := attention.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ src, kind, want string }{
		{"nosuch", "mask", "<mask>:1:1: unknown mask mod nosuch (mask mods: and_masks, causal, causal_bottom_right, chunked, document, document_spans, document_spans_kv, none, noop_mask, not_mask, or_masks, prefix_lm, sliding_window)"},
		{"nosuch(3)", "mask", "<mask>:1:1: unknown mask mod nosuch"},
		{"causal(1)", "mask", "<mask>:1:7: mask mod causal takes no compile-time arguments; write just causal"},
		{"softcap(2.0)", "mask", "<mask>:1:1: softcap(2.0) is not a mask mod (mask mods: "},
		{"causal", "score", "<score>:1:1: causal is not a score mod (score mods: alibi, identity, softcap)"},
		{"prefix_lm", "mask", "<mask>:1:1: mask prefix_lm needs a value for compile-time parameter n (i32)"},
		{"sliding_window(1, 2, 3)", "mask", "<mask>:1:22: sliding_window takes 2 compile-time arguments, got 3"},
	}
	for _, c := range cases {
		e, err := parser.ParseExpr("<"+c.kind+">", c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		_, err = prog.ResolveMod(e, c.kind)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("ResolveMod(%q, %s) = %v, want prefix %q", c.src, c.kind, err, c.want)
		}
	}
	if _, err := parser.ParseExpr("<mask>", "causal("); err == nil || !strings.HasPrefix(err.Error(), "<mask>:1:8: syntax error: unexpected end of file (expected \")\")\n    causal(\n           ^") {
		t.Errorf("ParseExpr(causal() = %v", err)
	}
}
