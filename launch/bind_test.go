package launch

import (
	"reflect"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/artifact"
)

// toy is a contract for a kernel copy(x, y, n, mask.doc, mask.doc.len).
var toy = &Contract{
	Kernel: "toy",
	Tensors: []Tensor{
		{Name: "x", Dims: func(p Problem) []int { return []int{p.Shape.Batch, p.Shape.SeqQ, p.Shape.Dim} }, Strides: []string{"sx_b", "sx_s"}},
		{Name: "y", Output: true, Dims: func(p Problem) []int { return []int{p.Shape.Batch, p.Shape.SeqQ} }},
	},
	Scalars: []Scalar{{Name: "n", Value: func(p Problem) any { return p.Shape.SeqQ }}, {Name: "scale", Value: func(p Problem) any { return p.SoftmaxScale() }}},
	Mods:    []string{"mask"},
	Grid:    func(p Problem) [3]int { return [3]int{CeilDiv(p.Shape.SeqQ, p.Attr("BLOCK")), p.Shape.Batch, 1} },
}

var toyParams = []artifact.Param{
	{Name: "x", Kind: artifact.KindPtr, Elem: "bf16"}, {Name: "y", Kind: artifact.KindPtr, Elem: "f32"},
	{Name: "sx_b", Kind: artifact.KindI32, Elem: "i32"}, {Name: "sx_s", Kind: artifact.KindI32, Elem: "i32"},
	{Name: "n", Kind: artifact.KindI32, Elem: "i32"}, {Name: "scale", Kind: artifact.KindF32, Elem: "f32"},
	{Name: "mask.doc", Kind: artifact.KindPtr, Elem: "i32"}, {Name: "mask.doc.len", Kind: artifact.KindI32, Elem: "i32"},
}

func toyRequest() Request {
	return Request{Problem: Problem{Shape: Shape{Batch: 2, Heads: 1, SeqQ: 100, SeqK: 1, Dim: 4}, Attrs: map[string]int64{"BLOCK": 64}},
		Aux: map[string]int{"doc": 100}}
}

func TestBind(t *testing.T) {
	call, err := toy.Bind(toyParams, toyRequest())
	if err != nil {
		t.Fatal(err)
	}
	if call.Grid != [3]int{2, 2, 1} {
		t.Errorf("grid %v", call.Grid)
	}
	want := map[string]any{"sx_b": int32(400), "sx_s": int32(4), "n": int32(100), "scale": float32(0.5), "mask.doc.len": int32(100)}
	for _, a := range call.Args {
		if a.Buffer >= 0 {
			b := call.Buffers[a.Buffer]
			if b.Name != a.Param.Name {
				t.Errorf("param %s bound to buffer %s", a.Param.Name, b.Name)
			}
			continue
		}
		if a.Value != want[a.Param.Name] {
			t.Errorf("%s = %v (%T), want %v", a.Param.Name, a.Value, a.Value, want[a.Param.Name])
		}
	}
	x, _ := call.Buffer("x")
	y, _ := call.Buffer("y")
	doc, _ := call.Buffer("mask.doc")
	if x.Len != 800 || x.Role != Input || y.Len != 200 || y.Role != Output || doc.Key != "doc" || doc.Role != Aux {
		t.Errorf("buffers %+v", call.Buffers)
	}
}

func TestBindStrides(t *testing.T) {
	r := toyRequest()
	r.Strides = map[string][]int{"x": {1000, 8}}
	call, err := toy.Bind(toyParams, r)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := call.Buffer("x")
	if want := 1000 + 99*8 + 4; x.Len != want {
		t.Errorf("strided extent %d, want %d", x.Len, want)
	}
	r.Strides = map[string][]int{"x": {1000, 2}}
	if _, err := toy.Bind(toyParams, r); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("overlapping rows: %v", err)
	}
	r.Strides = map[string][]int{"y": {1}}
	if _, err := toy.Bind(toyParams, r); err == nil || !strings.Contains(err.Error(), "takes no strides") {
		t.Errorf("strides for a tensor without: %v", err)
	}
}

func TestBindErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*Request)
		want string
	}{
		"missing aux": {func(r *Request) { r.Aux = nil }, `missing aux tensor "doc"`},
		"unknown aux": {func(r *Request) { r.Aux["dco"] = 3 }, `aux tensor "dco" is not read`},
		"bad shape":   {func(r *Request) { r.Problem.Shape.SeqQ = 0 }, "seqlen_q must be positive"},
		"overflow":    {func(r *Request) { r.Problem.Shape.Batch = 1 << 40 }, "32-bit"},
	} {
		r := toyRequest()
		tc.edit(&r)
		if _, err := toy.Bind(toyParams, r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
}

func TestCheckParams(t *testing.T) {
	if err := toy.CheckParams(toyParams); err != nil {
		t.Fatal(err)
	}
	bad := append([]artifact.Param(nil), toyParams...)
	bad[4].Kind = artifact.KindPtr
	if err := toy.CheckParams(bad); err == nil {
		t.Error("a scalar passed as pointer was accepted")
	}
	if err := toy.CheckParams(append(toyParams, artifact.Param{Name: "extra", Kind: artifact.KindI32})); err == nil {
		t.Error("an undeclared parameter was accepted")
	}
}

// tmapParams are toyParams with a tensor map of x: [batch, seq, dim] read
// in boxes of 64 rows, rows bounded by n.
func tmapParams() []artifact.Param {
	return append(append([]artifact.Param(nil), toyParams...), artifact.Param{Name: "x.tmap", Kind: artifact.KindTensorMap, Elem: "bf16",
		TMA: &artifact.TMA{Tensor: "x", Dims: []artifact.TMADim{{Extent: 4}, {Stride: "sx_s", Bound: "n"}, {Stride: "sx_b"}}, Box: []int{64, 64, 1}, Swizzle: 128}})
}

func TestBindTensorMap(t *testing.T) {
	r := toyRequest()
	r.Strides = map[string][]int{"x": {1000, 8}}
	call, err := toy.Bind(tmapParams(), r)
	if err != nil {
		t.Fatal(err)
	}
	a := call.Args[len(call.Args)-1]
	want := TensorMap{Buffer: 0, Elem: "bf16", Dims: []uint64{4, 100, 2}, Strides: []uint64{16, 2000}, Box: []uint32{64, 64, 1}, Swizzle: 128}
	if a.Buffer != -1 || !reflect.DeepEqual(a.Value, want) || call.Buffers[0].Name != "x" {
		t.Errorf("tensor map arg %+v, want %+v", a, want)
	}
}

// TestWithTensorMaps: a call bound to the tile-IR function's parameters
// takes the tensor maps an artifact adds, resolved as Bind resolves them.
func TestWithTensorMaps(t *testing.T) {
	r := toyRequest()
	r.Strides = map[string][]int{"x": {1000, 8}}
	direct, err := toy.Bind(tmapParams(), r)
	if err != nil {
		t.Fatal(err)
	}
	call, err := toy.Bind(toyParams, r)
	if err != nil {
		t.Fatal(err)
	}
	if same, err := call.WithTensorMaps(toyParams); same != call || err != nil {
		t.Errorf("same parameters: %p %v", same, err)
	}
	ext, err := call.WithTensorMaps(tmapParams())
	if err != nil {
		t.Fatal(err)
	}
	if len(call.Args) != len(toyParams) || !reflect.DeepEqual(ext.Args, direct.Args) {
		t.Errorf("extended args %+v, want %+v", ext.Args, direct.Args)
	}
	other := append([]artifact.Param(nil), toyParams...)
	other[4].Name = "m"
	if _, err := call.WithTensorMaps(other); err == nil || !strings.Contains(err.Error(), "argument 4 is for i32 parameter n, the kernel's is i32 m") {
		t.Errorf("a different kernel's parameters: %v", err)
	}
	extra := append(append([]artifact.Param(nil), toyParams...), artifact.Param{Name: "z", Kind: artifact.KindI32, Elem: "i32"})
	if _, err := call.WithTensorMaps(extra); err == nil || !strings.Contains(err.Error(), "z is not in its launch contract") {
		t.Errorf("an extra scalar: %v", err)
	}
}

func TestTensorMapErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*artifact.TMA)
		want string
	}{
		"not a tensor":  {func(m *artifact.TMA) { m.Tensor = "mask.doc" }, `maps "mask.doc", which is not a tensor`},
		"stride kind":   {func(m *artifact.TMA) { m.Dims[1].Stride = "scale" }, `dim 1's stride "scale"`},
		"missing bound": {func(m *artifact.TMA) { m.Dims[1].Bound = "nope" }, `bound "nope" are not i32`},
		"no extent":     {func(m *artifact.TMA) { m.Dims[2].Stride = "n" }, `dim 2 has no bound and "n" is not a stride of tensor x`},
	} {
		ps := tmapParams()
		tc.edit(ps[len(ps)-1].TMA)
		if err := toy.CheckParams(ps); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
	// A bound bound to a negative value.
	ps := tmapParams()
	ps[len(ps)-1].TMA.Dims[1].Bound = "mask.doc.len"
	r := toyRequest()
	r.Aux["doc"] = -3
	if _, err := toy.Bind(ps, r); err == nil || !strings.Contains(err.Error(), "kernel toy: tensor map x.tmap of x: parameter mask.doc.len = -3") {
		t.Errorf("negative bound: %v", err)
	}
}

func TestProduct(t *testing.T) {
	if n, ok := Product(1<<31, 1<<31); !ok || n != 1<<62 {
		t.Errorf("2^62: %d %v", n, ok)
	}
	if _, ok := Product(1<<32, 1<<32); ok {
		t.Error("2^64 did not overflow")
	}
	if _, ok := Product(4294967296, 4294967296, 2); ok {
		t.Error("overflow missed")
	}
}
