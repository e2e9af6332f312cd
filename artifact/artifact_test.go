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

func TestEncodeDecode(t *testing.T) {
	a := sample()
	b, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
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
