package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/internal/outfile"
)

// benchResult is one row of `fac bench`, also written as JSON.
type benchResult struct {
	Pass    string `json:"pass"` // forward, backward or step
	Mask    string `json:"mask"`
	Score   string `json:"score,omitempty"` // --score, "" for the identity
	SeqLen  int    `json:"seqlen"`          // the key length (= the query length unless --seqlen-q)
	SeqLenQ int    `json:"seqlen_q"`
	SeqLenK int    `json:"seqlen_k"`
	Batch   int    `json:"batch"`
	Heads   int    `json:"heads"`
	KVHeads int    `json:"kv_heads"`
	Dim     int    `json:"dim"`
	// DimV is V's and O's head dim where it is not Dim (--dim-v).
	DimV     int     `json:"dim_v,omitempty"`
	DType    string  `json:"dtype"`
	Pairs    int64   `json:"pairs"` // kept (q, kv) pairs per head
	MedianMs float64 `json:"median_ms"`
	TFLOPS   float64 `json:"tflops"` // forward 4, backward 10, step 14 × pairs * D * B * H / t (matmulFlops)
	// FwdMs and BwdMs are a step's forward and backward medians, whose
	// sum is its MedianMs.
	FwdMs float64 `json:"fwd_ms,omitempty"`
	BwdMs float64 `json:"bwd_ms,omitempty"`
	// KVTBps is the K and V bytes read per second, B·Hkv·Sk·(D + Dv)·
	// (element size) / t in TB/s (2·B·Hkv·Sk·D when Dv = D): decode_bench.py's
	// kv_tbps, the bound for decoding.
	KVTBps float64 `json:"kv_tbps"`
	// NumSplits and PackGQA are the forward's plan (docs/decoding.md): 1
	// and 1 when flash_fwd ran alone.
	NumSplits int `json:"num_splits"`
	PackGQA   int `json:"pack_gqa"`
	// PageSize is a paged row's keys per page (--page-size; pass "forward
	// paged"), 0 for a dense row.
	PageSize int       `json:"page_size,omitempty"`
	TimesMs  []float64 `json:"times_ms"`
}

// label is the row's first column: the mask (and score), and for a paged
// row its page size.
func (r benchResult) label() string {
	if r.Score != "" {
		r.Mask += " " + r.Score
	}
	if part, ok := strings.CutPrefix(r.Pass, "forward ragged "); ok {
		return fmt.Sprintf("%s ragged %s %d", r.Mask, part, r.PageSize)
	}
	if r.PageSize > 0 {
		return fmt.Sprintf("%s paged %d", r.Mask, r.PageSize)
	}
	return r.Mask
}

// anchorMasks are the masks of the anchor configurations (the anchor
// scripts that scripts/gpu runs) in our stdlib.
var anchorMasks = []string{"none", "causal", "sliding_window(1023, 0)", "document", "prefix_lm(1024)"}

func benchCmd() *cobra.Command {
	var masks, bundles, files, constFlags []string
	var score string
	var seqlens, seqQs, seqKs, pageSizes []int
	var tokens, batch, heads, kvHeads, dim, dimV, warmup, reps, docLen, block, varlenLen int
	var dtype, jsonOut, device string
	var backward, decode, step, ragged, sinks bool
	var rb raggedBench
	var df decodeFlags
	var tf targetFlags
	cmd := &cobra.Command{
		Use:   "bench [FILE...]",
		Short: "time attention (forward, or --backward) on the GPU (CUDA events, warm-up, medians) and print TFLOPS",
		Long: `Times the forward kernel (flash_fwd) for each mask and sequence length with batch = tokens / seqlen, as the
anchor configurations do (the anchor scripts that scripts/gpu runs: bf16, D=128, 16 heads, 16384 tokens). TFLOPS count only the (q, kv)
pairs the mask keeps: 4 * pairs * D / t (counted in O(S) for the stdlib's masks, through the block
mask for others: full blocks by area, partial ones row by row). Also prints the cold compile time and the cache-hit load time.
Timing is triton.testing.do_bench's, which the anchors use: 256 MiB written before each timed launch
(L2 flushed), CUDA events around the launch, all launches queued before one synchronization (no
host launch latency in the figures), the median reported. FAC_BENCH_SYNC=1 times without the
flush and with a synchronization after each launch (fac's earlier timing, kept for comparisons).
--backward times the backward pass instead (its kernels one after another, as one figure) with
TFLOPS = 10 * pairs * D / t (2.5 times the forward's matmul work). --step times a training step's
attention: the forward as fac bench times it, then the backward as --backward does, each mask's
step time the sum of the two medians (as the anchors' step is the sum of their forward and
backward times), TFLOPS = 14 * pairs * D / t. With --dim-v (V's and O's head dim, where it is not
--dim) the matmuls count 2 * pairs * (D + Dv) forward and 2 * pairs * (3D + 2Dv) backward.

Every row also gives KV TB/s, the bytes of K and V read per second (2 * B * Hkv * Sk * D * element
size / t; with --dim-v, B * Hkv * Sk * (D + Dv) * element size / t), the measure of decoding. --decode times the decoding anchors (decode_bench.py, one of the
anchor scripts that scripts/gpu runs): B=8, 32 query heads, 8 kv heads, D=128, bf16, no mask, Sq in {1, 16},
Sk in {8192, 32768} (each overridable by its flag); --seqlen-q/--seqlen-k give any other lengths
(every Sk with every Sq), --batch and --kv-heads the rest of the shape. --num-splits and --pack-gqa
choose split-KV and PackGQA (docs/decoding.md); the plan each row ran shows in its last columns.
--page-size N[,N...] (with --decode) adds a row per page size after each dense one: the same call over a
paged KV cache (flash_fwd_paged + flash_fwd_combine; docs/decoding.md), every sequence Sk long, its
pages shuffled, in KV TB/s as the dense row.
--varlen-len L times the varlen kernel (docs/varlen.md) on --tokens packed as sequences of L tokens
with the mask within each sequence: none over 1000-token sequences is the dense document(1000) anchor's
work, as one packed batch; with --backward, the varlen backward (its three kernels) after one forward.
--ragged times a ragged continuous batch over a paged KV cache in one launch (flash_fwd_paged_varlen +
flash_fwd_combine; docs/decoding.md#ragged-batches): --decode-rows sequences of one query beside a prefill
chunk of each --prefill length, their caches spread over --cache-range LO,HI keys in shuffled pages of
--page-size keys (default 16), then the decode rows alone and the chunks alone, and the ratio of the one
launch to the two (issue 45: 64 decode rows and 2 chunks of 2048 over caches of 4096 to 32768 keys, the
defaults, with 32 heads, 8 kv heads, D = 128, causal); the batch's output is checked on a sample of rows.
--target-opt NAME=VALUE times the kernels of a code generation variant (fac compile --help lists the
switches), e.g. --target-opt tma=off for cp.async staging.`,
		Example: `  fac bench --bundle attn.bundle --json bench.json
  fac bench --seqlen 32768 --mask causal --json - > causal.json   # the table goes to stderr
  fac bench mymask.fa --mask my_mask --seqlen 4096
  fac bench --backward --seqlen 8192 --json bwd.json
  fac bench --decode --bundle decode.bundle --json decode.json
  fac bench --decode --num-splits 8 --pack-gqa on --seqlen-q 1 --seqlen-k 8192
  fac bench --decode --page-size 1,16,64,256   # each decoding row, then paged with those page sizes
  fac bench --varlen-len 1000 --mask none --tokens 16384   # varlen, as the dense document(1000) anchor
  fac bench --varlen-len 1000 --mask none --backward       # the varlen backward, the same packing
  fac bench --ragged --json ragged.json   # 64 decode rows + 2 prefill chunks of 2048, one launch vs each alone`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkDevice(device, "cuda"); err != nil {
				return fmt.Errorf("%w (fac bench times GPU kernels)", err)
			}
			if err := checkOutputs(jsonOut != "-", map[string]string{"--json": jsonOut}); err != nil {
				return err
			}
			srcs, err := readSources(append(args, files...))
			if err != nil {
				return err
			}
			cf := &compileFlags{consts: constFlags}
			dtypes, dims := []string{dtype}, []int{dim}
			if err := listConstsAsFlags(cmd, cf, &dtypes, &dims, &dimV); err != nil {
				return err
			}
			dtype, dim = dtypes[0], dims[0]
			consts, err := cf.constMap()
			if err != nil {
				return err
			}
			// --const SPARSE_Q/SPARSE_K may give the blocks on their own
			// (256×128 blocks for 256-row tiles); --block given must agree.
			// Neither given, the kernel's tuned set or defaults choose
			// (192×128 for D = 64's consumer groups on sm_90a).
			if cmd.Flags().Changed("block") {
				if err := blockConsts(consts, block, block, true, fmt.Sprintf("--block %d", block)); err != nil {
					return err
				}
			}
			if docLen < 1 {
				return fmt.Errorf("--doc-len %d: want a positive document length", docLen)
			}
			fl := cmd.Flags()
			if ragged {
				for _, f := range []string{"decode", "backward", "step", "varlen-len", "seqlen", "seqlen-q", "seqlen-k", "batch", "tokens", "doc-len"} {
					if fl.Changed(f) {
						return fmt.Errorf("--ragged times its own batch (--decode-rows, --prefill, --cache-range, --page-size): no --%s", f)
					}
				}
				for name, set := range map[string]func(){
					"mask":     func() { masks = []string{"causal"} },
					"heads":    func() { heads = 32 },
					"kv-heads": func() { kvHeads = 8 },
				} {
					if !fl.Changed(name) {
						set()
					}
				}
				rb.pageSize = 16
				if len(pageSizes) > 1 {
					return fmt.Errorf("--ragged times one page size: --page-size %v", pageSizes)
				} else if len(pageSizes) == 1 {
					rb.pageSize = pageSizes[0]
				}
				if err := rb.check(); err != nil {
					return err
				}
			} else if fl.Changed("decode-rows") || fl.Changed("prefill") || fl.Changed("cache-range") {
				return fmt.Errorf("--decode-rows, --prefill and --cache-range shape --ragged's batch: give --ragged")
			}
			if decode {
				// decode_bench.py's configurations, unless a flag says otherwise.
				for name, set := range map[string]func(){
					"mask":     func() { masks = []string{"none"} },
					"seqlen-q": func() { seqQs = []int{1, 16} },
					"seqlen-k": func() { seqKs = []int{8192, 32768} },
					"batch":    func() { batch = 8 },
					"heads":    func() { heads = 32 },
					"kv-heads": func() { kvHeads = 8 },
				} {
					if !fl.Changed(name) {
						set()
					}
				}
			}
			if dimV == dim {
				dimV = 0
			}
			shapes, err := benchShapes(seqlens, seqQs, seqKs, tokens, batch, heads, kvHeads, dim, dimV)
			if err != nil {
				return err
			}
			if backward && step {
				return fmt.Errorf("--step times the forward and the backward: give one of --backward and --step")
			}
			if (backward || step) && (len(seqQs) > 0 || len(seqKs) > 0 || kvHeads > 0 || decode || df.changed()) {
				return fmt.Errorf("--backward and --step time Sq = Sk = --seqlen with Hkv = H (no --seqlen-q, --seqlen-k, --kv-heads, --decode or split-KV flags)")
			}
			if !ragged {
				if err := checkBenchPageSizes(pageSizes, decode, backward || step || varlenLen != 0); err != nil {
					return err
				}
			}
			if varlenLen != 0 {
				if varlenLen < 0 || step || decode || len(seqQs) > 0 || len(seqKs) > 0 || fl.Changed("seqlen") || fl.Changed("batch") || df.changed() {
					return fmt.Errorf("--varlen-len %d: want a positive length, with --tokens, --heads, --kv-heads, --backward (no --step, --decode, --seqlen, --seqlen-q, --seqlen-k, --batch or split-KV flags)", varlenLen)
				}
				shapes = []fac.Shape{{Batch: 1, Heads: heads, KVHeads: kvHeads, SeqQ: tokens, SeqK: tokens, Dim: dim, DimV: dimV}}
			}
			if sinks && (backward || step || ragged || varlenLen != 0 || len(pageSizes) > 0) {
				return fmt.Errorf("--sinks times the forward and decoding rows with learnable sinks (flash_fwd_sinks, its split-KV kernels): no --backward, --step, --ragged, --varlen-len or --page-size")
			}
			target, err := tf.config("")
			if err != nil {
				return err
			}
			fwdOpts := fac.Options{Target: target, DimV: dimV, Sinks: sinks}
			if err := df.apply(&fwdOpts); err != nil {
				return err
			}
			w := reportTo(cmd, jsonOut == "-")
			gpu, err := openGPU(bundles)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "device: %s (%s)\n", gpu.Name, gpu.Arch)
			if fb := fac.ArchFallback(gpu.Arch); fb != "" {
				fmt.Fprintf(w, "note: %s\n", fb)
			}
			fwdOpts.Target.Arch = gpu.Arch // tile arguments tuned for this GPU unless --const sets them
			if backward {
				fmt.Fprintln(w, "backward pass: flash_bwd_preprocess, flash_bwd, flash_bwd_postprocess timed as one; TFLOPS = 10 * pairs * D / t")
			} else if step {
				fmt.Fprintln(w, "training step: the forward's median plus the backward's (its kernels timed as one); TFLOPS = 14 * pairs * D / t")
			} else if err := compileTimes(w, gpu, fac.Options{Mask: masks[0], Score: score, DType: dtype, DimV: dimV, Sources: srcs, Consts: consts, Target: fwdOpts.Target}, dim, bundles); err != nil {
				fmt.Fprintf(w, "compile times: %v\n", err)
			}
			var rows []benchResult
			if ragged {
				for _, m := range masks {
					opts := fwdOpts
					opts.Mask, opts.Score, opts.DType, opts.Sources, opts.Consts = m, score, dtype, srcs, consts
					rs, err := benchRagged(w, gpu, opts, rb, heads, kvHeads, dim, warmup, reps)
					if err != nil {
						return fmt.Errorf("%s ragged: %w", m, err)
					}
					rows = append(rows, rs...)
				}
				fmt.Fprintf(w, "%-30s %6s %6s %4s %4s %4s %10s %9s %8s %6s %4s\n", "mask", "Sq", "Sk", "B", "H", "Hkv", "median ms", "TFLOPS", "KV TB/s", "splits", "pack")
				for _, r := range rows {
					fmt.Fprintf(w, "%-30s %6d %6d %4d %4d %4d %10.3f %9.1f %8.3f %6d %4d\n", r.label(), r.SeqLenQ, r.SeqLenK, r.Batch, r.Heads, r.KVHeads,
						r.MedianMs, r.TFLOPS, r.KVTBps, r.NumSplits, r.PackGQA)
				}
				return writeBenchJSON(jsonOut, rows)
			}
			fmt.Fprintf(w, "%-26s %6s %6s %3s %4s %4s %10s %9s %8s %6s %4s\n", "mask", "Sq", "Sk", "B", "H", "Hkv", "median ms", "TFLOPS", "KV TB/s", "splits", "pack")
			for _, sh := range shapes {
				for _, m := range masks {
					opts := fwdOpts
					opts.Mask, opts.Score, opts.DType, opts.Sources, opts.Consts = m, score, dtype, srcs, consts
					var r benchResult
					var err error
					if varlenLen > 0 {
						r, err = benchVarlen(gpu, opts, varlenLen, sh, warmup, reps, backward)
					} else if backward || step {
						r, err = benchBackwardOne(gpu, opts, sh.SeqQ, sh.Batch, sh.Heads, dim, docLen, warmup, reps)
						r.SeqLenQ, r.SeqLenK, r.KVHeads, r.NumSplits, r.PackGQA = sh.SeqQ, sh.SeqK, sh.KV(), 1, 1
						if err == nil && step {
							r, err = stepRow(gpu, opts, sh, docLen, warmup, reps, r)
						}
						r.KVTBps = kvTBps(sh, dtype, r.MedianMs)
					} else {
						r, err = benchShape(gpu, opts, sh, docLen, warmup, reps)
					}
					if err != nil {
						return fmt.Errorf("%s Sq=%d Sk=%d: %w", m, sh.SeqQ, sh.SeqK, err)
					}
					rs := []benchResult{r}
					if len(pageSizes) > 0 {
						paged, err := benchPaged(gpu, opts, sh, pageSizes, r.Pairs, warmup, reps)
						if err != nil {
							return fmt.Errorf("%s Sq=%d Sk=%d paged: %w", m, sh.SeqQ, sh.SeqK, err)
						}
						rs = append(rs, paged...)
					}
					for _, r := range rs {
						r.Score = score
						rows = append(rows, r)
						fmt.Fprintf(w, "%-26s %6d %6d %3d %4d %4d %10.3f %9.1f %8.3f %6d %4d\n", r.label(), r.SeqLenQ, r.SeqLenK, r.Batch, r.Heads, r.KVHeads,
							r.MedianMs, r.TFLOPS, r.KVTBps, r.NumSplits, r.PackGQA)
					}
				}
			}
			return writeBenchJSON(jsonOut, rows)
		},
	}
	fs := cmd.Flags()
	addFileFlag(fs, &files)
	fs.StringArrayVar(&masks, "mask", anchorMasks, "masks to time (repeatable)")
	fs.StringVar(&score, "score", "", `score mod of every row, e.g. "softcap(2.5)" or alibi (default: the identity)`)
	fs.IntSliceVar(&seqlens, "seqlen", []int{2048, 8192}, "sequence lengths (Sq = Sk; comma-separated)")
	fs.IntSliceVar(&seqQs, "seqlen-q", nil, "query lengths (comma-separated; with --seqlen-k, every pair; default --seqlen)")
	fs.IntSliceVar(&seqKs, "seqlen-k", nil, "key lengths (comma-separated; default --seqlen)")
	fs.IntVar(&tokens, "tokens", 16384, "batch × seqlen (batch = tokens / Sk unless --batch)")
	fs.IntVar(&batch, "batch", 0, "batch (0: tokens / Sk)")
	fs.IntVar(&heads, "heads", 16, "heads")
	fs.IntVar(&kvHeads, "kv-heads", 0, "kv heads (0: --heads; fewer is grouped-query attention)")
	fs.IntSliceVar(&pageSizes, "page-size", nil, "with --decode: also time each shape over a paged KV cache of these page sizes (comma-separated, e.g. 1,16,64,256)")
	fs.BoolVar(&ragged, "ragged", false, "time a ragged continuous batch over a paged KV cache in one launch beside its decode rows and its prefill chunks alone (issue 45's mixed batch; --decode-rows, --prefill, --cache-range, --page-size)")
	fs.IntVar(&rb.decodeRows, "decode-rows", 64, "with --ragged: sequences of one query")
	fs.IntSliceVar(&rb.prefill, "prefill", []int{2048, 2048}, "with --ragged: prefill chunks, one sequence each, of these query counts (comma-separated)")
	fs.IntSliceVar(&rb.cacheRange, "cache-range", []int{4096, 32768}, "with --ragged: LO,HI: the sequences' cache lengths, spread evenly (a chunk's at least its length)")
	fs.BoolVar(&sinks, "sinks", false, "time the kernels with learnable sinks (flash_fwd_sinks; with --decode its split-KV kernels and flash_fwd_combine_sinks), one random sink per head (compare with the same rows without --sinks)")
	fs.BoolVar(&decode, "decode", false, "time decode_bench.py's decoding anchors (B=8, H=32, Hkv=8, D=128, no mask, Sq 1 and 16, Sk 8192 and 32768; flags override)")
	df.add(fs)
	tf.add(fs)
	fs.IntVar(&dim, "dim", 128, "head dim")
	fs.IntVar(&dimV, "dim-v", 0, "head dim of v and o where it differs from --dim (0: --dim)")
	fs.StringVar(&dtype, "dtype", "bf16", "bf16 or f16")
	addBlockFlag(fs, &block)
	fs.StringArrayVar(&constFlags, "const", nil, "compile-time argument NAME=VALUE for the kernels, e.g. BLOCK_N=32 or (--backward) num_warps=4 (repeatable)")
	fs.IntVar(&warmup, "warmup", 5, "untimed launches first")
	fs.IntVar(&reps, "reps", 20, "timed launches (the median is reported)")
	fs.IntVar(&docLen, "doc-len", 1000, "document length for the document mask (its doc ids are made up)")
	fs.IntVar(&varlenLen, "varlen-len", 0, "time flash_fwd_varlen (with --backward, the varlen backward) instead: --tokens packed as sequences of this many tokens (the last one shorter), the mask (none or causal) within each; rows show B = sequences")
	fs.StringVar(&jsonOut, "json", "", "write the results as JSON to this file (- = stdout; the table then goes to stderr)")
	fs.StringArrayVar(&bundles, "bundle", nil, "AOT bundle to load kernels from (repeatable)")
	addDeviceFlag(fs, &device, "cuda", "device: cuda (fac bench times GPU kernels only)")
	fs.BoolVar(&backward, "backward", false, "time the backward pass (its kernels in sequence, after one forward for O and LSE); TFLOPS = 10 * pairs * D / t")
	fs.BoolVar(&step, "step", false, "time a training step: the forward, then the backward; the step is the sum of their medians, TFLOPS = 14 * pairs * D / t")
	return cmd
}

// writeBenchJSON writes rows as JSON to path ("" writes nothing, "-"
// stdout).
func writeBenchJSON(path string, rows []benchResult) error {
	if path == "" {
		return nil
	}
	js, _ := json.MarshalIndent(rows, "", "  ")
	return outfile.Write(path, append(js, '\n'))
}

// benchInputs makes a benchmark's random inputs for shape sh (seeded by
// the sequence length), the aux tensors of the document masks (documents
// of docLen tokens: document's ids, document_spans's spans) and of ALiBi
// (the usual slopes, 2^(-8(h+1)/H)), and a generator for more random
// tensors. fac bench can make up no other aux tensor.
func benchInputs(fwd *fac.Forward, mask string, sh fac.Shape, docLen int) (fac.Inputs, func(int) []float32, error) {
	randn := normals(rand.New(rand.NewPCG(uint64(sh.SeqQ), 3)))
	nq, nk := sh.Batch*sh.Heads*sh.SeqQ*sh.Dim, sh.Batch*sh.KV()*sh.SeqK*sh.Dim
	in := fac.Inputs{Q: randn(nq), K: randn(nk), V: randn(nk / sh.Dim * sh.VDim()), Aux: map[string]any{}}
	doc := make([]int32, max(sh.SeqQ, sh.SeqK))
	for i := range doc {
		doc[i] = int32(i / docLen)
	}
	start, end, _ := fac.DocumentSpans(doc) // runs: doc's documents are consecutive
	for _, name := range fwd.AuxTensors() {
		switch name {
		case "doc":
			in.Aux["doc"] = doc
		case "doc_start":
			in.Aux[name] = start
		case "doc_end":
			in.Aux[name] = end
		case "slopes":
			slopes := make([]float32, sh.Heads)
			for h := range slopes {
				slopes[h] = float32(math.Exp2(-8 * float64(h+1) / float64(sh.Heads)))
			}
			in.Aux[name] = slopes
		default:
			return in, nil, fmt.Errorf("the mods of mask %s read aux tensor %q, which fac bench cannot make up", mask, name)
		}
	}
	if fwd.HasSinks() {
		// gpt-oss's sinks are of the scores' size; any finite value costs the same.
		in.Sinks = randn(sh.Heads)
	}
	return in, randn, nil
}

// normals draws n standard normal float32s from rng per call.
func normals(rng *rand.Rand) func(n int) []float32 {
	return func(n int) []float32 { return tensorArg(nil, n, rng) }
}

// benchShapes are the shapes fac bench times, in order: each --seqlen as
// Sq = Sk, or, with --seqlen-q or --seqlen-k, every Sk with every Sq (the
// other list defaulting to --seqlen); batch is tokens / Sk unless given.
func benchShapes(seqlens, seqQs, seqKs []int, tokens, batch, heads, kvHeads, dim, dimV int) ([]fac.Shape, error) {
	if kvHeads == 0 {
		kvHeads = heads
	}
	if batch < 0 || kvHeads < 0 {
		return nil, fmt.Errorf("--batch %d, --kv-heads %d: want positive values (0 = the default)", batch, kvHeads)
	}
	var pairs [][2]int
	if len(seqQs) == 0 && len(seqKs) == 0 {
		for _, s := range seqlens {
			pairs = append(pairs, [2]int{s, s})
		}
	} else {
		if len(seqQs) == 0 {
			seqQs = seqlens
		}
		if len(seqKs) == 0 {
			seqKs = seqlens
		}
		for _, sk := range seqKs {
			for _, sq := range seqQs {
				pairs = append(pairs, [2]int{sq, sk})
			}
		}
	}
	var out []fac.Shape
	for _, p := range pairs {
		if p[0] < 1 || p[1] < 1 {
			return nil, fmt.Errorf("sequence lengths %d×%d: want positive lengths", p[0], p[1])
		}
		b := batch
		if b == 0 {
			b = max(1, tokens/p[1])
		}
		sh := fac.Shape{Batch: b, Heads: heads, KVHeads: kvHeads, SeqQ: p[0], SeqK: p[1], Dim: dim, DimV: dimV}
		if err := sh.Validate(); err != nil {
			return nil, err
		}
		out = append(out, sh)
	}
	return out, nil
}

// kvTBps is the K and V bytes of shape sh in dtype read per second over a
// median time of ms milliseconds, in TB/s (decode_bench.py's kv_tbps).
func kvTBps(sh fac.Shape, dtype string, ms float64) float64 {
	size := 2.0
	if dtype == "f32" {
		size = 4
	}
	bytes := float64(sh.Batch) * float64(sh.KV()) * float64(sh.SeqK) * float64(sh.Dim+sh.VDim()) * size
	return bytes / ms / 1e9
}

// matmulFlops are a pass's matmul flops per kept pair: forward S = Q·Kᵀ
// and O = P·V, 2·(D + Dv); backward S, dP = dO·Vᵀ, dV = Pᵀ·dO, dK = dSᵀ·Q,
// dQ = dS·K, 2·(3D + 2Dv); a step both. With Dv = D: 4, 10 and 14 · D.
func matmulFlops(pass string, sh fac.Shape) float64 {
	d, dv := float64(sh.Dim), float64(sh.VDim())
	switch pass {
	case "backward":
		return 2 * (3*d + 2*dv)
	case "step":
		return 2 * (4*d + 3*dv)
	}
	return 2 * (d + dv)
}

// stepRow is a training step's row: the forward on shape sh, timed as
// benchShape times it, and bwd, the backward's row on the same shape.
func stepRow(gpu *fac.CUDA, opts fac.Options, sh fac.Shape, docLen, warmup, reps int, bwd benchResult) (benchResult, error) {
	fopts := opts
	fwdConsts, _, err := splitConsts(opts.Sources, opts.Consts)
	if err != nil {
		return benchResult{}, err
	}
	fopts.Consts = fwdConsts
	fwd, err := benchShape(gpu, fopts, sh, docLen, warmup, reps)
	if err != nil {
		return benchResult{}, err
	}
	r := bwd
	r.Pass, r.FwdMs, r.BwdMs = "step", fwd.MedianMs, bwd.MedianMs
	r.MedianMs = fwd.MedianMs + bwd.MedianMs
	r.TFLOPS = matmulFlops("step", sh) * float64(bwd.Pairs) * float64(sh.Batch*sh.Heads) / (r.MedianMs * 1e-3) / 1e12
	r.TimesMs = nil
	return r, nil
}

// benchShape times the forward pass (flash_fwd, or its split-KV plan) on
// one shape.
func benchShape(gpu *fac.CUDA, opts fac.Options, sh fac.Shape, docLen, warmup, reps int) (benchResult, error) {
	fwd, err := fac.CompileForward(opts, sh.Dim)
	if err != nil {
		return benchResult{}, err
	}
	plan, err := fwd.PlanCUDA(gpu, sh)
	if err != nil {
		return benchResult{}, err
	}
	in, _, err := benchInputs(fwd, opts.Mask, sh, docLen)
	if err != nil {
		return benchResult{}, err
	}
	times, err := fwd.BenchCUDA(gpu, in, sh, warmup, reps)
	if err != nil {
		return benchResult{}, err
	}
	var pairs int64
	switch {
	case sh.SeqQ == sh.SeqK:
		pairs, err = keptPairs(fwd, sh.SeqQ, in.Aux)
	case fwd.Mask() == nil:
		pairs = int64(sh.SeqQ) * int64(sh.SeqK)
	default:
		pairs, err = fwd.CountPairs(fac.Shape{Batch: 1, Heads: 1, KVHeads: 1, SeqQ: sh.SeqQ, SeqK: sh.SeqK, Dim: 1}, in.Aux)
	}
	if err != nil {
		return benchResult{}, err
	}
	sorted := append([]float64(nil), times...)
	sort.Float64s(sorted)
	med := sorted[len(sorted)/2]
	tf := matmulFlops("forward", sh) * float64(pairs) * float64(sh.Batch*sh.Heads) / (med * 1e-3) / 1e12
	return benchResult{Pass: "forward", Mask: opts.Mask, SeqLen: sh.SeqK, SeqLenQ: sh.SeqQ, SeqLenK: sh.SeqK, Batch: sh.Batch, Heads: sh.Heads,
		KVHeads: sh.KV(), Dim: sh.Dim, DimV: sh.DimV, DType: opts.DType, Pairs: pairs, MedianMs: med, TFLOPS: tf, KVTBps: kvTBps(sh, opts.DType, med),
		NumSplits: plan.NumSplits, PackGQA: plan.Pack, TimesMs: times}, nil
}

// compileTimes prints the cold compile time (parse → PTX, llc included) and
// the cache-hit time (disk entry → loaded module) for one kernel.
func compileTimes(w io.Writer, gpu *fac.CUDA, opts fac.Options, dim int, bundles []string) error {
	lc, err := llcConfig()
	if err != nil {
		return err
	}
	tool, err := lc.Find()
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
