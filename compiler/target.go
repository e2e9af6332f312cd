package compiler

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/codegen/llc"
)

// Timings are the per-stage compile times, for `fac compile -v`.
type Timings struct {
	Stages []Stage
	Cache  cache.Status
	// Notes are the code generator's remarks (codegen.Result.Notes) when
	// it ran (not on a cache hit).
	Notes []string
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

// GPUOptions steer the GPU phases of a build (codegen's phase table for the
// arch): print the layout-annotated IR after a phase ("all": after each),
// or skip optional phases.
type GPUOptions struct {
	PrintAfter string
	Out        io.Writer
	Disable    map[string]bool
}

// Identity is res's identity on a GPU target made with tool: arch, and
// the variant of the request's switches on it (codegen.TargetConfig.Variant).
func Identity(res *Result, arch string, tool *llc.Tool) artifact.Ident {
	id := res.Ident
	id.Arch = arch
	id.Variant = res.TargetFor(arch).Variant()
	if tool != nil {
		id.LLC = tool.Version
	}
	return id
}

// BuildArtifact runs the GPU stages on a compiled instance for arch, with
// the request's switches (Result.TargetFor): codegen's phases to LLVM IR,
// then llc to PTX.
func BuildArtifact(ctx context.Context, res *Result, arch string, tool *llc.Tool, t *Timings) (*artifact.Artifact, error) {
	if t == nil {
		t = &Timings{}
	}
	start := time.Now()
	cg, err := codegen.Lower(res.Module, res.Kernel, codegen.Options{Target: res.TargetFor(arch), PrintAfter: res.GPU.PrintAfter, Out: res.GPU.Out, Disable: res.GPU.Disable})
	if err != nil {
		return nil, fmt.Errorf("codegen of kernel %s for %s: %w", res.Kernel, arch, err)
	}
	// GPU phases one by one; what is left of codegen's time is printing
	// the LLVM module to text.
	rest := time.Since(start)
	for _, p := range cg.Phases {
		t.Stages = append(t.Stages, Stage{p.Name, p.Took})
		rest -= p.Took
	}
	t.Stages = append(t.Stages, Stage{"llvm text", rest})
	t.Notes = cg.Notes
	start = time.Now()
	ptx, err := tool.CompileEntry(ctx, []byte(cg.LL), arch, cg.Name)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: %w", res.Kernel, err)
	}
	t.add("llc", start)
	params, err := artifactParams(res.Params(), cg.Params)
	if err != nil {
		return nil, fmt.Errorf("internal compiler error: kernel %s for %s: %w", res.Kernel, arch, err)
	}
	a := &artifact.Artifact{Ident: Identity(res, arch, tool), Entry: cg.Name, PTX: string(ptx), Threads: cg.Threads,
		SharedBytes: cg.SharedBytes, Params: params, Attrs: res.Attrs(), LL: cg.LL}
	a.SHA256 = artifact.Checksum(a.PTX)
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("internal compiler error: kernel %s for %s: %w", res.Kernel, arch, err)
	}
	return a, nil
}

// artifactParams are the tile-IR function's parameters followed by those
// codegen added after them: tensor maps, which the runtime builds at launch.
func artifactParams(tile []artifact.Param, cg []codegen.Param) ([]artifact.Param, error) {
	out := tile
	for _, p := range cg[min(len(tile), len(cg)):] {
		if p.Kind != codegen.ParamTensorMap || p.TMA == nil {
			return nil, fmt.Errorf("codegen added parameter %s of kind %s, only tensor maps are expected", p.Name, p.Kind)
		}
		out = append(out, artifact.Param{Name: p.Name, Kind: artifact.KindTensorMap, Elem: p.Type.Elem.String(), TMA: p.TMA})
	}
	return out, nil
}

// Build is the whole driver for one request on one GPU target.
func Build(ctx context.Context, req Request, arch string, tool *llc.Tool, t *Timings) (*artifact.Artifact, error) {
	if t == nil {
		t = &Timings{}
	}
	res, err := CompileTimed(req, t)
	if err != nil {
		return nil, err
	}
	return BuildArtifact(ctx, res, arch, tool, t)
}

// Cached is BuildArtifact through the kernel cache c (nil: no cache),
// keyed by the instance's identity: a hit skips the GPU stages.
func Cached(ctx context.Context, c *cache.Cache, res *Result, arch string, tool *llc.Tool, t *Timings) (*artifact.Artifact, error) {
	if t == nil {
		t = &Timings{}
	}
	if c == nil {
		return BuildArtifact(ctx, res, arch, tool, t)
	}
	start := time.Now()
	a, status, err := c.Artifact(Identity(res, arch, tool), func() (*artifact.Artifact, error) {
		return BuildArtifact(ctx, res, arch, tool, t)
	})
	t.Cache = status
	if err != nil {
		return nil, err
	}
	if status == cache.Hit {
		t.add("cache hit", start)
	}
	return a, nil
}
