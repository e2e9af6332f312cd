package lang_test

import (
	"strings"
	"testing"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/parser"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// FuzzCheck feeds source text through the whole front end: parse, load with
// the stdlib, check every declaration. Any input may be rejected, but only
// with an error: a panic is a bug. Errors from user source must be
// positioned *lang.Errors, never internal compiler errors.
//
// The seed corpus is testdata/fuzz/FuzzCheck; run the fuzzer with
//
//	go test ./lang -run xxx -fuzz FuzzCheck -fuzztime 60s
func FuzzCheck(f *testing.F) {
	f.Add("mask m(b, h, q_idx, kv_idx) { return q_idx >= kv_idx }")
	// Python operators, comments, limits.
	f.Add("mask m(b, h, q_idx, kv_idx) {\n    return q_idx // 16 >= kv_idx; // c\n}")
	f.Add("mask m(b, h, q_idx, kv_idx) { return ~(q_idx < kv_idx) & (kv_idx < 4) | not q_idx ** 2 }")
	f.Add("mask m(b, h, q_idx, kv_idx) { return " + strings.Repeat("(", 120) + "q_idx >= kv_idx" + strings.Repeat(")", 120) + " }")
	f.Add("mask m(b, h, q_idx, kv_idx) { var k = true " + strings.Repeat("if seqlen_q > 1 { k = false } else ", 60) + "{ } return k }")
	f.Add("const A = B + B; const B = C + C; const C = 1;\nkernel k(o: ptr[f32]) { store(o + arange(0, 512)[:, None] * 512 + arange(0, 512)[None, :], zeros([512, 512], f32) + f32(A)) }")
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 1<<12 {
			return // long inputs only slow the fuzzer down
		}
		file, err := parser.ParseFile("fuzz.fa", src)
		if err != nil {
			if _, ok := lang.AsError(err); !ok {
				t.Fatalf("parse error is %T, not a *lang.Error: %v", err, err)
			}
			return
		}
		if file == nil {
			t.Fatal("ParseFile returned neither a file nor an error")
		}
		prog, err := attention.Load(map[string]string{"fuzz.fa": src})
		if err != nil {
			if _, ok := lang.AsError(err); !ok {
				t.Fatalf("load error is %T, not a *lang.Error: %v", err, err)
			}
			return
		}
		for _, name := range prog.DeclaredIn("fuzz.fa") {
			err := prog.CheckDecl(name)
			if err == nil {
				continue
			}
			if strings.Contains(err.Error(), "internal compiler error") {
				t.Fatalf("CheckDecl(%s): %v", name, err)
			}
			if _, ok := lang.AsError(err); !ok {
				t.Fatalf("CheckDecl(%s) error is %T, not a *lang.Error: %v", name, err, err)
			}
		}
	})
}
