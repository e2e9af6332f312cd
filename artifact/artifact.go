// Package artifact is what the compiler hands to everything downstream: a
// kernel compiled for one GPU target (PTX plus what a launch needs) and its
// identity. The kernel cache (artifact/cache), AOT bundles
// (artifact/bundle) and the GPU runtime all store and load this one type,
// and all name a kernel by the same Ident.
package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Ident is the canonical identity of a compiled kernel instance: the kernel,
// its mods written canonically with their arguments ("sliding_window(255,
// 0)"), every compile-time argument with its resolved value (defaults
// included, so "BLOCK_M given as 64" and "BLOCK_M left at 64" are one
// kernel), the element type, the GPU target, a digest of every source the
// instance was compiled from, and the compiler that made it.
type Ident struct {
	Kernel  string            `json:"kernel"`
	Mods    map[string]string `json:"mods,omitempty"`    // mod parameter → canonical mod, e.g. mask → "causal"
	Consts  map[string]string `json:"consts,omitempty"`  // other compile-time arguments, canonical text
	DType   string            `json:"dtype,omitempty"`   // the kernel's DTYPE argument, when it has one
	Arch    string            `json:"arch"`              // sm_80, sm_90a, ...
	Sources string            `json:"sources"`           // SHA-256 of the instance's lowered tile IR (what its sources mean)
	Fac     string            `json:"fac"`               // fac build (version, VCS revision)
	LLC     string            `json:"llc"`               // llc version that made the PTX
	Passes  string            `json:"passes,omitempty"`  // non-default pass options, e.g. "disable=cse"
	Variant string            `json:"variant,omitempty"` // code choices made outside the inputs (codegen.TargetConfig.Variant), e.g. "wgmma", "wgmma-cpasync"
}

// String is the identity in one line, for listings and errors.
func (id Ident) String() string {
	parts := []string{id.Kernel}
	for _, k := range slices.Sorted(maps.Keys(id.Mods)) {
		parts = append(parts, k+"="+id.Mods[k])
	}
	for _, k := range slices.Sorted(maps.Keys(id.Consts)) {
		parts = append(parts, k+"="+id.Consts[k])
	}
	if id.DType != "" {
		parts = append(parts, "dtype="+id.DType)
	}
	if id.Passes != "" {
		parts = append(parts, "passes="+id.Passes)
	}
	if id.Variant != "" {
		parts = append(parts, "variant="+id.Variant)
	}
	return strings.Join(append(parts, id.Arch), " ")
}

// Key is the cache key: a digest of every field.
func (id Ident) Key() string { return digest(id.canonical(true)) }

// PortableKey leaves out the compiler build and the llc version. AOT bundles
// are matched by it: a bundle exists to be loaded by a later build with no
// llc at all; the sources digest (stdlib included) and the parameter check at
// launch keep a stale bundle from being used for a kernel that changed.
func (id Ident) PortableKey() string { return digest(id.canonical(false)) }

func (id Ident) canonical(build bool) string {
	c := id
	if !build {
		c.Fac, c.LLC = "", ""
	}
	// encoding/json writes map keys sorted, so this text is canonical.
	b, _ := json.Marshal(c)
	return string(b)
}

// SourcesDigest is the Sources field for a set of named source texts.
func SourcesDigest(files map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(files[k]), files[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Param is one kernel parameter in launch order, as the driver passes it.
type Param struct {
	Name string `json:"name"`          // tile-IR name: "q", "mask.doc", "mask.doc.len"; codegen's for a tensor map
	Kind string `json:"kind"`          // u64 (device pointer), i32, i64, f32 or tmap
	Elem string `json:"elem"`          // element type: of the pointee for pointers and tensor maps (bf16, i32, ...), else of the value
	TMA  *TMA   `json:"tma,omitempty"` // KindTensorMap only
}

// Parameter kinds.
const (
	KindPtr       = "u64"
	KindI32       = "i32"
	KindI64       = "i64"
	KindF32       = "f32"
	KindTensorMap = "tmap" // a CUtensorMap by value (128 bytes, grid constant), built at launch from TMA
)

// TMA describes the tiled tensor map of a tensor parameter. It names
// parameters rather than holding sizes so that one artifact serves every
// shape: the runtime resolves it per call.
type TMA struct {
	Tensor  string   `json:"tensor"`  // the pointer parameter whose memory it maps (a contract tensor: "k", "v", "q", "do")
	Dims    []TMADim `json:"dims"`    // innermost first, 1..5
	Box     []int    `json:"box"`     // box size per dim (elements), each 1..256; Box[0]*elem bytes == Swizzle
	Swizzle int      `json:"swizzle"` // swizzle span in bytes: 128, or 64 or 32 (a tile narrowed for a dot's n_extent)
}

// TMADim is one dimension: dim 0 is contiguous with a constant Extent; every
// other dim has the stride (in elements) of the i32 parameter named Stride,
// and an extent that is the value of the i32 parameter named Bound when set
// (coordinates past it read zeros), else the contract tensor's dimension
// whose stride parameter is Stride.
type TMADim struct {
	Stride string `json:"stride,omitempty"`
	Bound  string `json:"bound,omitempty"`
	Extent int    `json:"extent,omitempty"`
}

// check validates a tensor map of element type elem against the kernel's
// parameters, by name.
func (t *TMA) check(elem string, params map[string]Param) error {
	var size int
	switch elem {
	case "bf16", "f16":
		size = 2
	case "f32":
		size = 4
	default:
		return fmt.Errorf("element type %q (want bf16, f16 or f32)", elem)
	}
	switch {
	case params[t.Tensor].Kind != KindPtr || params[t.Tensor].Elem != elem:
		return fmt.Errorf("maps %q, which is not a pointer parameter to %s", t.Tensor, elem)
	case len(t.Dims) < 1 || len(t.Dims) > 5:
		return fmt.Errorf("%d dims (want 1..5)", len(t.Dims))
	case len(t.Box) != len(t.Dims):
		return fmt.Errorf("%d box sizes for %d dims", len(t.Box), len(t.Dims))
	case t.Swizzle != 32 && t.Swizzle != 64 && t.Swizzle != 128:
		return fmt.Errorf("swizzle %d (want 32, 64 or 128 bytes)", t.Swizzle)
	case t.Box[0]*size != t.Swizzle:
		return fmt.Errorf("inner box of %d %s elements is not the %d-byte swizzle span", t.Box[0], elem, t.Swizzle)
	}
	for i, b := range t.Box {
		if b < 1 || b > 256 {
			return fmt.Errorf("box size %d of dim %d (want 1..256)", b, i)
		}
	}
	for i, d := range t.Dims {
		if i == 0 {
			// Contiguous: a constant extent, or the value of a bound
			// parameter (the columns of a tensor reduction's tile).
			if d.Stride != "" || (d.Extent < 1) == (d.Bound == "") || d.Extent < 0 {
				return fmt.Errorf("dim 0 must be contiguous with a positive extent or a bound parameter, got %+v", d)
			}
			if d.Bound != "" && params[d.Bound].Kind != KindI32 {
				return fmt.Errorf("dim 0 names %q, which is not an i32 parameter", d.Bound)
			}
			continue
		}
		if d.Stride == "" || d.Extent != 0 {
			return fmt.Errorf("dim %d needs a stride parameter and no constant extent, got %+v", i, d)
		}
		for _, n := range []string{d.Stride, d.Bound} {
			if n != "" && params[n].Kind != KindI32 {
				return fmt.Errorf("dim %d names %q, which is not an i32 parameter", i, n)
			}
		}
	}
	return nil
}

// Artifact is a kernel compiled for a GPU target.
//
// Two checksums bind it when it is stored (Encode, bundles): SHA256, of
// the PTX, and Digest, of everything else a launch uses and the identity
// (see ComputeDigest). Decode and Verify refuse an artifact that lacks
// either or whose fields no longer match them, so an edited identity,
// entry, geometry, parameter list or attribute is refused as an edited PTX
// is.
type Artifact struct {
	Ident       Ident            `json:"ident"`
	Entry       string           `json:"entry"` // the PTX .entry name
	PTX         string           `json:"ptx"`
	Threads     int              `json:"threads"`      // threads per CTA; blockDim = (Threads, 1, 1)
	SharedBytes int              `json:"shared_bytes"` // dynamic shared memory per CTA
	Params      []Param          `json:"params"`
	Attrs       map[string]int64 `json:"attrs,omitempty"` // the kernel's integer attributes (BLOCK_M, ...)
	SHA256      string           `json:"sha256"`          // of PTX, checked on decode
	Digest      string           `json:"digest"`          // ComputeDigest: identity and launch metadata, checked on decode
	LL          string           `json:"-"`               // LLVM IR, kept only in memory for -v/--emit
}

// Checksum is the hex SHA-256 of ptx, as stored in Artifact.SHA256.
func Checksum(ptx string) string { return digest(ptx) }

// digestDomain separates the artifact digest from every other SHA-256 fac
// takes; bump it if the canonical form below changes meaning.
const digestDomain = "fac-artifact-digest/1\n"

// ComputeDigest is the hex SHA-256 of the artifact's canonical encoding:
// every field but Digest and LL (identity, entry, threads, shared bytes,
// parameters in order with their kinds, element types and tensor maps,
// attributes), with the PTX bound by its own SHA-256. It is encoding/json's
// text of the struct (fixed field order, sorted map keys), so a field added
// to Artifact, Ident, Param or TMA is covered without changing this
// function.
func (a *Artifact) ComputeDigest() string {
	c := *a
	c.PTX, c.Digest, c.LL = "", "", ""
	c.SHA256 = Checksum(a.PTX)
	b, err := json.Marshal(&c)
	if err != nil { // cannot happen for these types; never match
		return "unencodable: " + err.Error()
	}
	return digest(digestDomain + string(b))
}

// Seal fills in SHA256 and Digest from the artifact's fields.
func (a *Artifact) Seal() {
	a.SHA256 = Checksum(a.PTX)
	a.Digest = a.ComputeDigest()
}

// Verify checks that the artifact carries both checksums and that its
// fields match them: what Decode and bundles require of a stored
// artifact. An empty checksum is an error, not a skipped check.
func (a *Artifact) Verify() error { return a.checkSums(true) }

// checkSums compares the checksums with the fields; required says whether
// an empty checksum is an error (Verify) or not yet filled in (Validate).
func (a *Artifact) checkSums(required bool) error {
	switch {
	case a.SHA256 == "" && required:
		return fmt.Errorf("artifact %s: no PTX checksum (sha256)", a.Entry)
	case a.SHA256 != "" && a.SHA256 != Checksum(a.PTX):
		return fmt.Errorf("artifact %s for %s: PTX checksum mismatch (damaged or edited)", a.Entry, a.Ident.Arch)
	case a.Digest == "" && required:
		return fmt.Errorf("artifact %s: no digest of its identity and launch metadata", a.Entry)
	case a.Digest != "" && a.Digest != a.ComputeDigest():
		return fmt.Errorf("artifact %s for %s: digest mismatch: its identity or launch metadata (entry, threads, shared_bytes, params, attrs) was damaged or edited", a.Entry, a.Ident.Arch)
	}
	return nil
}

// Encode serializes the artifact, filling in its checksums (Seal).
func (a *Artifact) Encode() ([]byte, error) {
	a.Seal()
	return json.Marshal(a)
}

// Decode reads what Encode wrote, validates it and verifies both
// checksums.
func Decode(b []byte) (*Artifact, error) {
	var a Artifact
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("artifact: %w", err)
	}
	if err := a.Validate(); err != nil {
		return &a, err
	}
	return &a, a.Verify()
}

// Validate rejects an artifact that cannot be launched: no entry, no
// threads, parameters of unknown kinds, malformed tensor maps, and a
// checksum that is present but does not match (an in-memory artifact may
// have none yet; Verify requires them).
func (a *Artifact) Validate() error {
	switch {
	case a.Entry == "":
		return errors.New("artifact: no entry name")
	case a.PTX == "" || !strings.Contains(a.PTX, ".entry "+a.Entry):
		return fmt.Errorf("artifact %s: PTX has no .entry %s", a.Entry, a.Entry)
	case a.Threads <= 0 || a.Threads > 1024:
		return fmt.Errorf("artifact %s: %d threads per CTA", a.Entry, a.Threads)
	case a.SharedBytes < 0:
		return fmt.Errorf("artifact %s: negative shared memory", a.Entry)
	case a.Ident.Kernel == "" || a.Ident.Arch == "":
		return fmt.Errorf("artifact %s: identity lacks kernel or arch", a.Entry)
	}
	if err := a.checkSums(false); err != nil {
		return err
	}
	byName := map[string]Param{}
	for _, p := range a.Params {
		byName[p.Name] = p
	}
	for _, p := range a.Params {
		switch p.Kind {
		case KindPtr, KindI32, KindI64, KindF32:
			if p.TMA != nil {
				return fmt.Errorf("artifact %s: %s parameter %s has a tensor map", a.Entry, p.Kind, p.Name)
			}
		case KindTensorMap:
			if p.TMA == nil {
				return fmt.Errorf("artifact %s: tensor-map parameter %s has no TMA description", a.Entry, p.Name)
			}
			if err := p.TMA.check(p.Elem, byName); err != nil {
				return fmt.Errorf("artifact %s: tensor-map parameter %s: %w", a.Entry, p.Name, err)
			}
		default:
			return fmt.Errorf("artifact %s: parameter %s has unknown kind %q", a.Entry, p.Name, p.Kind)
		}
	}
	return nil
}
