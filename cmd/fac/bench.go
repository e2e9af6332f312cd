package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/internal/outfile"
)

// benchResult is one row of `fac bench`, also written as JSON.
type benchResult struct {
	Pass     string    `json:"pass"` // forward or backward
	Mask     string    `json:"mask"`
	SeqLen   int       `json:"seqlen"`
	Batch    int       `json:"batch"`
	Heads    int       `json:"heads"`
	Dim      int       `json:"dim"`
	DType    string    `json:"dtype"`
	Pairs    int64     `json:"pairs"` // kept (q, kv) pairs per head
	MedianMs float64   `json:"median_ms"`
	TFLOPS   float64   `json:"tflops"` // forward 4, backward 10 × pairs * D * B * H / t
	TimesMs  []float64 `json:"times_ms"`
}

// anchorMasks are the masks of ../shared/bench/ANCHORS.md in our stdlib.
var anchorMasks = []string{"none", "causal", "sliding_window(1023, 0)", "document", "prefix_lm(1024)"}

func benchCmd() *cobra.Command {
	var masks, bundles, files, constFlags []string
	var seqlens []int
	var tokens, heads, dim, warmup, reps, docLen, block int
	var dtype, jsonOut, device string
	var backward bool
	cmd := &cobra.Command{
		Use:   "bench [FILE...]",
		Short: "time attention (forward, or --backward) on the GPU (CUDA events, warm-up, medians) and print TFLOPS",
		Long: `Times the forward kernel (flash_fwd) for each mask and sequence length with batch = tokens / seqlen, as in
../shared/bench/ANCHORS.md (bf16, D=128, 16 heads, 16384 tokens). TFLOPS count only the (q, kv)
pairs the mask keeps: 4 * pairs * D / t (counted in O(S) for the stdlib's masks, pair by pair on
the CPU for others). Also prints the cold compile time and the cache-hit load time.
--backward times the backward pass instead (its kernels one after another, as one figure) with
TFLOPS = 10 * pairs * D / t (2.5 times the forward's matmul work).`,
		Example: `  fac bench --bundle attn.bundle --json bench.json
  fac bench --seqlen 32768 --mask causal --json - > causal.json   # the table goes to stderr
  fac bench mymask.fa --mask my_mask --seqlen 4096
  fac bench --backward --seqlen 8192 --json bwd.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkDevice(device, "cuda"); err != nil {
				return fmt.Errorf("%w (fac bench times GPU kernels)", err)
			}
			srcs, err := readSources(append(args, files...))
			if err != nil {
				return err
			}
			consts, err := (&compileFlags{consts: constFlags}).constMap()
			if err != nil {
				return err
			}
			if err := blockConsts(consts, block, block, true, fmt.Sprintf("--block %d", block)); err != nil {
				return err
			}
			if docLen < 1 {
				return fmt.Errorf("--doc-len %d: want a positive document length", docLen)
			}
			w := reportTo(cmd, jsonOut == "-")
			gpu, err := openGPU(bundles)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "device: %s (%s)\n", gpu.Name, gpu.Arch)
			if backward {
				fmt.Fprintln(w, "backward pass: flash_bwd_preprocess, flash_bwd, flash_bwd_postprocess timed as one; TFLOPS = 10 * pairs * D / t")
			} else if err := compileTimes(w, gpu, fac.Options{Mask: masks[0], DType: dtype, Sources: srcs, Consts: consts}, dim, bundles); err != nil {
				fmt.Fprintf(w, "compile times: %v\n", err)
			}
			var rows []benchResult
			fmt.Fprintf(w, "%-26s %6s %3s %4s %10s %9s\n", "mask", "S", "B", "H", "median ms", "TFLOPS")
			for _, s := range seqlens {
				b := max(1, tokens/s)
				for _, m := range masks {
					opts := fac.Options{Mask: m, DType: dtype, Sources: srcs, Consts: consts}
					run := benchOne
					if backward {
						run = benchBackwardOne
					}
					r, err := run(gpu, opts, s, b, heads, dim, docLen, warmup, reps)
					if err != nil {
						return fmt.Errorf("%s S=%d: %w", m, s, err)
					}
					rows = append(rows, r)
					fmt.Fprintf(w, "%-26s %6d %3d %4d %10.3f %9.1f\n", r.Mask, r.SeqLen, r.Batch, r.Heads, r.MedianMs, r.TFLOPS)
				}
			}
			if jsonOut != "" {
				js, _ := json.MarshalIndent(rows, "", "  ")
				return outfile.Write(jsonOut, append(js, '\n'))
			}
			return nil
		},
	}
	fs := cmd.Flags()
	addFileFlag(fs, &files)
	fs.StringArrayVar(&masks, "mask", anchorMasks, "masks to time (repeatable)")
	fs.IntSliceVar(&seqlens, "seqlen", []int{2048, 8192}, "sequence lengths (Sq = Sk; comma-separated)")
	fs.IntVar(&tokens, "tokens", 16384, "batch × seqlen")
	fs.IntVar(&heads, "heads", 16, "heads")
	fs.IntVar(&dim, "dim", 128, "head dim")
	fs.StringVar(&dtype, "dtype", "bf16", "bf16 or f16")
	addBlockFlag(fs, &block)
	fs.StringArrayVar(&constFlags, "const", nil, "compile-time argument NAME=VALUE for the kernels, e.g. BLOCK_N=32 or (--backward) num_warps=4 (repeatable)")
	fs.IntVar(&warmup, "warmup", 5, "untimed launches first")
	fs.IntVar(&reps, "reps", 20, "timed launches (the median is reported)")
	fs.IntVar(&docLen, "doc-len", 1000, "document length for the document mask (its doc ids are made up)")
	fs.StringVar(&jsonOut, "json", "", "write the results as JSON to this file (- = stdout; the table then goes to stderr)")
	fs.StringArrayVar(&bundles, "bundle", nil, "AOT bundle to load kernels from (repeatable)")
	addDeviceFlag(fs, &device, "cuda", "device: cuda (fac bench times GPU kernels only)")
	fs.BoolVar(&backward, "backward", false, "time the backward pass (its kernels in sequence, after one forward for O and LSE); TFLOPS = 10 * pairs * D / t")
	return cmd
}

// benchInputs makes a benchmark's random inputs for shape sh (seeded by
// the sequence length), the document ids of the document mask (documents
// of docLen tokens) and a generator for more random tensors. fac bench can
// make up no other aux tensor.
func benchInputs(fwd *fac.Forward, mask string, sh fac.Shape, docLen int) (fac.Inputs, []int32, func(int) []float32, error) {
	rng := rand.New(rand.NewPCG(uint64(sh.SeqQ), 3))
	randn := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	n := sh.Batch * sh.Heads * sh.SeqQ * sh.Dim
	in := fac.Inputs{Q: randn(n), K: randn(n), V: randn(n), Aux: map[string]any{}}
	doc := make([]int32, sh.SeqQ)
	for i := range doc {
		doc[i] = int32(i / docLen)
	}
	for _, name := range fwd.AuxTensors() {
		if name != "doc" {
			return in, nil, nil, fmt.Errorf("mask %s reads aux tensor %q, which fac bench cannot make up", mask, name)
		}
		in.Aux["doc"] = doc
	}
	return in, doc, randn, nil
}

func benchOne(gpu *fac.CUDA, opts fac.Options, s, b, h, d int, docLen, warmup, reps int) (benchResult, error) {
	fwd, err := fac.CompileForward(opts, d)
	if err != nil {
		return benchResult{}, err
	}
	sh := fac.Shape{Batch: b, Heads: h, KVHeads: h, SeqQ: s, SeqK: s, Dim: d}
	in, doc, _, err := benchInputs(fwd, opts.Mask, sh, docLen)
	if err != nil {
		return benchResult{}, err
	}
	times, err := fwd.BenchCUDA(gpu, in, sh, warmup, reps)
	if err != nil {
		return benchResult{}, err
	}
	pairs, err := keptPairs(fwd, s, doc)
	if err != nil {
		return benchResult{}, err
	}
	sorted := append([]float64(nil), times...)
	sort.Float64s(sorted)
	med := sorted[len(sorted)/2]
	tf := 4 * float64(pairs) * float64(d) * float64(b*h) / (med * 1e-3) / 1e12
	return benchResult{Pass: "forward", Mask: opts.Mask, SeqLen: s, Batch: b, Heads: h, Dim: d, DType: opts.DType, Pairs: pairs, MedianMs: med, TFLOPS: tf, TimesMs: times}, nil
}

// compileTimes prints the cold compile time (parse → PTX, llc included) and
// the cache-hit time (disk entry → loaded module) for one kernel.
func compileTimes(w io.Writer, gpu *fac.CUDA, opts fac.Options, dim int, bundles []string) error {
	tool, err := llc.Find()
	if err != nil {
		return bundleLoadTimes(w, gpu, bundles, err)
	}
	dir, err := os.MkdirTemp("", "fac-bench-cache")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c, err := cache.Open(dir)
	if err != nil {
		return err
	}
	var cold compiler.Timings
	t0 := time.Now()
	fwd, err := fac.CompileForward(opts, dim)
	if err != nil {
		return err
	}
	res := fwd.Result()
	if _, err := compiler.Cached(context.Background(), c, res, gpu.Arch, tool, &cold); err != nil {
		return err
	}
	coldTook := time.Since(t0)
	var hit compiler.Timings
	art, err := compiler.Cached(context.Background(), c, res, gpu.Arch, tool, &hit)
	if err != nil {
		return err
	}
	first, loadHit, err := gpu.CacheHitTime(filepath.Join(dir, "probe"), art)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "compile %s mask=%s: cold %.1f ms (%s); cache hit %s; first load (driver JIT) %.1f ms; cache hit → loaded module %.2f ms\n",
		res.Kernel, opts.Mask, ms(coldTook), cold.String(), hit.String(), ms(first), ms(loadHit))
	return nil
}

// bundleLoadTimes measures the cache-hit path where no llc is installed:
// a bundle's kernel goes through a fresh disk cache (as if llc had put it
// there) and is timed from cache entry to loaded function.
func bundleLoadTimes(w io.Writer, gpu *fac.CUDA, bundles []string, why error) error {
	if len(bundles) == 0 {
		return fmt.Errorf("no llc here (%v) and no bundle to time", why)
	}
	t0 := time.Now()
	b, err := bundle.Read(bundles[0])
	if err != nil {
		return err
	}
	readTook := time.Since(t0)
	dir, err := os.MkdirTemp("", "fac-bench-cache")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if len(b.Kernels) == 0 {
		return fmt.Errorf("bundle %s holds no kernel", bundles[0])
	}
	art := &b.Kernels[0]
	first, hit, err := gpu.CacheHitTime(dir, art)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "no llc here: bundle read+verify %.2f ms (%d kernels); kernel %s mask=%s: first load (driver JIT, cubin cached) %.1f ms, cache hit → loaded module %.2f ms\n",
		ms(readTook), len(b.Kernels), art.Ident.Kernel, art.Ident.Mods["mask"], ms(first), ms(hit))
	return nil
}
