package artifact

import (
	"strings"
	"testing"
)

func sample() *Artifact {
	return &Artifact{
		Ident: Ident{Kernel: "k", Mods: map[string]string{"mask": "causal"}, Consts: map[string]string{"BLOCK_M": "64"},
			DType: "bf16", Arch: "sm_90a", Sources: "s", Fac: "f", LLC: "l"},
		Entry: "k", PTX: ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k() { ret; }\n",
		Threads: 128, Params: []Param{{Name: "q", Kind: KindPtr, Elem: "bf16"}, {Name: "n", Kind: KindI32, Elem: "i32"}},
	}
}

func sampleTMA() *TMA {
	return &TMA{Tensor: "q", Dims: []TMADim{{Extent: 128}, {Stride: "n", Bound: "n"}}, Box: []int{64, 64}, Swizzle: 128}
}

// addTMap adds a tensor map of q to a and returns it for editing.
func addTMap(a *Artifact) *Param {
	a.Params = append(a.Params, Param{Name: "q.tmap", Kind: KindTensorMap, Elem: "bf16", TMA: sampleTMA()})
	return &a.Params[len(a.Params)-1]
}

// roundTrip encodes and decodes a.
func roundTrip(t *testing.T, a *Artifact) *Artifact {
	t.Helper()
	b, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestTensorMapParam(t *testing.T) {
	a := sample()
	addTMap(a)
	got := roundTrip(t, a)
	if tm := got.Params[2].TMA; tm == nil || tm.Dims[1].Bound != "n" || tm.Box[1] != 64 {
		t.Errorf("round trip: %+v", got.Params[2])
	}
}

func TestEncodeDecode(t *testing.T) {
	a := sample()
	got := roundTrip(t, a)
	if got.Ident.Key() != a.Ident.Key() || got.PTX != a.PTX || got.SHA256 != Checksum(a.PTX) {
		t.Errorf("round trip: %+v", got)
	}
}

func TestDecodeRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*Artifact)
		want string
	}{
		"empty":         {func(a *Artifact) { *a = Artifact{} }, "no entry"},
		"no entry":      {func(a *Artifact) { a.PTX = ".version 8.0\n" }, "no .entry k"},
		"edited PTX":    {func(a *Artifact) { a.SHA256 = Checksum(a.PTX); a.PTX += "//" }, "checksum"},
		"no threads":    {func(a *Artifact) { a.Threads = 0 }, "threads"},
		"bad kind":      {func(a *Artifact) { a.Params[0].Kind = "ptr" }, "unknown kind"},
		"no identity":   {func(a *Artifact) { a.Ident.Kernel = "" }, "identity"},
		"no arch":       {func(a *Artifact) { a.Ident.Arch = "" }, "identity"},
		"negative smem": {func(a *Artifact) { a.SharedBytes = -1 }, "shared"},
		"tma on i32":    {func(a *Artifact) { a.Params[1].TMA = sampleTMA() }, "i32 parameter n has a tensor map"},
		"tmap no TMA":   {func(a *Artifact) { addTMap(a).TMA = nil }, "tensor-map parameter q.tmap has no TMA"},
		"tmap elem":     {func(a *Artifact) { addTMap(a).Elem = "i32" }, `q.tmap: element type "i32"`},
		"tmap f32 ptr":  {func(a *Artifact) { addTMap(a).Elem = "f32" }, `maps "q", which is not a pointer parameter to f32`},
		"tmap dim0":     {func(a *Artifact) { addTMap(a).TMA.Dims[0].Bound = "n" }, "dim 0 must be contiguous with a positive extent or a bound parameter"},
		"tmap tensor":   {func(a *Artifact) { addTMap(a).TMA.Tensor = "n" }, `maps "n", which is not a pointer`},
		"tmap rank":     {func(a *Artifact) { addTMap(a).TMA.Dims = nil }, "0 dims"},
		"tmap box len":  {func(a *Artifact) { addTMap(a).TMA.Box = []int{64} }, "1 box sizes for 2 dims"},
		"tmap box":      {func(a *Artifact) { addTMap(a).TMA.Box[1] = 512 }, "box size 512 of dim 1"},
		"tmap swizzle":  {func(a *Artifact) { addTMap(a).TMA.Swizzle = 96 }, "swizzle 96"},
		"tmap span":     {func(a *Artifact) { addTMap(a).TMA.Box[0] = 32 }, "not the 128-byte swizzle span"},
		"tmap dim 0":    {func(a *Artifact) { addTMap(a).TMA.Dims[0].Stride = "n" }, "dim 0 must be contiguous"},
		"tmap stride":   {func(a *Artifact) { addTMap(a).TMA.Dims[1].Stride = "" }, "dim 1 needs a stride"},
		"tmap bound":    {func(a *Artifact) { addTMap(a).TMA.Dims[1].Bound = "q" }, `dim 1 names "q", which is not an i32`},
	} {
		a := sample()
		tc.edit(a)
		if err := a.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	if _, err := Decode([]byte("{}")); err == nil {
		t.Error("an empty JSON object decoded as an artifact")
	}
	if _, err := Decode([]byte("garbage")); err == nil {
		t.Error("garbage decoded as an artifact")
	}
}

func TestIdentKeys(t *testing.T) {
	a, b := sample().Ident, sample().Ident
	if a.Key() != b.Key() || a.String() != "k mask=causal BLOCK_M=64 dtype=bf16 sm_90a" {
		t.Errorf("%q", a.String())
	}
	b.Mods = map[string]string{"mask": "none"}
	if a.Key() == b.Key() || a.PortableKey() == b.PortableKey() {
		t.Error("a different mod gave the same key")
	}
	b = a
	b.LLC = "other"
	if a.Key() == b.Key() || a.PortableKey() != b.PortableKey() {
		t.Error("llc version: Key must differ, PortableKey must not")
	}
	if SourcesDigest(map[string]string{"a": "bc"}) == SourcesDigest(map[string]string{"ab": "c"}) {
		t.Error("sources digest is ambiguous")
	}
}
