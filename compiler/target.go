package compiler

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/internal/version"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// Artifact is a kernel compiled for a GPU: PTX and what the runtime needs to
// launch it. It is what the kernel cache and AOT bundles store.
type Artifact struct {
	Kernel      string          `json:"kernel"` // PTX entry name
	Arch        string          `json:"arch"`
	PTX         string          `json:"ptx"`
	Threads     int             `json:"threads"`
	SharedBytes int             `json:"shared_bytes"`
	Params      []codegen.Param `json:"params"`
	Attrs       map[string]any  `json:"attrs"` // the kernel's attributes (BLOCK_M, ...)
	LL          string          `json:"-"`
}

// Timings are the per-stage compile times, for `fac compile -v`.
type Timings struct {
	Stages []Stage
	Cache  cache.Status
}

// Stage is one timed compile stage.
type Stage struct {
	Name string
	Took time.Duration
}

func (t *Timings) add(name string, start time.Time) time.Time {
	now := time.Now()
	t.Stages = append(t.Stages, Stage{name, now.Sub(start)})
	return now
}

// Total is the sum of the stages.
func (t *Timings) Total() time.Duration {
	var d time.Duration
	for _, s := range t.Stages {
		d += s.Took
	}
	return d
}

func (t *Timings) String() string {
	var parts []string
	for _, s := range t.Stages {
		parts = append(parts, fmt.Sprintf("%s %.2fms", s.Name, float64(s.Took.Microseconds())/1000))
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; total %.2fms", float64(t.Total().Microseconds())/1000)
}

// Key is the cache key of a request on a target: every input of the
// compile (all sources, the request's arguments and pass options, arch, fac
// and llc versions), so a hit needs no front-end work.
func Key(req Request, arch string, tool *llc.Tool) cache.Key {
	parts := []string{"fac " + version.Build(), "arch " + arch, "kernel " + req.Kernel, "mask " + req.Mask, "score " + req.Score}
	if tool != nil {
		parts = append(parts, "llc "+tool.Version)
	}
	for _, k := range sortedKeys(req.Consts) {
		parts = append(parts, "const "+k+"="+req.Consts[k])
	}
	for _, k := range sortedKeys(req.Passes.Disable) {
		if req.Passes.Disable[k] {
			parts = append(parts, "disable "+k)
		}
	}
	std := attention.Files()
	for _, k := range sortedKeys(std) {
		parts = append(parts, "std "+k, std[k])
	}
	for _, k := range sortedKeys(req.Sources) {
		parts = append(parts, "src "+k, req.Sources[k])
	}
	return cache.NewKey(parts...)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// BuildPTX runs the whole pipeline for req and compiles its kernel for
// arch with llc. Timings are filled in when t is not nil.
func BuildPTX(ctx context.Context, req Request, arch string, tool *llc.Tool, t *Timings) (*Artifact, error) {
	if t == nil {
		t = &Timings{}
	}
	start := time.Now()
	prog, err := Load(req.Sources)
	if err != nil {
		return nil, err
	}
	start = t.add("parse", start)
	m, res, err := Lower(prog, req)
	if err != nil {
		return nil, err
	}
	start = t.add("lower", start)
	if err := runPasses(m, req); err != nil {
		return nil, err
	}
	res.Module = m
	start = t.add("passes", start)
	kernel := req.Kernel
	if kernel == "" {
		kernel = "flash_fwd"
	}
	cg, err := codegen.Lower(m, kernel, codegen.Options{Arch: arch})
	if err != nil {
		return nil, fmt.Errorf("codegen of kernel %s for %s: %w", kernel, arch, err)
	}
	start = t.add("codegen", start)
	ptx, err := tool.Compile(ctx, []byte(cg.LL), arch)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: %w", kernel, err)
	}
	t.add("llc", start)
	attrs := map[string]any{}
	for _, a := range m.Func(kernel).Attrs {
		attrs[a.Key] = a.Val
	}
	return &Artifact{Kernel: cg.Name, Arch: arch, PTX: string(ptx), Threads: cg.Threads, SharedBytes: cg.SharedBytes,
		Params: cg.Params, Attrs: attrs, LL: cg.LL}, nil
}

// CachedPTX is BuildPTX through the kernel cache: a hit skips every stage.
func CachedPTX(ctx context.Context, c *cache.Cache, req Request, arch string, tool *llc.Tool, t *Timings) (*Artifact, error) {
	if t == nil {
		t = &Timings{}
	}
	start := time.Now()
	key := Key(req, arch, tool)
	meta := fmt.Sprintf("%s mask=%s score=%s %s", orDefault(req.Kernel, "flash_fwd"), orDefault(req.Mask, "default"), orDefault(req.Score, "default"), arch)
	var built *Artifact
	payload, status, err := c.GetOrBuild(key, meta, func() ([]byte, error) {
		a, err := BuildPTX(ctx, req, arch, tool, t)
		if err != nil {
			return nil, err
		}
		built = a
		return a.Encode()
	})
	t.Cache = status
	if err != nil && payload == nil {
		return nil, err
	}
	if built != nil {
		return built, nil
	}
	a, err := DecodeArtifact(payload)
	if err != nil {
		return nil, fmt.Errorf("cache entry %s: %w", key.Short(), err)
	}
	t.add("cache hit", start)
	return a, nil
}

// Encode serializes an artifact for the cache.
func (a *Artifact) Encode() ([]byte, error) { return json.Marshal(a) }

// DecodeArtifact reads what Encode wrote.
func DecodeArtifact(b []byte) (*Artifact, error) {
	var a Artifact
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
