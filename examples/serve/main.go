// Command serve is a small serving engine built on fac's paged decoding:
// a continuous-batching loop over many requests, with random projections
// standing in for a model.
//
//	go run ./examples/serve                  # the CPU reference device, a few seconds
//	go run ./examples/serve -device cuda -requests 256 -prompt 512:4096 -gen 64:256 \
//	    -heads 32 -kv-heads 8 -dim 128 -max-batch 64 -chunk 512 -pages 16384 -check-every 100
//
// Requests of random prompt lengths arrive over time (a seeded Poisson
// process) and wait until the batch has room and the paged KV cache has
// free pages for them. Each step, every running request either prefills
// its next chunk of prompt tokens or decodes one token: the step's tokens
// go through the stand-in model's q, k and v projections, and one paged
// call per query length (prefill chunks of one length, decode steps)
// appends the keys and values into the cache, rotated by GPT-NeoX's
// rotary embedding at their positions together with q, and attends with
// bottom-right causal masking (PagedInputs.KNew on the CPU,
// PagedDeviceTensors.KNew through LaunchPagedCUDA on the GPU). The
// attention output of a prompt's last token, or of a decode step, makes
// the next token's hidden state. A finished request's pages go back to
// the pool.
//
// It reports tokens a second for prefill and decode separately, over the
// time of their attention calls, and the bytes of K and V those calls
// attend over a second (KV TB/s). Every -check-every steps it checks each
// call of the step, for one sampled sequence and kv head, against the
// float64 references (PagedReference for O and LSE, PagedAppendReference
// for the cache): a difference above the dtype's tolerance exits 1 with
// "check FAILED".
//
// -device cuda runs on GPU 0; without a GPU it says why and runs on the
// CPU reference device instead, as examples/forward does. Kernels compile
// with llc on first use, or come from -bundle files built by fac build
// --paged --mask causal_bottom_right --dim D --dtype bf16.
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/artifact/bundle"
)

func main() {
	c, err := parseFlags(os.Args[1:], os.Stderr)
	if err == flag.ErrHelp {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(2)
	}
	if _, err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line into a config.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.requests, "requests", 24, "requests to serve")
	prompt := fs.String("prompt", "16:96", "prompt tokens of a request: MIN:MAX (drawn uniformly) or N")
	gen := fs.String("gen", "4:24", "tokens a request generates: MIN:MAX or N")
	fs.Float64Var(&c.arrival, "arrival", 0.5, "requests arriving a step, on average (0: all at the start)")
	fs.IntVar(&c.pageSize, "page-size", 16, "keys a page of the KV cache holds")
	fs.IntVar(&c.numPages, "pages", 0, "pages in the KV cache (0: half of what -max-batch of the longest requests could hold)")
	fs.IntVar(&c.heads, "heads", 4, "query heads")
	fs.IntVar(&c.kvHeads, "kv-heads", 2, "kv heads (dividing -heads)")
	fs.IntVar(&c.dim, "dim", 32, "head dim")
	fs.IntVar(&c.hidden, "hidden", 64, "hidden size of the stand-in model")
	fs.IntVar(&c.maxBatch, "max-batch", 8, "requests running at once, at most")
	fs.IntVar(&c.chunk, "chunk", 32, "prompt tokens a request prefills in one step, at most")
	rotary := fs.String("rotary", "neox", "rotary embedding of q and the new keys: neox, gptj or none")
	fs.StringVar(&c.dtype, "dtype", "", "f32, bf16 or f16 (default f32 on the CPU device, bf16 on the GPU)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the requests, the model and the page order")
	fs.IntVar(&c.checkEvery, "check-every", 5, "check the calls of every N-th step against the float64 reference (0: never)")
	fs.StringVar(&c.device, "device", "cpu", "cpu (the reference device) or cuda (GPU 0, else the CPU device)")
	fs.Func("bundle", "an AOT bundle of GPU kernels (fac build --paged ...); repeatable", func(s string) error {
		c.bundles = append(c.bundles, s)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if c.promptMin, c.promptMax, err = parseRange("-prompt", *prompt); err != nil {
		return c, err
	}
	if c.genMin, c.genMax, err = parseRange("-gen", *gen); err != nil {
		return c, err
	}
	if c.rotary, err = fac.ParseRotaryForm(*rotary); err != nil {
		return c, fmt.Errorf("-rotary: %w", err)
	}
	if c.device != "cpu" && c.device != "cuda" {
		return c, fmt.Errorf("-device %q: want cpu or cuda", c.device)
	}
	switch c.dtype {
	case "", "f32", "bf16", "f16":
	default:
		return c, fmt.Errorf("-dtype %q: want f32, bf16 or f16", c.dtype)
	}
	return c, nil
}

// parseRange reads MIN:MAX or N.
func parseRange(flag, s string) (lo, hi int, err error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		b = a
	}
	if lo, err = strconv.Atoi(a); err == nil {
		hi, err = strconv.Atoi(b)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%s %q: want MIN:MAX or N", flag, s)
	}
	return lo, hi, nil
}

// run serves c's requests, prints the report on w and returns the run's
// figures; an error is a failed check or a call the device refused.
func run(c config, w io.Writer) (stats, error) {
	if err := c.validate(); err != nil {
		return stats{}, err
	}
	var gpu *fac.CUDA
	if c.device == "cuda" {
		var err error
		if gpu, err = fac.OpenCUDA(0); err != nil {
			fmt.Fprintf(w, "device cuda: %v\nrunning on the CPU reference device instead\n", err)
			c.device = "cpu"
		}
	}
	if c.dtype == "" {
		c.dtype = "f32"
		if gpu != nil {
			c.dtype = "bf16"
		}
	}
	opts := fac.Options{Mask: "causal_bottom_right", DType: c.dtype}
	if gpu != nil {
		for _, path := range c.bundles {
			b, err := bundle.Read(path)
			if err != nil {
				return stats{}, err
			}
			gpu.AddBundle(b)
		}
		// Compiled for the GPU's arch up front, the forward plans a call
		// as its launch does (the workspaces are sized from that plan).
		opts.Target.Arch = gpu.Arch
	}
	fwd, err := fac.CompileForward(opts, c.dim)
	if err != nil {
		return stats{}, err
	}
	maxLen := c.promptMax + c.genMax - 1
	var cos, sin []float32
	if c.rotary != fac.RotaryNone {
		cos, sin = fac.RotaryTables(maxLen, c.dim, 10000)
	}
	var dev device
	var where string
	if gpu != nil {
		cd, err := newCUDADevice(gpu, fwd, c, cos, sin)
		if err != nil {
			return stats{}, err
		}
		start := time.Now()
		if err := cd.warmup(opts, c, cos, sin); err != nil {
			cd.close()
			return stats{}, err
		}
		dev = cd
		where = fmt.Sprintf("cuda: %s (%s, %d SMs), kernels loaded in %.2g s", gpu.Name, gpu.Arch, gpu.SMs(), time.Since(start).Seconds())
		if fb := fac.ArchFallback(gpu.Arch); fb != "" {
			where += "; " + fb
		}
	} else {
		dev, where = newCPUDevice(fwd, c, cos, sin), "cpu (the reference interpreter)"
	}
	defer dev.close()
	e := &engine{cfg: c, dev: dev, fwd: fwd, cos: cos, sin: sin, tol: tolerances[c.dtype], kvB: 2,
		check: rand.New(rand.NewPCG(c.seed, 0))}
	if c.dtype == "f32" {
		e.kvB = 4
	}
	rng := rand.New(rand.NewPCG(c.seed, 2<<32))
	e.m = newModel(c.hidden, c.heads, c.kvHeads, c.dim, rng)
	e.pool = newPagePool(c.numPages, rng)

	fmt.Fprintf(w, "serve: %d requests, prompts of %s tokens, %s generated each, %g arriving a step (seed %d)\n",
		c.requests, span(c.promptMin, c.promptMax), span(c.genMin, c.genMax), c.arrival, c.seed)
	fmt.Fprintf(w, "model: %d heads, %d kv heads, head dim %d, %s, rotary %v, hidden %d; cache of %d pages × %d keys; batch ≤ %d, prefill chunks ≤ %d tokens\n",
		c.heads, c.kvHeads, c.dim, c.dtype, c.rotary, c.hidden, c.numPages, c.pageSize, c.maxBatch, c.chunk)
	fmt.Fprintf(w, "device: %s\n", where)
	ps := fac.PagedShape{Batch: c.maxBatch, Heads: c.heads, KVHeads: c.kvHeads, SeqQ: 1, PageSize: c.pageSize}
	if plan, err := dev.plan(ps, maxLen); err == nil {
		fmt.Fprintf(w, "decode plan (%d sequences of %d keys): %v\n", c.maxBatch, maxLen, plan)
	}
	if err := e.serve(makeRequests(c)); err != nil {
		return e.st, err
	}
	e.report(w)
	return e.st, nil
}

// span is "lo–hi", or "n" where they are equal.
func span(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}
