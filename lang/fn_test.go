package lang_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// fnSrc has the same kernel twice: by_fn with its code in functions, and
// by_hand with the functions' bodies written out. The functions take
// run-time values, constants (a shape, a compile-time bool), a type and a
// mod; return one value, several, or none; call each other; and feed a
// loop's carried vars through a multiple assignment.
const fnSrc = `
fn ramp(N: i32) -> i32 {
    return arange(0, N)
}

fn scaled(x: f32, by: f32, clamp: bool) -> f32 {
    var y = x * by
    if clamp {
        y = min(y, 1.0)
    }
    return y
}

fn step(acc: f32, total: f32, x: f32, DTYPE: type) -> (f32, f32) {
    let y = scaled(x, 0.5, true)
    return acc + f32(DTYPE(y)), total + sum(y, axis=0)
}

fn keep(mask: mask, rows: i32, cols: i32) -> bool {
    return mask(0, 0, rows, cols)
}

fn put(out: ptr[f32], offs: i32, v: f32) {
    store(out + offs, v)
}

kernel by_fn<N: i32 = 16, DTYPE: type = bf16, mask: mask = causal>(x: ptr[f32], out: ptr[f32], seqlen_q: i32, seqlen_k: i32) {
    let offs = ramp(N)
    var acc = zeros([N], f32)
    var total = zeros([N], f32)
    for i in range(0, 4) {
        let v = load(x + i * N + offs)
        acc, total = step(acc, total, v, DTYPE)
    }
    let k = keep(mask, offs[:, None], offs[None, :])
    put(out, offs, acc + sum(select(k, total[None, :], 0.0), axis=0))
}
`

const handSrc = `
kernel by_hand<N: i32 = 16, DTYPE: type = bf16, mask: mask = causal>(x: ptr[f32], out: ptr[f32], seqlen_q: i32, seqlen_k: i32) {
    let offs = arange(0, N)
    var acc = zeros([N], f32)
    var total = zeros([N], f32)
    for i in range(0, 4) {
        let v = load(x + i * N + offs)
        var y = v * 0.5
        y = min(y, 1.0)
        let acc_new = acc + f32(DTYPE(y))
        total = total + sum(y, axis=0)
        acc = acc_new
    }
    // A call evaluates its arguments first, then the body.
    let rows = offs[:, None]
    let cols = offs[None, :]
    let k = mask(0, 0, rows, cols)
    let v = acc + sum(select(k, total[None, :], 0.0), axis=0)
    store(out + offs, v)
}
`

// TestFnExpandsInPlace checks that a call is expanded where it is made:
// the kernel written with functions lowers to the same tile IR, value for
// value, as the kernel written out. This is what keeps kernel identities
// (a digest of the lowered IR) when stdlib code moves into functions.
func TestFnExpandsInPlace(t *testing.T) {
	prog, err := attention.Load(map[string]string{"fn.fa": fnSrc + handSrc})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range prog.DeclaredIn("fn.fa") {
		if err := prog.CheckDecl(name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	lower := func(kernel string) string {
		m, err := prog.Lower(lang.Instance{Kernel: kernel})
		if err != nil {
			t.Fatalf("%s: %v", kernel, err)
		}
		if err := tir.Verify(m); err != nil {
			t.Fatalf("%s: %v", kernel, err)
		}
		return strings.Replace(m.String(), "@"+kernel+"(", "@k(", 1)
	}
	byFn, byHand := lower("by_fn"), lower("by_hand")
	if byFn != byHand {
		t.Errorf("by_fn lowers to\n%s\nby_hand to\n%s", byFn, byHand)
	}
	if !strings.Contains(byFn, "callee = @mask.causal") {
		t.Errorf("the mod call is gone:\n%s", byFn)
	}
	if strings.Contains(byFn, "ramp") || strings.Contains(byFn, "@step") {
		t.Errorf("a function is left in the IR:\n%s", byFn)
	}
}

// TestFnRoundTrip checks that tile IR lowered from functions (a user
// kernel, and the stdlib forward kernels, which are made of functions)
// prints and parses back to the same text.
func TestFnRoundTrip(t *testing.T) {
	prog, err := attention.Load(map[string]string{"fn.fa": fnSrc})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"by_fn", "flash_fwd", "flash_fwd_sinks", "flash_fwd_varlen", "flash_fwd_splitkv", "flash_fwd_combine"} {
		m, err := prog.Lower(lang.Instance{Kernel: k, Args: map[string]lang.Const{}})
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		text := m.String()
		back, err := tir.Parse(k+".tir", text)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if back.String() != text {
			t.Errorf("%s: tile IR does not print back the same after parsing", k)
		}
	}
}

// TestFnChecks covers what a function may be given and return, and that
// fac check accepts functions alone (checked for what does not depend on
// their arguments) and the kernels and mods that call them.
func TestFnChecks(t *testing.T) {
	good := `
const SCALE = 0.5

// Every kind of parameter type.
fn every(x: f32, n: i32, flag: bool, DTYPE: type, p: ptr[DTYPE], m: mask, s: score, any) -> (f32, i32) {
    return x * SCALE, n + 1
}

// No parameters, no result: a function of statements.
fn nothing() {
}

// A mod may call a function too; it sees only its arguments.
fn near(q_idx: i32, kv_idx: i32, window: i32) -> bool {
    return q_idx - kv_idx < window && kv_idx <= q_idx
}

mask near_64(b, h, q_idx, kv_idx) {
    return near(q_idx, kv_idx, 64)
}

kernel uses_every<DTYPE: type = f16>(x: ptr[DTYPE], out: ptr[f32], seqlen_q: i32, seqlen_k: i32) {
    let offs = arange(0, 16)
    nothing()
    let a, b = every(f32(load(x + offs)), 3, true, DTYPE, x, causal, softcap(2.0), 7)
    let c, d = every(x=1.0, n=offs, flag=offs < 4, DTYPE=f32, p=out, m=near_64, s=identity, any=x)
    store(out + offs, a + f32(b) + c + f32(d))
}
`
	if err := checkFiles(map[string]string{"good.fa": good}); err != nil {
		t.Fatal(err)
	}
	// The mod calling a function lowers alone, as the reference device
	// evaluates it.
	prog, err := attention.Load(map[string]string{"good.fa": good})
	if err != nil {
		t.Fatal(err)
	}
	md, _ := prog.Mod("near_64")
	if _, err := prog.LowerMod(&lang.ModInst{Decl: md}); err != nil {
		t.Fatal(err)
	}
	if got := prog.Fns(); len(got) < 3 || !strings.Contains(strings.Join(got, " "), "every") {
		t.Errorf("Fns() = %v", got)
	}
}

// TestFnErrorsInline covers the errors of calls and declarations that
// need no file of their own.
func TestFnErrorsInline(t *testing.T) {
	const twice = "fn twice(x: f32) -> f32 {\n    return x * 2.0\n}\n"
	cases := []struct {
		name, src string
		line, col int
		frag      string
	}{
		{"positional after named", "fn add(x: f32, y: f32) -> f32 {\n    return x + y\n}\nkernel k(o: ptr[f32]) {\n    store(o, add(x=1.0, 2.0))\n}", 5, 25, "positional argument after a named one in call of add"},
		{"unknown named", twice + "kernel k(o: ptr[f32]) {\n    store(o, twice(y=1.0))\n}", 5, 20, "fn twice has no parameter named y (parameters: x)"},
		{"named twice", "fn add(x: f32, y: f32) -> f32 {\n    return x + y\n}\nkernel k(o: ptr[f32]) {\n    store(o, add(x=1.0, x=2.0))\n}", 5, 25, "argument x given twice in call of add"},
		{"tensor param", "fn f(t: tensor[i32]) {\n}", 1, 9, "tensor[...] is only for aux tensor parameters of mods"},
		{"unknown param type", "fn f(x: f64) {\n}", 1, 9, "unknown type f64"},
		{"type param later", "fn f(p: ptr[DTYPE], DTYPE: type) {\n}", 1, 13, "unknown type DTYPE"},
		{"builtin param", "fn f(exp: f32) {\n}", 1, 6, "exp is a built-in name and cannot be redefined"},
		{"shadowing", "fn f(x: f32) -> f32 {\n    let x = 1.0\n    return x\n}", 2, 5, "x is already defined at line 1 (names cannot be shadowed)"},
		{"no value", "fn f() {\n}\nkernel k(o: ptr[f32]) {\n    let v = f()\n}", 4, 13, "f returns no value"},
		{"names without call", "kernel k(o: ptr[f32]) {\n    let a, b = 1.0\n}", 2, 16, "2 names take the results of a function call"},
		{"assign twice", "fn two() -> (f32, f32) {\n    return 1.0, 2.0\n}\nkernel k(o: ptr[f32]) {\n    var a = 0.0\n    a, a = two()\n}", 6, 5, "a is assigned twice in one statement"},
		{"result type", "fn f(x: f32) -> i32 {\n    return x\n}\nkernel k(o: ptr[f32]) {\n    let v = f(1.5)\n}", 2, 12, "result 1 of f must be i32, got float constant 1.5"},
		{"wrong mod kind", "fn f(s: score) {\n}\nkernel k(o: ptr[f32]) {\n    f(causal)\n}", 4, 7, "argument s of f must be a score mod, got mask mod causal"},
		{"kernel-only builtin in a mod", "fn sms() -> i32 {\n    return num_sms()\n}\nmask m(b, h, q_idx, kv_idx) {\n    return q_idx < sms()\n}", 2, 19, "num_sms is for kernels, not mods"},
		{"return in a nested block", "fn f(x: f32) -> f32 {\n    if true {\n        return x\n    }\n    return x\n}", 3, 9, "return is only allowed as the last statement of a function"},
		{"mod returns two", "mask m(b, h, q_idx, kv_idx) {\n    return true, false\n}", 2, 18, "mask m must return one value, got 2"},
		{"nested called at", "fn inner(x: f32) -> f32 {\n    return x % 2.0\n}\nfn outer(x: f32) -> f32 {\n    return inner(x)\n}\nkernel k(o: ptr[f32]) {\n    store(o, outer(f32(program_id(0))))\n}",
			2, 14, "% is only defined on integers (in fn inner called at x.fa:5:17, fn outer called at x.fa:8:19)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text, _ := errorAt(t, c.src, c.line, c.col, c.frag)
			if strings.Contains(text, "internal compiler error") {
				t.Errorf("not a user error:\n%s", text)
			}
		})
	}
}

// TestFnRecursionWhenLowered checks that a kernel calling a recursive
// function is refused where the cycle closes, not expanded forever.
func TestFnRecursionWhenLowered(t *testing.T) {
	src := "fn a(x: f32) -> f32 {\n    return b(x)\n}\nfn b(x: f32) -> f32 {\n    return a(x) + 1.0\n}\nkernel k(o: ptr[f32]) {\n    store(o, a(1.0))\n}\n"
	prog, err := attention.Load(map[string]string{"r.fa": src})
	if err != nil {
		t.Fatal(err)
	}
	err = prog.CheckDecl("k")
	if err == nil || !strings.HasPrefix(err.Error(), "r.fa:5:13: a calls itself (a -> b -> a); recursion is not allowed") {
		t.Fatalf("got %v", err)
	}
}

// TestFnCallLimit checks that functions calling each other twice, level
// after level, stop at MaxFnCalls expansions with an error instead of
// expanding 2^n calls.
func TestFnCallLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("fn g0(x: f32) -> f32 {\n    return x + 1.0\n}\n")
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&b, "fn g%d(x: f32) -> f32 {\n    return g%d(x) + g%d(x)\n}\n", i, i-1, i-1)
	}
	b.WriteString("kernel k(o: ptr[f32]) {\n    store(o, g20(1.0))\n}\n")
	err := checkFiles(map[string]string{"big.fa": b.String()})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d are expanded", lang.MaxFnCalls)) {
		t.Fatalf("got %v", err)
	}
}
