package bundle

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/artifact"
)

func art(kernel, mask, arch, entry string, consts map[string]string, threads int) artifact.Artifact {
	return artifact.Artifact{
		Ident: artifact.Ident{Kernel: kernel, Mods: map[string]string{"mask": mask}, Consts: consts, DType: "bf16", Arch: arch,
			Sources: "abc", Fac: "0.1.0", LLC: "22.1"},
		Entry: entry, Threads: threads, SharedBytes: 196608,
		Params: []artifact.Param{{Name: "q", Kind: "u64", Elem: "bf16"}, {Name: "seqlen", Kind: "i32", Elem: "i32"}, {Name: "scale", Kind: "f32", Elem: "f32"}},
		PTX:    ".version 8.0\n.target " + arch + "\n.address_size 64\n.visible .entry " + entry + "() { ret; }\n// <x> & \"quoted\"\n",
	}
}

func sample() *Bundle {
	b := &Bundle{FacVersion: "0.1.0"}
	b.Add(art("flash_fwd", "causal", "sm_90a", "flash_fwd", map[string]string{"D": "128"}, 384))
	b.Add(art("flash_fwd", "causal", "sm_80", "flash_fwd", map[string]string{"D": "128"}, 128))
	b.Add(art("flash_fwd", "none", "sm_90a", "flash_fwd", map[string]string{"D": "64"}, 256))
	return b
}

func TestRoundTrip(t *testing.T) {
	b := sample()
	path := filepath.Join(t.TempDir(), "kernels.facb")
	if err := Write(path, b); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	b.Format = Format
	b.Digest = b.ComputeDigest()
	if !reflect.DeepEqual(got, b) {
		t.Errorf("round trip changed the bundle:\n got %+v\nwant %+v", got, b)
	}
	data, _ := os.ReadFile(path)
	for _, want := range []string{`"format": "fac-bundle/3"`, `"shared_bytes": 196608`, `<x> &`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("file lacks %q", want)
		}
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}

	want := b.Kernels[1].Ident
	want.Fac, want.LLC = "a later build", "" // bundles outlive the compiler that made them
	if k := got.Find(want); k == nil || k.Ident.Arch != "sm_80" || k.Threads != 128 {
		t.Errorf("Find = %+v", k)
	}
	other := want
	other.Consts = map[string]string{"D": "64"}
	if got.Find(other) != nil {
		t.Error("Find matched different consts")
	}
	other = want
	other.Sources = "changed"
	if got.Has(other) {
		t.Error("Find matched a kernel compiled from other sources")
	}
}

func TestCorruptChecksum(t *testing.T) {
	data, err := Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), ".target sm_80", ".target sm_86", 1)
	_, err = Parse([]byte(bad))
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") || !strings.Contains(err.Error(), "sm_80") {
		t.Errorf("edited PTX: err = %v", err)
	}

	path := filepath.Join(t.TempDir(), "b.facb")
	os.WriteFile(path, []byte(bad), 0o644)
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Read error should name the file: %v", err)
	}
}

func TestWrongFormat(t *testing.T) {
	for name, tc := range map[string]struct{ data, want string }{
		"other version": {`{"format":"fac-bundle/9","kernels":[]}`, `unsupported format "fac-bundle/9" (want "fac-bundle/3")`},
		"version 1":     {`{"format":"fac-bundle/1","kernels":[]}`, `format "fac-bundle/1" is from an older fac`},
		"version 2":     {`{"format":"fac-bundle/2","kernels":[]}`, "rebuild it with this fac's `fac build`"},
		"no format":     {`{"kernels":[]}`, `no "format" field`},
		"not json":      {"\x7fELF", "not a fac bundle"},
		"bad field":     {`{"format":"fac-bundle/3","kernels":[{"threads":"x"}]}`, "bundle: json"},
		"empty kernel":  {`{"format":"fac-bundle/3","kernels":[{"entry":"k","sha256":"x"}]}`, "no .entry k"},
		"no digest":     {`{"format":"fac-bundle/3","kernels":[]}`, "no digest"},
	} {
		_, err := Parse([]byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
	if _, err := Read(filepath.Join(t.TempDir(), "missing.facb")); err == nil {
		t.Error("Read of a missing file succeeded")
	}
}

func TestDuplicateVariant(t *testing.T) {
	b := sample()
	b.Add(b.Kernels[0])
	if _, err := Marshal(b); err == nil || !strings.Contains(err.Error(), "same kernel") {
		t.Errorf("duplicate: err = %v", err)
	}
	if err := Write(filepath.Join(t.TempDir(), "x"), b); err == nil {
		t.Error("Write accepted an invalid bundle")
	}
}

func TestMarshalFillsChecksums(t *testing.T) {
	b := &Bundle{Kernels: []artifact.Artifact{art("k", "none", "sm_90a", "k", nil, 32)}}
	data, err := Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if b.Format != "" || b.Kernels[0].SHA256 != "" {
		t.Error("Marshal modified its argument")
	}
	got, err := Parse(data)
	if err != nil || got.Kernels[0].SHA256 != Checksum(b.Kernels[0].PTX) {
		t.Errorf("Parse = %v, %v", got, err)
	}
}
