// Package bundle reads and writes AOT kernel bundles: one JSON file holding
// several compiled kernels (PTX text plus the metadata needed to launch
// them), so a program can load kernels with no llc installed.
//
// The format is identified by "format": "fac-bundle/1". Each kernel
// carries the SHA-256 of its PTX, checked on read, so a damaged or
// hand-edited bundle is rejected instead of failing inside the driver.
package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
)

// Format is the format string of the bundles this package reads and writes.
const Format = "fac-bundle/1"

// Bundle is the file's top-level manifest.
type Bundle struct {
	Format     string   `json:"format"`
	FacVersion string   `json:"fac_version"`
	Kernels    []Kernel `json:"kernels"`
}

// Param is one kernel parameter, in launch order.
type Param struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Kernel is one compiled kernel variant.
type Kernel struct {
	Name        string            `json:"name"`   // PTX entry name
	Kernel      string            `json:"kernel"` // source kernel it was compiled from
	Mask        string            `json:"mask"`
	Score       string            `json:"score"`
	Arch        string            `json:"arch"` // e.g. sm_90a
	Params      []Param           `json:"params"`
	Consts      map[string]string `json:"consts,omitempty"` // compile-time constants (head dim, tile sizes, ...)
	Block       [3]uint32         `json:"block"`
	SharedBytes uint32            `json:"shared_bytes"` // dynamic shared memory per block
	PTX         string            `json:"ptx"`
	SHA256      string            `json:"sha256"` // hex SHA-256 of PTX
}

// Checksum returns the hex SHA-256 of ptx, as stored in Kernel.SHA256.
func Checksum(ptx string) string {
	sum := sha256.Sum256([]byte(ptx))
	return hex.EncodeToString(sum[:])
}

// Add appends k to the bundle, filling in its checksum.
func (b *Bundle) Add(k Kernel) {
	k.SHA256 = Checksum(k.PTX)
	b.Kernels = append(b.Kernels, k)
}

func (k *Kernel) matches(kernel, mask, score string, consts map[string]string) bool {
	return k.Kernel == kernel && k.Mask == mask && k.Score == score && maps.Equal(k.Consts, consts)
}

// FindAll returns the kernels compiled from kernel with the given mask,
// score and constants (nil and empty consts are equal), in file order;
// there is one per arch.
func (b *Bundle) FindAll(kernel, mask, score string, consts map[string]string) []*Kernel {
	var out []*Kernel
	for i := range b.Kernels {
		if k := &b.Kernels[i]; k.matches(kernel, mask, score, consts) {
			out = append(out, k)
		}
	}
	return out
}

// Find returns the first kernel matching kernel, mask, score and consts.
// Use FindAll to choose among several arches.
func (b *Bundle) Find(kernel, mask, score string, consts map[string]string) (*Kernel, error) {
	if ks := b.FindAll(kernel, mask, score, consts); len(ks) > 0 {
		return ks[0], nil
	}
	return nil, fmt.Errorf("bundle: no kernel %q with mask %q, score %q, consts %v", kernel, mask, score, consts)
}

// Validate checks the format string, that each kernel has a name and PTX
// matching its checksum, and that no two kernels share the same variant
// (kernel, mask, score, consts, arch).
func (b *Bundle) Validate() error {
	if b.Format != Format {
		return fmt.Errorf("bundle: unsupported format %q (want %q)", b.Format, Format)
	}
	for i := range b.Kernels {
		k := &b.Kernels[i]
		if k.Name == "" || k.PTX == "" {
			return fmt.Errorf("bundle: kernel %d (%q): missing name or PTX", i, k.Name)
		}
		if k.SHA256 != Checksum(k.PTX) {
			return fmt.Errorf("bundle: kernel %d (%s, %s): PTX checksum mismatch (bundle corrupt or edited)", i, k.Name, k.Arch)
		}
		for j := range i {
			if p := &b.Kernels[j]; p.Arch == k.Arch && p.matches(k.Kernel, k.Mask, k.Score, k.Consts) {
				return fmt.Errorf("bundle: kernels %d and %d (%s) are the same variant for %s", j, i, k.Name, k.Arch)
			}
		}
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
	out.Kernels = make([]Kernel, len(b.Kernels))
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

// Write writes b to path atomically: to a temporary file in the same
// directory, then renamed over path.
func Write(path string, b *Bundle) error {
	data, err := Marshal(b)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync() // a bundle is a build artifact: make it durable
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}
