package tests

import (
	"context"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/internal/version"
)

// TestWritePatternBundle writes the kernels of the mod patterns
// (TestGPUModPatterns: bf16, head dim 64, each tuned for its arch as
// RunCUDA compiles them), and those of the sinks and varlen GPU suites
// (addSuiteKernels), into the bundle FAC_WRITE_PATTERN_BUNDLE names,
// for the archs in FAC_PATTERN_ARCHS (default sm_90a,sm_80), so that the
// GPU machine, which has no llc, can run them (scripts/gpu prepare). A
// no-op without the variable.
func TestWritePatternBundle(t *testing.T) {
	out := os.Getenv("FAC_WRITE_PATTERN_BUNDLE")
	if out == "" {
		t.Skip("FAC_WRITE_PATTERN_BUNDLE not set")
	}
	tool, err := llc.Find()
	if err != nil {
		t.Fatal(err)
	}
	archs := "sm_90a,sm_80"
	if a := os.Getenv("FAC_PATTERN_ARCHS"); a != "" {
		archs = a
	}
	b := &bundle.Bundle{Format: bundle.Format, FacVersion: version.Version}
	var jobs []bundleJob
	for _, arch := range strings.Split(archs, ",") {
		for _, p := range modPatterns {
			fwd := compilePatternAs(t, p, "bf16", 64)
			opts := fwd.Options()
			opts.Target.Arch = arch
			tuned, err := fac.CompileForward(opts, 64)
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			jobs = append(jobs, bundleJob{p.name, tuned, arch})
		}
	}
	for _, arch := range strings.Split(archs, ",") {
		jobs = append(jobs, suiteJobs(t, arch)...)
	}
	bundleAll(t, b, tool, jobs)
	data, err := bundle.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: %d kernels", out, len(b.Kernels))
}

// bundler is a compiled forward or backward that can be bundled.
type bundler interface {
	BundleKernels(ctx context.Context, c *cache.Cache, arch string, tool *llc.Tool) ([]*artifact.Artifact, error)
}

// pagedBundler bundles a forward's paged kernels.
type pagedBundler struct{ *fac.Forward }

func (p pagedBundler) BundleKernels(ctx context.Context, c *cache.Cache, arch string, tool *llc.Tool) ([]*artifact.Artifact, error) {
	return p.BundlePagedKernels(ctx, c, arch, tool)
}

// varlenUnpacked is flash_fwd_varlen's schedule with loads that never
// leave the sequence (packed_loads=false: cp.async, masked by the
// sequence's end, so no producer), beside the tuned default's packed loads
// on TMA (TestGPUVarlenUnpacked, TestGPUVarlenLong).
var varlenUnpacked = map[string]string{"packed_loads": "false"}

// varlenNoProducer is the tuned schedule without its producer warpgroup:
// the consumers issue the TMA copies (TestGPUVarlenNoProducer,
// TestGPUVarlenLong).
var varlenNoProducer = map[string]string{"warp_specialize": "false"}

// varlenBenchConsts are the schedules scripts/gpu bench varlen times
// beside the default: loads kept in the sequence, no producer, and (D =
// 128) two K/V buffers instead of three.
func varlenBenchConsts(d int) []map[string]string {
	c := []map[string]string{varlenUnpacked, varlenNoProducer}
	if d == 128 {
		c = append(c, map[string]string{"num_stages": "2"})
	}
	return c
}

// pdlDecodeOpts are TestGPUDecodePDL's: split-KV decoding (three splits)
// compiled for programmatic dependent launch.
func pdlDecodeOpts() fac.Options {
	return fac.Options{Mask: "causal_bottom_right", DType: "bf16", NumSplits: 3, DecodeConsts: map[string]string{"pdl": "true"}}
}

// fusedDecodeOpts are TestGPUDecodeFusedCombine's: split-KV decoding
// (three splits) merged in place when fused, else by flash_fwd_combine.
func fusedDecodeOpts(fused bool) fac.Options {
	o := fac.Options{Mask: "causal_bottom_right", DType: "bf16", NumSplits: 3}
	if fused {
		o.DecodeConsts = map[string]string{"fused_combine": "true"}
	}
	return o
}

// suiteJobs lists, for arch, the bundling jobs of the configurations
// that TestGPUSinksBackward, TestGPUSinksBackwardLaunch,
// TestGPUVarlenMatchesReference, TestGPUVarlenUnpacked,
// TestGPUVarlenNoProducer, TestGPUVarlenLong, TestGPUVarlenBackward,
// TestGPUDimV, TestGPUSinksDecode, TestGPUDecodePDL, TestGPUDecodeFusedCombine and the paged suite compile (keep the lists in step with
// them), and
// `fac bench --varlen-len`'s, each as compiled without an arch and tuned for
// arch (RunCUDA tunes for the device).
func suiteJobs(t *testing.T, arch string) []bundleJob {
	var jobs []bundleJob
	add := func(what string, compile func(opts fac.Options) (bundler, error), opts fac.Options) {
		for _, a := range []string{"", arch} {
			opts.Target.Arch = a
			c, err := compile(opts)
			if err != nil {
				t.Fatalf("%s %+v: %v", what, opts, err)
			}
			jobs = append(jobs, bundleJob{what, c, arch})
		}
	}
	// The paged and ragged suites (TestGPUPagedMatchesReference,
	// TestGPUPagedLaunch, TestGPUPagedVarlen*; the paged kernels hold
	// flash_fwd_paged_varlen): bf16, split counts do not change the kernels.
	for _, d := range pagedSuiteDims {
		paged := func(o fac.Options) (bundler, error) {
			f, err := fac.CompileForward(o, d)
			return pagedBundler{f}, err
		}
		for _, m := range raggedSuiteMasks {
			add("paged", paged, pagedOpts(m, "bf16", 0))
		}
		if d == 128 {
			o := pagedOpts("causal_bottom_right", "bf16", 0)
			o.DecodeConsts = pagedTile16
			add("paged", paged, o)
		}
	}
	for _, dtype := range []string{"bf16", "f16"} {
		// TestGPUDimV: V's head dim unlike Q's (Options.DimV).
		for _, p := range gpuDimPairs {
			fwd := func(o fac.Options) (bundler, error) { return fac.CompileForward(o, p[0]) }
			bwd := func(o fac.Options) (bundler, error) { return fac.CompileBackward(o, p[0]) }
			vfwd := func(o fac.Options) (bundler, error) { return fac.CompileForwardVarlen(o, p[0]) }
			vbwd := func(o fac.Options) (bundler, error) { return fac.CompileBackwardVarlen(o, p[0]) }
			for _, mc := range gpuDimVMods {
				opts := fac.Options{Mask: masks[mc.mask].expr, Score: scores[mc.score].expr, DType: dtype, DimV: p[1]}
				add("dimv forward", fwd, opts)
				add("dimv backward", bwd, opts)
			}
			add("dimv decode", fwd, fac.Options{Mask: "causal_bottom_right", DType: dtype, DimV: p[1], NumSplits: 3, PackGQA: fac.PackGQAOn})
			sinks := fac.Options{Mask: "causal_bottom_right", DType: dtype, DimV: p[1], Sinks: true}
			add("dimv sinks forward", fwd, sinks)
			add("dimv sinks backward", bwd, sinks)
			add("dimv varlen forward", vfwd, fac.Options{Mask: "causal", DType: dtype, DimV: p[1]})
			add("dimv varlen backward", vbwd, fac.Options{Mask: "causal", DType: dtype, DimV: p[1]})
		}
		if dtype == "bf16" {
			// TestGPUDecodePDL: the split and combine kernels with pdl.
			add("decode pdl", func(o fac.Options) (bundler, error) { return fac.CompileForward(o, 128) }, pdlDecodeOpts())
			// TestGPUDecodeFusedCombine: the split kernel merging in place,
			// and split + combine beside it.
			for _, fused := range []bool{true, false} {
				add("decode fused", func(o fac.Options) (bundler, error) { return fac.CompileForward(o, 128) }, fusedDecodeOpts(fused))
			}
		}
		for _, d := range []int{64, 128} {
			bwd := func(o fac.Options) (bundler, error) { return fac.CompileBackward(o, d) }
			for _, m := range []string{"causal", "sliding_window(20, 3)", "document", "causal_bottom_right"} {
				add("sinks backward", bwd, fac.Options{Mask: m, DType: dtype, Sinks: true})
			}
			if dtype == "bf16" && d == 64 {
				add("sinks backward", bwd, fac.Options{Mask: "causal_bottom_right", DType: dtype, Sinks: true,
					Consts: map[string]string{"DETERMINISTIC": "true"}})
			}
			if dtype == "bf16" && d == 128 {
				// TestGPUSinksDecode: the sinks forward split over the keys.
				sfwd := func(o fac.Options) (bundler, error) { return fac.CompileForward(o, d) }
				for _, m := range []string{"causal_bottom_right", "sliding_window(20, 3)"} {
					add("sinks decode", sfwd, fac.Options{Mask: m, DType: dtype, Sinks: true})
				}
			}
			vfwd := func(o fac.Options) (bundler, error) { return fac.CompileForwardVarlen(o, d) }
			vbwd := func(o fac.Options) (bundler, error) { return fac.CompileBackwardVarlen(o, d) }
			// fac bench --varlen-len (scripts/gpu bench varlen): stdlib masks, no user sources.
			for _, m := range []string{"none", "causal"} {
				add("varlen forward", vfwd, fac.Options{Mask: m, DType: dtype})
				for _, c := range varlenBenchConsts(d) {
					add("varlen forward", vfwd, fac.Options{Mask: m, DType: dtype, Consts: c})
				}
				// --backward: the tuned (packed) loads and the ones kept in the sequence.
				add("varlen backward", vbwd, fac.Options{Mask: m, DType: dtype})
				add("varlen backward", vbwd, fac.Options{Mask: m, DType: dtype, Consts: varlenUnpacked})
			}
			for _, c := range varlenSparseCases {
				src := map[string]string{"varlen_mods.fa": varlenMods}
				add("varlen forward", vfwd, fac.Options{Mask: c.expr, DType: dtype, Sources: src})
				add("varlen forward", vfwd, fac.Options{Mask: c.expr, DType: dtype, Sources: src, Consts: varlenUnpacked})
				add("varlen forward", vfwd, fac.Options{Mask: c.expr, DType: dtype, Sources: src, Consts: varlenNoProducer})
				switch c.expr {
				case "causal", "document", "causal_bottom_right", "tail_window", "head_window", "seq_parity":
				default:
					continue
				}
				for _, sc := range scores {
					if sc.expr == "softcap(2.5)" {
						continue
					}
					opts := fac.Options{Mask: c.expr, Score: sc.expr, DType: dtype, Sources: src}
					add("varlen forward", vfwd, opts)
					add("varlen backward", vbwd, opts)
				}
			}
		}
	}
	return jobs
}

// bundleJob is one compiled configuration to bundle for arch.
type bundleJob struct {
	what string
	c    bundler
	arch string
}

// bundleAll runs the jobs' llc work in parallel, a job per CPU, through
// one cache so that a kernel several jobs hold compiles once, and adds
// the kernels to b in job order (the bundle is the same whatever the
// schedule).
func bundleAll(t *testing.T, b *bundle.Bundle, tool *llc.Tool, jobs []bundleJob) {
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]*artifact.Artifact, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = j.c.BundleKernels(context.Background(), c, j.arch, tool)
		}()
	}
	wg.Wait()
	for i, j := range jobs {
		if errs[i] != nil {
			t.Fatalf("%s %s: %v", j.what, j.arch, errs[i])
		}
		for _, k := range out[i] {
			if !b.Has(k.Ident) {
				b.Add(*k)
			}
		}
	}
}
