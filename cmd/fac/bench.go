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
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/internal/npy"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/artifact/cache"
)

// benchResult is one row of `fac bench`, also written as JSON.
type benchResult struct {
	Mask     string    `json:"mask"`
	SeqLen   int       `json:"seqlen"`
	Batch    int       `json:"batch"`
	Heads    int       `json:"heads"`
	Dim      int       `json:"dim"`
	DType    string    `json:"dtype"`
	Pairs    int64     `json:"pairs"` // kept (q, kv) pairs per head
	MedianMs float64   `json:"median_ms"`
	TFLOPS   float64   `json:"tflops"` // 4 * pairs * D * B * H / t
	TimesMs  []float64 `json:"times_ms"`
}

// anchorMasks are the masks of ../shared/bench/ANCHORS.md in our stdlib.
var anchorMasks = []string{"none", "causal", "sliding_window(1023, 0)", "document", "prefix_lm(1024)"}

func benchCmd() *cobra.Command {
	var masks, bundles []string
	var seqlens []int
	var tokens, heads, dim, warmup, reps, docLen int
	var dtype, jsonOut string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "time forward attention on the GPU (CUDA events, warm-up, medians) and print TFLOPS",
		Long: `Times flash_fwd for each mask and sequence length with batch = tokens / seqlen, as in
../shared/bench/ANCHORS.md (bf16, D=128, 16 heads, 16384 tokens). TFLOPS count only the (q, kv)
pairs the mask keeps: 4 * pairs * D / t. Also prints the cold compile time and the cache-hit load time.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gpu, err := openGPU(bundles)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "device: %s (%s)\n", gpu.Name, gpu.Arch)
			if err := compileTimes(w, gpu, masks[0], dtype, dim, bundles); err != nil {
				fmt.Fprintf(w, "compile times: %v\n", err)
			}
			var rows []benchResult
			fmt.Fprintf(w, "%-26s %6s %3s %4s %10s %9s\n", "mask", "S", "B", "H", "median ms", "TFLOPS")
			for _, s := range seqlens {
				b := max(1, tokens/s)
				for _, m := range masks {
					r, err := benchOne(gpu, m, s, b, heads, dim, dtype, docLen, warmup, reps)
					if err != nil {
						return fmt.Errorf("%s S=%d: %w", m, s, err)
					}
					rows = append(rows, r)
					fmt.Fprintf(w, "%-26s %6d %3d %4d %10.3f %9.1f\n", r.Mask, r.SeqLen, r.Batch, r.Heads, r.MedianMs, r.TFLOPS)
				}
			}
			if jsonOut != "" {
				js, _ := json.MarshalIndent(rows, "", "  ")
				return npy.WriteFile(jsonOut, append(js, '\n'))
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&masks, "mask", anchorMasks, "masks to time (repeatable)")
	fs.IntSliceVar(&seqlens, "seqlen", []int{2048, 8192}, "sequence lengths")
	fs.IntVar(&tokens, "tokens", 16384, "batch × seqlen")
	fs.IntVar(&heads, "heads", 16, "heads")
	fs.IntVar(&dim, "dim", 128, "head dim")
	fs.StringVar(&dtype, "dtype", "bf16", "bf16 or f16")
	fs.IntVar(&warmup, "warmup", 5, "untimed launches first")
	fs.IntVar(&reps, "reps", 20, "timed launches (the median is reported)")
	fs.IntVar(&docLen, "doc-len", 1000, "document length for the document mask")
	fs.StringVar(&jsonOut, "json", "", "write the results as JSON to this file")
	fs.StringArrayVar(&bundles, "bundle", nil, "AOT bundle to load kernels from (repeatable)")
	return cmd
}

func benchOne(gpu *fac.CUDA, mask string, s, b, h, d int, dtype string, docLen, warmup, reps int) (benchResult, error) {
	fwd, err := fac.CompileForward(fac.Options{Mask: mask, DType: dtype}, d)
	if err != nil {
		return benchResult{}, err
	}
	sh := fac.Shape{Batch: b, Heads: h, KVHeads: h, SeqQ: s, SeqK: s, Dim: d}
	rng := rand.New(rand.NewPCG(uint64(s), 3))
	randn := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	n := b * h * s * d
	in := fac.Inputs{Q: randn(n), K: randn(n), V: randn(n), Aux: map[string]any{}}
	doc := make([]int32, s)
	for i := range doc {
		doc[i] = int32(i / docLen)
	}
	in.Aux["doc"] = doc
	times, err := fwd.BenchCUDA(gpu, in, sh, warmup, reps)
	if err != nil {
		return benchResult{}, err
	}
	pairs, err := keptPairs(fwd, mask, s, doc)
	if err != nil {
		return benchResult{}, err
	}
	sorted := append([]float64(nil), times...)
	sort.Float64s(sorted)
	med := sorted[len(sorted)/2]
	tf := 4 * float64(pairs) * float64(d) * float64(b*h) / (med * 1e-3) / 1e12
	return benchResult{Mask: mask, SeqLen: s, Batch: b, Heads: h, Dim: d, DType: dtype, Pairs: pairs, MedianMs: med, TFLOPS: tf, TimesMs: times}, nil
}

// keptPairs counts the (q, kv) pairs a mask keeps for one head. The anchor
// masks are counted by formula-free loops in Go; any other mask through
// the reference device (slower, exact).
func keptPairs(fwd *fac.Forward, mask string, s int, doc []int32) (int64, error) {
	var keep func(i, j int) bool
	switch {
	case mask == "none":
		return int64(s) * int64(s), nil
	case mask == "causal":
		keep = func(i, j int) bool { return i >= j }
	case mask == "document":
		keep = func(i, j int) bool { return doc[i] == doc[j] }
	case strings.HasPrefix(mask, "sliding_window("):
		var l, r int
		if _, err := fmt.Sscanf(mask, "sliding_window(%d, %d)", &l, &r); err != nil {
			return 0, err
		}
		keep = func(i, j int) bool { return i-l <= j && j <= i+r }
	case strings.HasPrefix(mask, "prefix_lm("):
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(mask, "prefix_lm("), ")"))
		if err != nil {
			return 0, err
		}
		keep = func(i, j int) bool { return j < n || i >= j }
	default:
		return fwd.CountPairs(fac.Shape{Batch: 1, Heads: 1, KVHeads: 1, SeqQ: s, SeqK: s, Dim: 1}, map[string]any{"doc": doc})
	}
	var n int64
	for i := 0; i < s; i++ {
		for j := 0; j < s; j++ {
			if keep(i, j) {
				n++
			}
		}
	}
	return n, nil
}

// compileTimes prints the cold compile time (parse → PTX, llc included) and
// the cache-hit time (disk entry → loaded module) for one kernel.
func compileTimes(w io.Writer, gpu *fac.CUDA, mask, dtype string, dim int, bundles []string) error {
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
	req := compiler.Request{Kernel: "flash_fwd", Mask: mask, Consts: map[string]string{"HEAD_DIM": strconv.Itoa(dim), "DTYPE": dtype}}
	var cold compiler.Timings
	t0 := time.Now()
	if _, err := compiler.CachedPTX(context.Background(), c, req, gpu.Arch, tool, &cold); err != nil {
		return err
	}
	coldTook := time.Since(t0)
	var hit compiler.Timings
	art, err := compiler.CachedPTX(context.Background(), c, req, gpu.Arch, tool, &hit)
	if err != nil {
		return err
	}
	first, loadHit, err := gpu.CacheHitTime(filepath.Join(dir, "probe"), art)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "compile flash_fwd mask=%s: cold %.1f ms (%s); cache hit %s; first load (driver JIT) %.1f ms; cache hit → loaded module %.2f ms\n",
		mask, ms(coldTook), cold.String(), hit.String(), ms(first), ms(loadHit))
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
	art := fac.ArtifactOf(&b.Kernels[0])
	first, hit, err := gpu.CacheHitTime(dir, art)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "no llc here: bundle read+verify %.2f ms (%d kernels); kernel %s mask=%s: first load (driver JIT, cubin cached) %.1f ms, cache hit → loaded module %.2f ms\n",
		ms(readTook), len(b.Kernels), art.Kernel, b.Kernels[0].Mask, ms(first), ms(hit))
	return nil
}
