package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/cache"
)

// tmaSample is a bundle of two kernels whose metadata covers every field a
// launch uses: a tensor map, attributes, shared memory.
func tmaSample() *Bundle {
	b := &Bundle{FacVersion: "0.1.0"}
	for _, mask := range []string{"causal", "none"} {
		a := art("flash_fwd", mask, "sm_90a", "flash_fwd", map[string]string{"D": "128"}, 384)
		a.PTX += "// mask " + mask + "\n"
		a.Params = append(a.Params, artifact.Param{Name: "k", Kind: artifact.KindPtr, Elem: "bf16"},
			artifact.Param{Name: "stride", Kind: artifact.KindI32, Elem: "i32"},
			artifact.Param{Name: "k.tmap", Kind: artifact.KindTensorMap, Elem: "bf16", TMA: &artifact.TMA{Tensor: "k",
				Dims: []artifact.TMADim{{Extent: 64}, {Stride: "stride", Bound: "seqlen"}}, Box: []int{64, 128}, Swizzle: 128}})
		a.Attrs = map[string]int64{"BLOCK_M": 128, "BLOCK_N": 128}
		b.Add(a)
	}
	return b
}

// editKernels parses a marshalled bundle's JSON, applies edit to it and
// encodes it again, leaving every checksum as it was.
func editKernels(t *testing.T, data []byte, edit func(b map[string]any, ks []any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m, m["kernels"].([]any))
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func kernel(ks []any, i int) map[string]any { return ks[i].(map[string]any) }

// TestEditedMetadataRejected is issue 46 item 3: a bundle whose kernels'
// identity or launch metadata was edited by hand, or whose checksums were
// emptied, is refused by Parse. Before, only a PTX edit was caught: a
// kernel's ident swapped for another's made Find serve the causal kernel
// for a none request, and edited threads or params launched as edited.
func TestEditedMetadataRejected(t *testing.T) {
	data, err := Marshal(tmaSample())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(data); err != nil {
		t.Fatalf("the unedited bundle: %v", err)
	}
	for name, tc := range map[string]struct {
		edit func(b map[string]any, ks []any)
		want string
	}{
		"ident swapped": {func(_ map[string]any, ks []any) {
			kernel(ks, 0)["ident"], kernel(ks, 1)["ident"] = kernel(ks, 1)["ident"], kernel(ks, 0)["ident"]
		}, "digest mismatch"},
		"ident mask": {func(_ map[string]any, ks []any) {
			kernel(ks, 0)["ident"].(map[string]any)["mods"] = map[string]any{"mask": "document"}
		}, "digest mismatch"},
		"ident consts": {func(_ map[string]any, ks []any) {
			kernel(ks, 0)["ident"].(map[string]any)["consts"] = map[string]any{"D": "64"}
		}, "digest mismatch"},
		"ident sources": {func(_ map[string]any, ks []any) { kernel(ks, 0)["ident"].(map[string]any)["sources"] = "new" }, "digest mismatch"},
		"threads":       {func(_ map[string]any, ks []any) { kernel(ks, 0)["threads"] = 128 }, "digest mismatch"},
		"shared_bytes":  {func(_ map[string]any, ks []any) { kernel(ks, 0)["shared_bytes"] = 1024 }, "digest mismatch"},
		"params order": {func(_ map[string]any, ks []any) {
			p := kernel(ks, 0)["params"].([]any)
			p[1], p[2] = p[2], p[1]
		}, "digest mismatch"},
		"param kind": {func(_ map[string]any, ks []any) { kernel(ks, 0)["params"].([]any)[1].(map[string]any)["kind"] = "i64" }, "digest mismatch"},
		"param elem": {func(_ map[string]any, ks []any) { kernel(ks, 0)["params"].([]any)[0].(map[string]any)["elem"] = "f16" }, "digest mismatch"},
		"param name": {func(_ map[string]any, ks []any) {
			kernel(ks, 0)["params"].([]any)[2].(map[string]any)["name"] = "softmax_scale"
		}, "digest mismatch"},
		"param added": {func(_ map[string]any, ks []any) {
			p := kernel(ks, 0)["params"].([]any)
			kernel(ks, 0)["params"] = append(p, p[1])
		}, "digest mismatch"},
		"tma box": {func(_ map[string]any, ks []any) {
			kernel(ks, 0)["params"].([]any)[5].(map[string]any)["tma"].(map[string]any)["box"] = []any{64, 64}
		}, "digest mismatch"},
		"tma bound": {func(_ map[string]any, ks []any) {
			kernel(ks, 0)["params"].([]any)[5].(map[string]any)["tma"].(map[string]any)["dims"].([]any)[1].(map[string]any)["bound"] = "stride"
		}, "digest mismatch"},
		"attrs": {func(_ map[string]any, ks []any) {
			kernel(ks, 0)["attrs"] = map[string]any{"BLOCK_M": 64, "BLOCK_N": 128}
		}, "digest mismatch"},
		"attrs dropped": {func(_ map[string]any, ks []any) { delete(kernel(ks, 0), "attrs") }, "digest mismatch"},
		"ptx, sha256 emptied": {func(_ map[string]any, ks []any) {
			kernel(ks, 0)["ptx"] = kernel(ks, 1)["ptx"]
			kernel(ks, 0)["sha256"] = ""
		}, "digest mismatch"},
		"sha256 emptied": {func(_ map[string]any, ks []any) { kernel(ks, 0)["sha256"] = "" }, "no PTX checksum"},
		"ptx and sha256": {func(_ map[string]any, ks []any) {
			kernel(ks, 0)["ptx"], kernel(ks, 0)["sha256"] = kernel(ks, 1)["ptx"], kernel(ks, 1)["sha256"]
		}, "digest mismatch"},
		"digest emptied":  {func(_ map[string]any, ks []any) { kernel(ks, 0)["digest"] = ""; kernel(ks, 0)["threads"] = 128 }, "no digest"},
		"digest dropped":  {func(_ map[string]any, ks []any) { delete(kernel(ks, 0), "digest") }, "no digest"},
		"kernels swapped": {func(b map[string]any, ks []any) { ks[0], ks[1] = ks[1], ks[0] }, "bundle: digest mismatch"},
		"kernel removed":  {func(b map[string]any, ks []any) { b["kernels"] = ks[:1] }, "bundle: digest mismatch"},
		"fac_version":     {func(b map[string]any, ks []any) { b["fac_version"] = "9.9" }, "bundle: digest mismatch"},
		"bundle digest":   {func(b map[string]any, ks []any) { delete(b, "digest") }, "bundle: no digest"},
	} {
		_, err := Parse(editKernels(t, data, tc.edit))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}

// TestOldBundleSaysRebuild: a bundle in the format before issue 46 item 3
// is refused with a message saying to rebuild it.
func TestOldBundleSaysRebuild(t *testing.T) {
	data, err := Marshal(tmaSample())
	if err != nil {
		t.Fatal(err)
	}
	old := bytes.Replace(data, []byte(`"format": "fac-bundle/3"`), []byte(`"format": "fac-bundle/2"`), 1)
	path := filepath.Join(t.TempDir(), "old.bundle")
	os.WriteFile(path, old, 0o644)
	_, err = Read(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "rebuild it") || !strings.Contains(err.Error(), "fac-bundle/2") {
		t.Errorf("old format: %v", err)
	}
}

// resealEntry rewrites a cache entry file's checksum after an edit, as a
// buggy or hostile writer would, so that only the artifact's own checks
// stand between the edit and a launch. The layout is the cache's: magic
// (5 bytes) | SHA-256 of the rest | key | lengths | meta | payload.
func resealEntry(b []byte) []byte {
	const magicLen = 5
	if len(b) < magicLen+sha256.Size {
		return b
	}
	sum := sha256.Sum256(b[magicLen+sha256.Size:])
	copy(b[magicLen:], sum[:])
	return b
}

// fuzzEdit deletes up to cut%16 bytes of b at off and inserts ins there.
func fuzzEdit(b []byte, off uint32, ins []byte, cut uint8) []byte {
	if len(b) == 0 {
		return ins
	}
	i := int(off % uint32(len(b)))
	j := min(len(b), i+int(cut%16))
	return append(append(append([]byte{}, b[:i]...), ins...), b[j:]...)
}

// FuzzBundle (issue 46): random edits of a valid bundle, or of a valid
// kernel-cache entry (target 1: the entry file as it is; 2: the entry with
// its own checksum fixed up after the edit; 3: the artifact's JSON stored
// as a well-formed entry), are either rejected or load exactly the original
// kernels, never another kernel or other geometry.
func FuzzBundle(f *testing.F) {
	orig := tmaSample()
	data, err := Marshal(orig)
	if err != nil {
		f.Fatal(err)
	}
	want, err := Parse(data)
	if err != nil {
		f.Fatal(err)
	}
	text := string(data)
	at := func(s string) uint32 { return uint32(max(0, strings.Index(text, s))) }
	for _, tgt := range []uint8{0, 1, 2, 3} {
		f.Add(tgt, uint32(0), []byte{}, uint8(0))
		f.Add(tgt, at(`"threads": 384`)+11, []byte("128"), uint8(3))
		f.Add(tgt, at(`"shared_bytes": 196608`)+16, []byte("0"), uint8(6))
		f.Add(tgt, at(`"mask": "causal"`)+9, []byte("none"), uint8(6))
		f.Add(tgt, at(`"sha256": "`)+11, []byte{}, uint8(64))
		f.Add(tgt, at(`"BLOCK_M": 128`)+11, []byte("64"), uint8(3))
		f.Add(tgt, at(`"name": "seqlen"`)+9, []byte("scale"), uint8(6))
		f.Add(tgt, at(`"box": [`)+8, []byte("32"), uint8(2))
		f.Add(tgt, at(`"kind": "i32"`)+9, []byte("i64"), uint8(3))
	}
	// The cache's copy of the first kernel, as the artifact cache stores it.
	a0 := want.Kernels[0]
	payload, err := (&a0).Encode()
	if err != nil {
		f.Fatal(err)
	}
	key := cache.NewKey("artifact", a0.Ident.Key())

	f.Fuzz(func(t *testing.T, target uint8, off uint32, ins []byte, cut uint8) {
		switch target % 4 {
		case 0:
			b, err := Parse(fuzzEdit(data, off, ins, cut))
			if err != nil {
				return
			}
			if !reflect.DeepEqual(b.Kernels, want.Kernels) {
				t.Fatalf("an edited bundle loaded other kernels:\n got %+v\nwant %+v", b.Kernels, want.Kernels)
			}
			for i := range orig.Kernels {
				if k := b.Find(orig.Kernels[i].Ident); k == nil || !reflect.DeepEqual(*k, want.Kernels[i]) {
					t.Fatalf("Find(%s) = %+v", orig.Kernels[i].Ident, k)
				}
			}
		default:
			dir := t.TempDir()
			c, err := cache.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			c.Warn = new(bytes.Buffer)
			p := filepath.Join(dir, string(key)+".facc")
			switch target % 4 {
			case 1, 2:
				if err := c.Put(key, "m", payload); err != nil {
					t.Fatal(err)
				}
				entry, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				// Offsets past the header land in the payload, whose text is
				// what the seeds name.
				hdr := len(entry) - len(payload)
				e := fuzzEdit(entry, off+uint32(hdr), ins, cut)
				if target%4 == 2 {
					e = resealEntry(e)
				}
				if err := os.WriteFile(p, e, 0o644); err != nil {
					t.Fatal(err)
				}
			case 3:
				if err := c.Put(key, "m", fuzzEdit(payload, off, ins, cut)); err != nil {
					return
				}
			}
			got, _, err := c.Artifact(a0.Ident, func() (*artifact.Artifact, error) { b := want.Kernels[0]; return &b, nil })
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, want.Kernels[0]) {
				t.Fatalf("an edited cache entry loaded another kernel:\n got %+v\nwant %+v", *got, want.Kernels[0])
			}
		}
	})
}
