package launch

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/tir"
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

// persistentParams are toyParams with the grid parameters the persistent
// pass appends.
func persistentParams() []artifact.Param {
	ps := append([]artifact.Param(nil), toyParams...)
	for _, n := range tir.GridParams {
		ps = append(ps, artifact.Param{Name: n, Kind: artifact.KindI32, Elem: "i32"})
	}
	return ps
}

// gridArgs are a call's grid parameters' values, in tir.GridParams order.
func gridArgs(t *testing.T, call *Call) [4]int32 {
	t.Helper()
	var out [4]int32
	for i, n := range tir.GridParams {
		k := slices.IndexFunc(call.Args, func(a Arg) bool { return a.Param.Name == n })
		if k < 0 {
			t.Fatalf("no argument %s", n)
		}
		out[i] = call.Args[k].Value.(int32)
	}
	return out
}

// TestBindPersistent: a persistent kernel's grid parameters are the
// logical grid and, as bound, one program per tile; Persist lowers the
// program count within [1, tiles] and launches [programs, 1, 1].
func TestBindPersistent(t *testing.T) {
	r := toyRequest()
	r.Problem.Shape.Batch = 3 // grid [2, 3, 1]: 6 tiles
	plain, err := toy.Bind(toyParams, r)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Persistent() || plain.Grid != [3]int{2, 3, 1} || plain.Tiles != plain.Grid || plain.Programs() != 6 {
		t.Errorf("non-persistent call: persistent %v, grid %v, tiles %v, programs %d", plain.Persistent(), plain.Grid, plain.Tiles, plain.Programs())
	}
	plain.Persist(2)
	if plain.Grid != [3]int{2, 3, 1} {
		t.Errorf("Persist changed a non-persistent call's grid to %v", plain.Grid)
	}

	call, err := toy.Bind(persistentParams(), r)
	if err != nil {
		t.Fatal(err)
	}
	if !call.Persistent() || call.Tiles != [3]int{2, 3, 1} || call.Grid != [3]int{6, 1, 1} || call.Programs() != 6 {
		t.Errorf("bound: persistent %v, tiles %v, grid %v, programs %d", call.Persistent(), call.Tiles, call.Grid, call.Programs())
	}
	if g := gridArgs(t, call); g != [4]int32{2, 3, 1, 6} {
		t.Errorf("grid arguments %v, want [2 3 1 6]", g)
	}
	// The other arguments are bound as for the kernel without the grid.
	if !reflect.DeepEqual(call.Args[:len(toyParams)], plain.Args) {
		t.Errorf("arguments %+v, want %+v", call.Args[:len(toyParams)], plain.Args)
	}
	for _, tc := range []struct{ programs, want int }{{4, 4}, {1, 1}, {6, 6}, {100, 6}, {0, 1}, {-3, 1}} {
		c := call.Clone()
		c.Persist(tc.programs)
		if g := gridArgs(t, c); c.Grid != [3]int{tc.want, 1, 1} || g != [4]int32{2, 3, 1, int32(tc.want)} || c.Programs() != tc.want || c.Tiles != call.Tiles {
			t.Errorf("Persist(%d): grid %v, arguments %v, want %d programs", tc.programs, c.Grid, g, tc.want)
		}
	}
	if g := gridArgs(t, call); call.Grid != [3]int{6, 1, 1} || g[3] != 6 {
		t.Errorf("Persist on a clone changed the call: grid %v, arguments %v", call.Grid, g)
	}
	// The tensor maps an artifact adds keep the grid.
	ext, err := call.WithTensorMaps(append(persistentParams(), tmapParams()[len(toyParams)]))
	if err != nil {
		t.Fatal(err)
	}
	if !ext.Persistent() || ext.Grid != call.Grid || ext.Tiles != call.Tiles {
		t.Errorf("with tensor maps: persistent %v, grid %v, tiles %v", ext.Persistent(), ext.Grid, ext.Tiles)
	}

	// No tiles: an empty launch, whatever the program count.
	empty := &Contract{Kernel: "toy", Tensors: toy.Tensors, Scalars: toy.Scalars, Mods: toy.Mods,
		Grid: func(Problem) [3]int { return [3]int{0, 3, 1} }}
	r = toyRequest()
	call, err = empty.Bind(persistentParams(), r)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 132} {
		call.Persist(n)
		if g := gridArgs(t, call); call.Grid[0] != 0 || g != [4]int32{0, 3, 1, 1} {
			t.Errorf("no tiles, Persist(%d): grid %v, arguments %v", n, call.Grid, g)
		}
	}

	// The logical y is an argument, not a launch dimension: past 65535 is
	// fine for a persistent kernel only.
	wide := &Contract{Kernel: "toy", Tensors: toy.Tensors, Scalars: toy.Scalars, Mods: toy.Mods,
		Grid: func(Problem) [3]int { return [3]int{1, 70000, 2} }}
	if call, err := wide.Bind(persistentParams(), r); err != nil || call.Grid != [3]int{140000, 1, 1} {
		t.Errorf("y = 70000, persistent: %v, %v", call, err)
	}
	if _, err := wide.Bind(toyParams, r); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("y = 70000, not persistent: %v", err)
	}
	huge := &Contract{Kernel: "toy", Tensors: toy.Tensors, Scalars: toy.Scalars, Mods: toy.Mods,
		Grid: func(Problem) [3]int { return [3]int{1 << 16, 1 << 15, 1} }}
	if _, err := huge.Bind(persistentParams(), r); err == nil || !strings.Contains(err.Error(), "too many tiles for a persistent kernel") {
		t.Errorf("2^31 tiles: %v", err)
	}
}

// TestCheckParamsGrid: the grid parameters need no contract role, but must
// be i32, all four, and not claimed by the contract.
func TestCheckParamsGrid(t *testing.T) {
	if err := toy.CheckParams(persistentParams()); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		edit func([]artifact.Param) []artifact.Param
		want string
	}{
		"i64":     {func(ps []artifact.Param) []artifact.Param { ps[len(ps)-1].Kind = artifact.KindI64; return ps }, "grid parameter grid.programs is i64"},
		"f32":     {func(ps []artifact.Param) []artifact.Param { ps[len(ps)-4].Kind = artifact.KindF32; return ps }, "grid parameter grid.x is f32"},
		"pointer": {func(ps []artifact.Param) []artifact.Param { ps[len(ps)-2].Kind = artifact.KindPtr; return ps }, "grid parameter grid.z is u64"},
		"bool":    {func(ps []artifact.Param) []artifact.Param { ps[len(ps)-3].Elem = "i1"; return ps }, "grid parameter grid.y is i32 (element i1)"},
		"partial": {func(ps []artifact.Param) []artifact.Param { return ps[:len(ps)-1] }, "has 3 of the grid parameters"},
		"twice":   {func(ps []artifact.Param) []artifact.Param { return append(ps, ps[len(ps)-1]) }, "grid parameter grid.programs twice"},
	} {
		if err := toy.CheckParams(tc.edit(persistentParams())); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
	claims := *toy
	claims.Scalars = append(slices.Clone(toy.Scalars), Scalar{Name: "grid.x", Value: func(Problem) any { return 1 }})
	if err := claims.CheckParams(persistentParams()); err == nil || !strings.Contains(err.Error(), "names parameter grid.x, which a persistent kernel's launch binds") {
		t.Errorf("a contract naming grid.x: %v", err)
	}
	// Without mods too (the grid parameters are not size parameters).
	plain := *toy
	plain.Mods = nil
	ps := slices.DeleteFunc(persistentParams(), func(p artifact.Param) bool { return strings.HasPrefix(p.Name, "mask.") })
	if err := plain.CheckParams(ps); err != nil {
		t.Errorf("a kernel without mods: %v", err)
	}
}
