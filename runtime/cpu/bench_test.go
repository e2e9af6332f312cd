package cpu

import (
	"testing"

	"github.com/fac-compiler/fac/tir"
)

func BenchmarkFlash(b *testing.B) {
	const n = 2 * 2 * 257 * 64
	m := flashModule(tir.BF16, 64, 64, 64)
	q, k, v, o := NewBuffer("q", tir.BF16, n), NewBuffer("k", tir.BF16, n), NewBuffer("v", tir.BF16, n), NewBuffer("o", tir.F32, n)
	for b.Loop() {
		if err := Launch(m, "k", [3]int{5, 4, 1}, q, k, v, o, 257, 0.125); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPreparedMask(b *testing.B) {
	m := fnModule([]tir.Type{i32s, i32s, i32s, i32s}, func(bd *tir.Builder, ps []*tir.Value) []*tir.Value {
		return []*tir.Value{bd.Cmp("ge", ps[2], ps[3])}
	})
	p, err := Prepare(m, "f")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		if _, err := p.Call(0, 0, i, 7); err != nil {
			b.Fatal(err)
		}
	}
}
