package bundle

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sample() *Bundle {
	b := &Bundle{FacVersion: "0.1.0"}
	params := []Param{{"q", "bf16*"}, {"k", "bf16*"}, {"v", "bf16*"}, {"o", "bf16*"}, {"seqlen", "i32"}, {"scale", "f32"}}
	b.Add(Kernel{
		Name: "flash_fwd_causal_d128", Kernel: "flash_fwd", Mask: "causal", Score: "none", Arch: "sm_90a",
		Params: params, Consts: map[string]string{"D": "128", "BM": "128"},
		Block: [3]uint32{384, 1, 1}, SharedBytes: 196608,
		PTX: ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry flash_fwd_causal_d128() { ret; }\n",
	})
	b.Add(Kernel{
		Name: "flash_fwd_causal_d128", Kernel: "flash_fwd", Mask: "causal", Score: "none", Arch: "sm_80",
		Params: params, Consts: map[string]string{"D": "128", "BM": "128"},
		Block: [3]uint32{128, 1, 1}, SharedBytes: 98304,
		PTX: ".version 7.8\n.target sm_80\n",
	})
	b.Add(Kernel{
		Name: "flash_fwd_none_d64", Kernel: "flash_fwd", Mask: "none", Score: "none", Arch: "sm_90a",
		Params: params, Block: [3]uint32{256, 1, 1},
		PTX: ".version 8.0\n.target sm_90a\n// <x> & \"quoted\"\n",
	})
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
	if !reflect.DeepEqual(got, b) {
		t.Errorf("round trip changed the bundle:\n got %+v\nwant %+v", got, b)
	}
	data, _ := os.ReadFile(path)
	for _, want := range []string{`"format": "fac-bundle/1"`, `"shared_bytes": 196608`, `<x> &`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("file lacks %q", want)
		}
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}

	k, err := got.Find("flash_fwd", "causal", "none", map[string]string{"BM": "128", "D": "128"})
	if err != nil || k.Arch != "sm_90a" {
		t.Errorf("Find = %+v, %v", k, err)
	}
	if ks := got.FindAll("flash_fwd", "causal", "none", map[string]string{"BM": "128", "D": "128"}); len(ks) != 2 || ks[1].Arch != "sm_80" {
		t.Errorf("FindAll = %d kernels", len(ks))
	}
	if k, err := got.Find("flash_fwd", "none", "none", map[string]string{}); err != nil || k.Name != "flash_fwd_none_d64" {
		t.Errorf("Find with empty consts = %v, %v", k, err)
	}
	if _, err := got.Find("flash_fwd", "causal", "none", map[string]string{"D": "64"}); err == nil {
		t.Error("Find matched different consts")
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
		"other version": {`{"format":"fac-bundle/2","kernels":[]}`, `unsupported format "fac-bundle/2" (want "fac-bundle/1")`},
		"no format":     {`{"kernels":[]}`, `no "format" field`},
		"not json":      {"\x7fELF", "not a fac bundle"},
		"bad field":     {`{"format":"fac-bundle/1","kernels":[{"block":"x"}]}`, "bundle: json"},
		"empty kernel":  {`{"format":"fac-bundle/1","kernels":[{"name":"k"}]}`, "missing name or PTX"},
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
	if _, err := Marshal(b); err == nil || !strings.Contains(err.Error(), "same variant") {
		t.Errorf("duplicate: err = %v", err)
	}
	if err := Write(filepath.Join(t.TempDir(), "x"), b); err == nil {
		t.Error("Write accepted an invalid bundle")
	}
}

func TestMarshalFillsChecksums(t *testing.T) {
	b := &Bundle{Kernels: []Kernel{{Name: "k", Kernel: "k", Arch: "sm_90a", PTX: "ptx"}}}
	data, err := Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if b.Format != "" || b.Kernels[0].SHA256 != "" {
		t.Error("Marshal modified its argument")
	}
	got, err := Parse(data)
	if err != nil || got.Kernels[0].SHA256 != Checksum("ptx") {
		t.Errorf("Parse = %v, %v", got, err)
	}
}
