// Package bundle reads and writes AOT kernel bundles: one JSON file holding
// several compiled kernels (artifacts: PTX text plus what a launch needs),
// so a program can load kernels with no llc installed.
//
// The format is identified by "format": "fac-bundle/3". Each kernel
// carries the SHA-256 of its PTX ("sha256") and a digest of its identity
// and everything its launch uses ("digest": entry, threads, shared_bytes,
// params in order with their kinds, element types and tensor maps, attrs;
// artifact.Artifact.ComputeDigest), and the bundle a digest of its format,
// fac_version and its kernels' digests in order. Read checks them all, and
// refuses a missing one, so a damaged or hand-edited bundle is rejected
// instead of serving another kernel or launching with other geometry.
// Bundles of format fac-bundle/2 bound only the PTX: they are refused with
// a message saying to rebuild them.
//
// Kernels are found by their identity's portable key (artifact.Ident):
// the same identity the kernel cache uses, less the compiler build.
package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/internal/outfile"
)

// Format is the format string of the bundles this package reads and writes.
const Format = "fac-bundle/3"

// oldFormats are earlier formats of fac's own bundles, refused with a
// message saying to rebuild rather than as unknown files.
var oldFormats = map[string]string{
	"fac-bundle/1": "its kernels' metadata is not checksummed",
	"fac-bundle/2": "its kernels' identity and launch metadata are not checksummed, only their PTX",
}

// Bundle is the file's top-level manifest.
type Bundle struct {
	Format     string              `json:"format"`
	FacVersion string              `json:"fac_version"`
	Kernels    []artifact.Artifact `json:"kernels"`
	Digest     string              `json:"digest"` // ComputeDigest, filled in by Marshal
}

// Checksum returns the hex SHA-256 of ptx, as stored in each kernel.
func Checksum(ptx string) string { return artifact.Checksum(ptx) }

// ComputeDigest is the hex SHA-256 of the bundle's format, fac_version and
// its kernels' digests, in order: a kernel added, removed or reordered by
// hand changes it.
func (b *Bundle) ComputeDigest() string {
	h := sha256.New()
	fmt.Fprintf(h, "fac-bundle-digest/1\n%d:%s%d:%s%d\n", len(b.Format), b.Format, len(b.FacVersion), b.FacVersion, len(b.Kernels))
	for i := range b.Kernels {
		fmt.Fprintf(h, "%s\n", b.Kernels[i].Digest)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Add appends a to the bundle, filling in its checksums.
func (b *Bundle) Add(a artifact.Artifact) {
	a.Seal()
	b.Kernels = append(b.Kernels, a)
}

// Find returns the kernel whose identity matches id, ignoring the compiler
// build and llc version (see artifact.Ident.PortableKey), or nil.
func (b *Bundle) Find(id artifact.Ident) *artifact.Artifact {
	key := id.PortableKey()
	for i := range b.Kernels {
		if b.Kernels[i].Ident.PortableKey() == key {
			return &b.Kernels[i]
		}
	}
	return nil
}

// Has reports whether the bundle holds a kernel of identity id.
func (b *Bundle) Has(id artifact.Ident) bool { return b.Find(id) != nil }

// Validate checks the format string, every kernel (entry, parameters, and
// its PTX checksum and digest, both required), the bundle's digest when it
// has one, and that no two kernels share one identity.
func (b *Bundle) Validate() error {
	return b.validate(false)
}

// validate is Validate; sealed requires the bundle's digest, as a bundle
// read from a file must have.
func (b *Bundle) validate(sealed bool) error {
	if b.Format != Format {
		return formatError(b.Format)
	}
	seen := map[string]int{}
	for i := range b.Kernels {
		k := &b.Kernels[i]
		if err := k.Validate(); err != nil {
			return fmt.Errorf("bundle: kernel %d: %w", i, err)
		}
		if err := k.Verify(); err != nil {
			return fmt.Errorf("bundle: kernel %d: %w", i, err)
		}
		key := k.Ident.PortableKey()
		if j, ok := seen[key]; ok {
			return fmt.Errorf("bundle: kernels %d and %d are the same kernel (%s)", j, i, k.Ident)
		}
		seen[key] = i
	}
	switch {
	case b.Digest == "" && sealed:
		return errors.New("bundle: no digest of its kernels")
	case b.Digest != "" && b.Digest != b.ComputeDigest():
		return errors.New("bundle: digest mismatch: kernels were added, removed or reordered, or fac_version edited")
	}
	return nil
}

// formatError explains a format string this package does not read.
func formatError(format string) error {
	if why, ok := oldFormats[format]; ok {
		return fmt.Errorf("bundle: format %q is from an older fac (%s); rebuild it with this fac's `fac build` (format %q)", format, why, Format)
	}
	return fmt.Errorf("bundle: unsupported format %q (want %q)", format, Format)
}

// Parse decodes and validates a bundle.
func Parse(data []byte) (*Bundle, error) {
	// Check the format first so a non-bundle gets a clear message.
	var head struct {
		Format *string `json:"format"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("bundle: not a fac bundle: %w", err)
	}
	if head.Format == nil {
		return nil, errors.New("bundle: not a fac bundle: no \"format\" field")
	}
	if *head.Format != Format {
		return nil, formatError(*head.Format)
	}
	var b Bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if err := b.validate(true); err != nil {
		return nil, err
	}
	return &b, nil
}

// Read reads and validates the bundle at path.
func Read(path string) (*Bundle, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	b, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// Marshal returns the JSON encoding of b after setting Format, every
// kernel's checksums and the bundle's digest (b itself is not modified) and
// validating it.
func Marshal(b *Bundle) ([]byte, error) {
	out := *b
	out.Format = Format
	out.Kernels = make([]artifact.Artifact, len(b.Kernels))
	for i, k := range b.Kernels {
		k.Seal()
		out.Kernels[i] = k
	}
	out.Digest = out.ComputeDigest()
	if err := out.validate(true); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // PTX has no HTML; keep '<' and '>' readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(&out); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	return buf.Bytes(), nil
}

// Write writes b to path, a file the caller names: an existing file is
// written in place (through symlinks, keeping its mode and hard links) and
// synced, a new one gets 0666 less the umask; see internal/outfile. The
// bundle is encoded and validated before the file is touched.
func Write(path string, b *Bundle) error {
	data, err := Marshal(b)
	if err != nil {
		return err
	}
	if err := outfile.WriteFile(path, data); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}
