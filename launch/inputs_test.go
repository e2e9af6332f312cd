package launch

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/artifact"
)

// TestBindModInputs binds a kernel whose mods read run-time parameters
// ("mask.offset", a bool "mask.causal") and the problem's batch and heads.
func TestBindModInputs(t *testing.T) {
	params := append(slices.Clone(toyParams),
		artifact.Param{Name: "mask.offset", Kind: artifact.KindI32, Elem: "i32"},
		artifact.Param{Name: "mask.causal", Kind: artifact.KindI32, Elem: "i1"},
		artifact.Param{Name: "mask.temp", Kind: artifact.KindF32, Elem: "f32"},
		artifact.Param{Name: "batch", Kind: artifact.KindI32, Elem: "i32"},
		artifact.Param{Name: "num_heads", Kind: artifact.KindI32, Elem: "i32"})
	if err := toy.CheckParams(params); err != nil {
		t.Fatal(err)
	}
	if got := toy.RuntimeParams(params); !slices.Equal(got, []string{"offset", "causal", "temp"}) {
		t.Errorf("RuntimeParams = %v", got)
	}
	if got := toy.AuxTensors(params); !slices.Equal(got, []string{"doc"}) {
		t.Errorf("AuxTensors = %v", got)
	}
	r := toyRequest()
	r.Problem.Shape.Heads = 3
	r.Scalars = map[string]any{"offset": int64(-5), "mask.causal": true, "temp": 2}
	call, err := toy.Bind(params, r)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"mask.offset": int32(-5), "mask.causal": int32(1), "mask.temp": float32(2), "batch": int32(2), "num_heads": int32(3)}
	for _, a := range call.Args {
		if w, ok := want[a.Param.Name]; ok && a.Value != w {
			t.Errorf("%s = %v (%T), want %v", a.Param.Name, a.Value, a.Value, w)
		}
	}
	for _, c := range []struct {
		scalars map[string]any
		want    string
	}{
		{map[string]any{"causal": true, "temp": 1.0}, `missing run-time parameter "offset" (parameter mask.offset)`},
		{map[string]any{"offset": 1, "causal": 1, "temp": 1.0}, "parameter mask.causal is bool, got int"},
		{map[string]any{"offset": 1 << 40, "causal": true, "temp": 1.0}, "does not fit i32"},
		{map[string]any{"offset": 1, "causal": true, "temp": 1.0, "window": 3}, `run-time parameter "window" is not read by its mods (they read: offset, causal, temp)`},
	} {
		r.Scalars = c.scalars
		if _, err := toy.Bind(params, r); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Bind with %v: %v, want %q", c.scalars, err, c.want)
		}
	}
	// A contract that names batch itself keeps it.
	named := *toy
	named.Scalars = append(slices.Clone(toy.Scalars), Scalar{Name: "batch", Value: func(p Problem) any { return 7 }})
	r.Scalars = map[string]any{"offset": 1, "causal": false, "temp": float32(1)}
	call, err = named.Bind(params, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range call.Args {
		if a.Param.Name == "batch" && a.Value != int32(7) {
			t.Errorf("batch = %v, want the contract's 7", a.Value)
		}
	}
}

// TestHostData converts each kind of host data to an aux tensor's element
// type, keeping every value or refusing.
func TestHostData(t *testing.T) {
	good := []struct {
		elem string
		in   any
		want any
	}{
		{"i32", []int64{1, -2, 1<<31 - 1}, []int32{1, -2, 1<<31 - 1}},
		{"i32", []int8{-1, 2}, []int32{-1, 2}},
		{"i32", []uint8{255}, []int32{255}},
		{"i32", []float64{3, -4}, []int32{3, -4}},
		{"i64", []int32{5}, []int64{5}},
		{"i1", []uint8{0, 1}, []bool{false, true}},
		{"i1", []bool{true}, []bool{true}},
		{"f32", []float64{0.5}, []float32{0.5}},
		{"f32", []int{3}, []float32{3}},
		{"f16", []float32{1, 0.5}, []uint16{0x3c00, 0x3800}},
		{"bf16", []float32{1}, []uint16{0x3f80}},
		{"bf16", []uint16{0x3f80}, []uint16{0x3f80}},
	}
	for _, c := range good {
		got, shape, err := HostData(c.elem, c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) || shape != nil {
			t.Errorf("HostData(%s, %v) = %v %v %v, want %v", c.elem, c.in, got, shape, err, c.want)
		}
	}
	got, shape, err := HostData("i32", Array{Shape: []int{2, 1}, Data: []int64{4, 5}})
	if err != nil || !reflect.DeepEqual(got, []int32{4, 5}) || !slices.Equal(shape, []int{2, 1}) {
		t.Errorf("Array: %v %v %v", got, shape, err)
	}
	bad := []struct {
		elem string
		in   any
		want string
	}{
		{"i32", []int64{1 << 31}, "element 0 is 2147483648, outside i32"},
		{"i32", []float32{0.5}, "element 0 is 0.5, not an integer"},
		{"i32", []bool{true}, "bools are for bool tensors"},
		{"i1", []int8{0, 2}, "element 1 is 2; a bool tensor takes 0 or 1"},
		{"f32", []uint16{1}, "[]uint16 holds the bits of f16 or bf16 values"},
		{"f32", []int32{1<<24 + 1}, "not exactly an f32"},
		{"i64", []uint16{1}, "f16 or bf16 bits"},
		{"f16", []int32{1}, "an f16 tensor takes []uint16"},
		{"i32", "doc", "got string"},
		{"i32", Array{Shape: []int{3}, Data: []int32{1, 2}}, "shape [3] has 3 elements, its data 2"},
	}
	for _, c := range bad {
		if _, _, err := HostData(c.elem, c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("HostData(%s, %v): %v, want %q", c.elem, c.in, err, c.want)
		}
	}
}
