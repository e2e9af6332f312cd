package passes

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// deriveScores appends to m the derivative of each role = score function,
// with respect to s and to its float aux tensors (as the front end asks
// for grad(score, ...)), and returns them.
func deriveScores(m *tir.Module) ([]*tir.Func, error) {
	var out []*tir.Func
	for _, f := range slices.Clone(m.Funcs) {
		if f.Attr("role") != tir.Ident("score") {
			continue
		}
		var mem []int
		for i, p := range f.Params {
			if p.Type.Ptr && p.Type.Elem.IsFloat() {
				mem = append(mem, i)
			}
		}
		g, err := Differentiate(m, f, GradSpec{Name: f.Name + ".grad", WRT: 0, Memory: mem})
		if err != nil {
			return nil, err
		}
		m.Funcs = append(m.Funcs, g)
		out = append(out, g)
	}
	return out, nil
}

// TestDifferentiateGolden derives each score function of
// testdata/differentiate/*.tir and compares the module with the derivatives
// appended with <case>.out.tir (for a failure: "error: <message>").
func TestDifferentiateGolden(t *testing.T) {
	inputs := goldenInputs(t, "differentiate")
	if len(inputs) < 3 {
		t.Fatalf("testdata/differentiate: %d cases", len(inputs))
	}
	for _, in := range inputs {
		t.Run(strings.TrimSuffix(filepath.Base(in), ".tir"), func(t *testing.T) {
			m := parseFile(t, in)
			got := ""
			if _, err := deriveScores(m); err != nil {
				got = "error: " + err.Error() + "\n"
			} else {
				if err := tir.Verify(m); err != nil {
					t.Fatalf("output does not verify: %v\n%s", err, m)
				}
				got = m.String()
			}
			want := strings.TrimSuffix(in, ".tir") + ".out.tir"
			if *update {
				if err := os.WriteFile(want, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("%v (run go test ./passes/ -update)", err)
			}
			if got != string(b) {
				t.Errorf("output differs from %s\ngot:\n%s\nwant:\n%s", want, got, b)
			}
		})
	}
}

// TestDifferentiateNumerically runs each derivative of the golden inputs
// on the interpreter and checks it against central differences of the
// function (run on the interpreter too), for the score tile and for every
// element of the aux tables.
func TestDifferentiateNumerically(t *testing.T) {
	for _, in := range goldenInputs(t, "differentiate") {
		m := parseFile(t, in)
		grads, err := deriveScores(m)
		if err != nil {
			continue // the error cases, checked by the golden test
		}
		for _, g := range grads {
			f := m.Func(strings.TrimSuffix(g.Name, ".grad"))
			t.Run(f.Name, func(t *testing.T) { checkNumerically(t, m, f, g) })
		}
	}
}

func checkNumerically(t *testing.T, m *tir.Module, f, g *tir.Func) {
	rng := rand.New(rand.NewPCG(3, 4))
	tensor := func(typ tir.Type, fill func(i int) float64) cpu.Tensor {
		vals := make([]float64, typ.NumElems())
		for i := range vals {
			vals[i] = fill(i)
		}
		return cpu.Tensor{Type: typ, Vals: vals}
	}
	// f's arguments: s random, b = 0, h = 1, positions 0.., the seqlens,
	// aux tables of 10 random floats.
	var args []any
	var tables []*cpu.Buffer
	for i, p := range f.Params {
		switch {
		case i == 0:
			args = append(args, tensor(p.Type, func(int) float64 { return float64(float32(2 * rng.NormFloat64())) }))
		case p.Type.Ptr:
			xs := make([]float32, 10)
			for j := range xs {
				xs[j] = float32(rng.NormFloat64())
			}
			b := cpu.FromF32(p.Name, xs)
			tables = append(tables, b)
			args = append(args, b)
		case !p.Type.IsScalar():
			args = append(args, tensor(p.Type, func(i int) float64 { return float64(i) }))
		case p.Name == "h":
			args = append(args, int32(1))
		case strings.HasSuffix(p.Name, ".len"):
			args = append(args, int32(10))
		default:
			args = append(args, int32(p.Type.NumElems()*4))
		}
	}
	dout := tensor(f.Result[0], func(int) float64 { return float64(float32(rng.NormFloat64())) })
	loss := func() float64 {
		res, err := cpu.Call(m, f.Name, args...)
		if err != nil {
			t.Fatal(err)
		}
		l := 0.0
		for i, x := range res[0].Vals {
			l += x * dout.Vals[i]
		}
		return l
	}
	var dtables []*cpu.Buffer
	gargs := append([]any{dout}, args...)
	for _, tb := range tables {
		d := cpu.NewBuffer(tb.Name+".grad", tir.F32, len(tb.Vals))
		dtables = append(dtables, d)
		gargs = append(gargs, d)
	}
	res, err := cpu.Call(m, g.Name, gargs...)
	if err != nil {
		t.Fatal(err)
	}
	ds := res[0].Vals
	fd := func(x []float64, i int) float64 {
		const eps = 1e-2
		x0 := x[i]
		x[i] = x0 + eps
		lp := loss()
		x[i] = x0 - eps
		lm := loss()
		x[i] = x0
		return (lp - lm) / (2 * eps)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 2e-3*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %.6g, finite differences %.6g", what, got, want)
		}
	}
	s := args[0].(cpu.Tensor).Vals
	for i := range s {
		near("ds", ds[i], fd(s, i))
	}
	nonzero := false
	for ti, tb := range tables {
		for i := range tb.Vals {
			near(tb.Name+".grad", dtables[ti].Vals[i], fd(tb.Vals, i))
			nonzero = nonzero || dtables[ti].Vals[i] != 0
		}
	}
	if len(tables) > 0 && !nonzero {
		t.Error("every aux gradient is 0")
	}
}

// TestDifferentiateErrors checks the error for an op that cannot be
// differentiated: a *DiffError naming the op, with its position.
func TestDifferentiateErrors(t *testing.T) {
	m := parseFile(t, "testdata/differentiate/loop.tir")
	_, err := deriveScores(m)
	var de *DiffError
	if !errors.As(err, &de) || de.Op.Kind != tir.OpFor || de.Op.Pos.Line == 0 {
		t.Fatalf("error %v, want a DiffError at the for", err)
	}
	f := m.Func("power")
	if _, err := Differentiate(m, f, GradSpec{Name: "x", WRT: 1}); err == nil {
		t.Error("differentiating with respect to an integer parameter passed")
	}
	if _, err := Differentiate(m, f, GradSpec{Name: "x", WRT: 0, Memory: []int{2}}); err == nil {
		t.Error("an i32 parameter passed as a Memory parameter")
	}
}
