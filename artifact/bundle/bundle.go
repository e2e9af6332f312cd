// Package bundle reads and writes AOT kernel bundles: one JSON file holding
// several compiled kernels (artifacts: PTX text plus what a launch needs),
// so a program can load kernels with no llc installed.
//
// The format is identified by "format": "fac-bundle/2". Each kernel
// carries the SHA-256 of its PTX, checked on read, so a damaged or
// hand-edited bundle is rejected instead of failing inside the driver.
// Kernels are found by their identity's portable key (artifact.Ident):
// the same identity the kernel cache uses, less the compiler build.
package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/internal/outfile"
)

// Format is the format string of the bundles this package reads and writes.
const Format = "fac-bundle/2"

// Bundle is the file's top-level manifest.
type Bundle struct {
	Format     string              `json:"format"`
	FacVersion string              `json:"fac_version"`
	Kernels    []artifact.Artifact `json:"kernels"`
}

// Checksum returns the hex SHA-256 of ptx, as stored in each kernel.
func Checksum(ptx string) string { return artifact.Checksum(ptx) }

// Add appends a to the bundle, filling in its checksum.
func (b *Bundle) Add(a artifact.Artifact) {
	a.SHA256 = Checksum(a.PTX)
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

// Validate checks the format string, every kernel (entry, PTX against its
// checksum, parameters) and that no two kernels share one identity.
func (b *Bundle) Validate() error {
	if b.Format != Format {
		return fmt.Errorf("bundle: unsupported format %q (want %q)", b.Format, Format)
	}
	seen := map[string]int{}
	for i := range b.Kernels {
		k := &b.Kernels[i]
		if k.SHA256 == "" {
			return fmt.Errorf("bundle: kernel %d (%s): no checksum", i, k.Entry)
		}
		if err := k.Validate(); err != nil {
			return fmt.Errorf("bundle: kernel %d: %w", i, err)
		}
		key := k.Ident.PortableKey()
		if j, ok := seen[key]; ok {
			return fmt.Errorf("bundle: kernels %d and %d are the same kernel (%s)", j, i, k.Ident)
		}
		seen[key] = i
	}
	return nil
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
		return nil, fmt.Errorf("bundle: unsupported format %q (want %q)", *head.Format, Format)
	}
	var b Bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if err := b.Validate(); err != nil {
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

// Marshal returns the JSON encoding of b after setting Format and every
// kernel's checksum (b itself is not modified) and validating it.
func Marshal(b *Bundle) ([]byte, error) {
	out := *b
	out.Format = Format
	out.Kernels = make([]artifact.Artifact, len(b.Kernels))
	for i, k := range b.Kernels {
		k.SHA256 = Checksum(k.PTX)
		out.Kernels[i] = k
	}
	if err := out.Validate(); err != nil {
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
