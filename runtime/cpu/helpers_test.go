package cpu

import (
	"fmt"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

// fnModule makes a module with one func @f whose params have the given
// types and whose body, built by body, returns the values body returns.
func fnModule(params []tir.Type, body func(b *tir.Builder, ps []*tir.Value) []*tir.Value) *tir.Module {
	f := &tir.Func{Name: "f", Body: &tir.Block{}}
	for i, t := range params {
		f.Params = append(f.Params, &tir.Value{Type: t, Name: fmt.Sprintf("p%d", i)})
	}
	b := &tir.Builder{Block: f.Body}
	res := body(b, f.Params)
	for _, r := range res {
		f.Result = append(f.Result, r.Type)
	}
	b.Return(res...)
	return &tir.Module{Funcs: []*tir.Func{f}}
}

// kernelModule makes a module with one kernel @k.
func kernelModule(params []tir.Type, names []string, body func(b *tir.Builder, ps []*tir.Value)) *tir.Module {
	k := &tir.Func{Name: "k", Kernel: true, Body: &tir.Block{}}
	for i, t := range params {
		k.Params = append(k.Params, &tir.Value{Type: t, Name: names[i]})
	}
	b := &tir.Builder{Block: k.Body}
	body(b, k.Params)
	b.Return()
	return &tir.Module{Funcs: []*tir.Func{k}}
}

func call1(t *testing.T, m *tir.Module, args ...any) Tensor {
	t.Helper()
	res, err := Call(m, "f", args...)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 {
		t.Fatalf("got %d results", len(res))
	}
	return res[0]
}

// same compares float64s bit-for-bit in value, treating NaNs as equal.
func same(a, b float64) bool { return a == b || a != a && b != b }

func sameSlice(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !same(a[i], b[i]) {
			return false
		}
	}
	return true
}

func ints(n int, f func(i int) float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}
