package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fac-compiler/fac"
)

// config is what a run serves and on what.
type config struct {
	requests             int
	promptMin, promptMax int     // prompt tokens, drawn uniformly
	genMin, genMax       int     // tokens to generate, drawn uniformly
	arrival              float64 // requests arriving a step, on average (0: all at once)
	pageSize, numPages   int     // numPages 0: half of what maxBatch of the longest requests could hold
	heads, kvHeads, dim  int
	hidden               int // the stand-in model's hidden size
	maxBatch, chunk      int // running requests at most; prefill tokens a request a step at most
	rotary               fac.RotaryForm
	dtype                string // "" : f32 on the CPU device, bf16 on the GPU
	seed                 uint64
	checkEvery           int // check the calls of every N-th step (0: never)
	device               string
	bundles              []string // AOT bundles for the GPU (fac build --paged)

	// tamper, when set, changes each call's O before it is checked (the
	// tests' way to see a check fail).
	tamper func(o []float32)
}

// validate refuses a configuration the loop cannot serve, and fills in
// the page count.
func (c *config) validate() error {
	switch {
	case c.requests < 1:
		return fmt.Errorf("-requests %d: want at least 1", c.requests)
	case c.promptMin < 1 || c.promptMax < c.promptMin:
		return fmt.Errorf("-prompt %d:%d: want 1 ≤ MIN ≤ MAX", c.promptMin, c.promptMax)
	case c.genMin < 1 || c.genMax < c.genMin:
		return fmt.Errorf("-gen %d:%d: want 1 ≤ MIN ≤ MAX", c.genMin, c.genMax)
	case c.arrival < 0:
		return fmt.Errorf("-arrival %g: want a rate ≥ 0", c.arrival)
	case c.pageSize < 1:
		return fmt.Errorf("-page-size %d: want at least 1", c.pageSize)
	case c.heads < 1 || c.kvHeads < 1 || c.heads%c.kvHeads != 0:
		return fmt.Errorf("-heads %d -kv-heads %d: want kv heads that divide the query heads", c.heads, c.kvHeads)
	case c.dim < 2 || c.dim%2 != 0:
		return fmt.Errorf("-dim %d: want an even head dim (rotary pairs columns)", c.dim)
	case c.hidden < 1:
		return fmt.Errorf("-hidden %d: want at least 1", c.hidden)
	case c.maxBatch < 1 || c.chunk < 1:
		return fmt.Errorf("-max-batch %d -chunk %d: want at least 1 each", c.maxBatch, c.chunk)
	case c.checkEvery < 0:
		return fmt.Errorf("-check-every %d: want 0 (never) or more", c.checkEvery)
	case c.numPages < 0:
		return fmt.Errorf("-pages %d: want 0 (a default) or more", c.numPages)
	}
	most := pagesFor(c.promptMax+c.genMax-1, c.pageSize)
	if c.numPages == 0 {
		c.numPages = max(most, c.maxBatch*most/2)
	}
	if c.numPages < most {
		return fmt.Errorf("-pages %d: the longest request (%d prompt and %d generated tokens, %d keys in the cache) needs %d pages of %d keys",
			c.numPages, c.promptMax, c.genMax, c.promptMax+c.genMax-1, most, c.pageSize)
	}
	return nil
}

// pagesFor is the pages n keys take.
func pagesFor(n, pageSize int) int { return (n + pageSize - 1) / pageSize }

// request is one sequence being served.
type request struct {
	id          int
	arrive      int // the step it arrives at
	prompt, gen int // prompt tokens; tokens to generate
	rng         *rand.Rand
	length      int       // keys in the cache (its cache_seqlens)
	prefilled   int       // prompt tokens in the cache
	generated   int       // tokens generated: the first by the prefill's last chunk, the others by decode steps
	last        []float32 // the last generated token's hidden state, which the next decode step feeds
	pages       []int32   // its pages, in order: key j is in pages[j / page_size]
	reserved    int       // pages it may take: for prompt + gen − 1 keys (the last token is never fed)
}

// makeRequests draws the requests of a run: prompt and generation lengths
// and arrival steps (a Poisson process of rate c.arrival a step), each
// with a random stream of its own for its prompt's tokens.
func makeRequests(c config) []*request {
	rng := rand.New(rand.NewPCG(c.seed, 1))
	reqs := make([]*request, c.requests)
	t := 0.0
	for i := range reqs {
		if c.arrival > 0 && i > 0 {
			t += rng.ExpFloat64() / c.arrival
		}
		r := &request{id: i, arrive: int(t), prompt: c.promptMin + rng.IntN(c.promptMax-c.promptMin+1), gen: c.genMin + rng.IntN(c.genMax-c.genMin+1)}
		r.rng = rand.New(rand.NewPCG(c.seed, uint64(i)+2))
		r.reserved = pagesFor(r.prompt+r.gen-1, c.pageSize)
		reqs[i] = r
	}
	return reqs
}

// device runs the attention of the loop's calls: on the CPU reference
// device over a cache in host memory, or on the GPU over a cache in device
// memory.
type device interface {
	// attend appends c's keys and values (rotated, with q) at c.lens and
	// attends: O [B, H, Sq, D] and LSE [B, H, Sq], and the time the call
	// took. c.lens grows by Sq in place.
	attend(c *call) (o, lse []float32, took time.Duration, err error)
	// pages copies pages of the cache to the host: [len(ids), page_size,
	// Hkv, D] each of k and v, as float32.
	pages(ids []int32) (k, v []float32, err error)
	// plan is the plan of a call of shape ps with caches up to maxLen
	// keys, for the report.
	plan(ps fac.PagedShape, maxLen int) (fac.DecodePlan, error)
	close()
}

// call is one paged launch: Sq new tokens for each of its requests.
type call struct {
	decode bool
	reqs   []*request
	ps     fac.PagedShape
	// q [B, H, Sq, D], kNew and vNew [B, Sq, Hkv, D]: the projections of
	// the new tokens.
	q, kNew, vNew []float32
	table         []int32 // [B, maxPages]
	maxPages      int
	lens          []int32 // [B]: the lengths before the call, grown by it
}

// stats are what a run did.
type stats struct {
	steps                       int // steps that ran a call
	finished                    int
	prefillTokens, decodeTokens int // query tokens of prefill chunks and of decode steps
	generated                   int
	prefillCalls, decodeCalls   int
	prefillTime, decodeTime     time.Duration
	prefillKV, decodeKV         float64 // bytes of K and V the calls attend over
	peakBatch, peakPages        int
	pageWaits                   int // steps where the next request waited for pages
	pagesLeft                   int // pages held when the run ended (0)
	checks                      int // sampled calls checked (all passed)
	errO, errLSE, errCache      float64
	wall                        time.Duration
}

// engine is the continuous-batching loop.
type engine struct {
	cfg   config
	dev   device
	fwd   *fac.Forward // the compiled kernel (its references check calls)
	m     *model
	pool  *pagePool
	cos   []float32 // RoPE's tables [positions, dim/2]
	sin   []float32
	tol   tolerance
	kvB   int // bytes of one key or value element in the cache
	check *rand.Rand
	st    stats
}

// tolerance is a check's bound: O relative to its largest |ref|, LSE
// absolute, the cache relative to max(largest |ref|, 1).
type tolerance struct{ o, lse float64 }

// tolerances are fac run's.
var tolerances = map[string]tolerance{
	"f32":  {o: 1e-4, lse: 1e-4},
	"bf16": {o: 2e-2, lse: 1e-2},
	"f16":  {o: 5e-3, lse: 1e-2},
}

// serve runs the loop over the requests (in order of arrival).
func (e *engine) serve(reqs []*request) error {
	c := e.cfg
	start := time.Now()
	var waiting, running []*request
	next := 0
	for step := 0; ; step++ {
		for next < len(reqs) && reqs[next].arrive <= step {
			waiting = append(waiting, reqs[next])
			next++
		}
		// Admission, first come first served: a request whose pages are
		// not free waits, and so do those behind it.
		for len(waiting) > 0 && len(running) < c.maxBatch {
			r := waiting[0]
			if !e.pool.reserve(r.reserved) {
				e.st.pageWaits++
				break
			}
			running, waiting = append(running, r), waiting[1:]
		}
		if len(running) == 0 {
			if len(waiting) > 0 {
				// validate saw to it that the whole cache holds any request.
				return fmt.Errorf("step %d: request %d cannot be admitted into an empty cache of %d pages", step, waiting[0].id, c.numPages)
			}
			if next == len(reqs) {
				break
			}
			step = reqs[next].arrive - 1 // idle until the next arrival
			continue
		}
		e.st.peakBatch = max(e.st.peakBatch, len(running))
		if err := e.step(step, running); err != nil {
			return err
		}
		e.st.steps++
		e.st.peakPages = max(e.st.peakPages, e.pool.inUse())
		running = slices.DeleteFunc(running, func(r *request) bool {
			if r.generated < r.gen {
				return false
			}
			e.pool.release(r.pages, r.reserved-len(r.pages))
			e.st.finished++
			return true
		})
	}
	e.st.wall = time.Since(start)
	e.st.pagesLeft = e.pool.inUse()
	return nil
}

// step runs one step of the running requests: a call for each prefill
// chunk length (a paged call has one query length for all its sequences)
// and one for the decoding requests.
func (e *engine) step(step int, running []*request) error {
	chunks := map[int][]*request{}
	var decoding []*request
	for _, r := range running {
		if r.prefilled < r.prompt {
			n := min(e.cfg.chunk, r.prompt-r.prefilled)
			chunks[n] = append(chunks[n], r)
		} else {
			decoding = append(decoding, r)
		}
	}
	checked := e.cfg.checkEvery > 0 && step%e.cfg.checkEvery == 0
	for _, n := range slices.Sorted(maps.Keys(chunks)) {
		if err := e.run(step, chunks[n], n, false, checked); err != nil {
			return err
		}
	}
	if len(decoding) > 0 {
		return e.run(step, decoding, 1, true, checked)
	}
	return nil
}

// run makes, runs, checks (where checked) and consumes the call of sq new
// tokens for each of reqs.
func (e *engine) run(step int, reqs []*request, sq int, decode, checked bool) error {
	c, err := e.makeCall(reqs, sq, decode)
	if err != nil {
		return err
	}
	var s *sample
	if checked {
		if s, err = e.sample(c); err != nil {
			return err
		}
	}
	o, lse, took, err := e.dev.attend(c)
	if err != nil {
		return fmt.Errorf("step %d, %s: %w", step, c.name(), err)
	}
	for b, r := range reqs {
		if int(c.lens[b]) != r.length+sq {
			return fmt.Errorf("step %d, %s: request %d's cache length is %d after the call, want %d", step, c.name(), r.id, c.lens[b], r.length+sq)
		}
	}
	if e.cfg.tamper != nil {
		e.cfg.tamper(o)
	}
	if s != nil {
		if err := e.verify(c, s, o, lse); err != nil {
			return fmt.Errorf("step %d, %s: %w", step, c.name(), err)
		}
	}
	kv := 0.0
	for _, n := range c.lens {
		kv += float64(int(n) * e.cfg.kvHeads * 2 * e.cfg.dim * e.kvB)
	}
	tokens := len(reqs) * sq
	if decode {
		e.st.decodeCalls++
		e.st.decodeTokens += tokens
		e.st.decodeTime += took
		e.st.decodeKV += kv
	} else {
		e.st.prefillCalls++
		e.st.prefillTokens += tokens
		e.st.prefillTime += took
		e.st.prefillKV += kv
	}
	// The last position of a decode step, or of the chunk that ends a
	// prompt, makes the next token.
	h, d := e.cfg.heads, e.cfg.dim
	parallel(len(reqs), func(b int) {
		r := reqs[b]
		r.length += sq
		if !decode {
			r.prefilled += sq
			if r.prefilled < r.prompt {
				return
			}
		}
		r.last = e.m.next(o[(b*h*sq+sq-1)*d:], sq*d)
	})
	for _, r := range reqs {
		if decode || r.prefilled == r.prompt {
			r.generated++
			e.st.generated++
		}
	}
	return nil
}

// makeCall takes the pages reqs' new tokens need and projects the tokens:
// the next sq tokens of each prompt, or each request's last generated
// token (decode).
func (e *engine) makeCall(reqs []*request, sq int, decode bool) (*call, error) {
	cfg := e.cfg
	B, H, Hkv, D := len(reqs), cfg.heads, cfg.kvHeads, cfg.dim
	c := &call{decode: decode, reqs: reqs, lens: make([]int32, B),
		ps: fac.PagedShape{Batch: B, Heads: H, KVHeads: Hkv, SeqQ: sq, PageSize: cfg.pageSize}}
	tokens := make([][]float32, B*sq)
	for b, r := range reqs {
		for len(r.pages)*cfg.pageSize < r.length+sq {
			pg, err := e.pool.take()
			if err != nil {
				return nil, err
			}
			r.pages = append(r.pages, pg)
		}
		c.maxPages = max(c.maxPages, len(r.pages))
		c.lens[b] = int32(r.length)
		for s := range sq {
			if decode {
				tokens[b*sq+s] = r.last
			} else {
				tokens[b*sq+s] = e.m.token(r.rng)
			}
		}
	}
	c.table = make([]int32, B*c.maxPages)
	for b, r := range reqs {
		copy(c.table[b*c.maxPages:], r.pages)
	}
	c.q = make([]float32, B*H*sq*D)
	c.kNew, c.vNew = make([]float32, B*sq*Hkv*D), make([]float32, B*sq*Hkv*D)
	parallel(B*sq, func(i int) {
		b, s := i/sq, i%sq
		kv := (b*sq + s) * Hkv * D
		e.m.project(tokens[i], c.q[(b*H*sq+s)*D:], sq*D, c.kNew[kv:], c.vNew[kv:], D)
	})
	return c, nil
}

func (c *call) name() string {
	if c.decode {
		return fmt.Sprintf("decode call of %d sequences", c.ps.Batch)
	}
	return fmt.Sprintf("prefill call of %d sequences × %d tokens", c.ps.Batch, c.ps.SeqQ)
}

// sample is what a check of a call needs from before it: one sequence
// (b) and one kv head (g) with its group of query heads, and that
// sequence's pages as they were.
type sample struct {
	b, g   int
	length int
	k, v   []float32 // [pages, page_size, Hkv, D]
}

// sample picks the sequence and kv head a check of c looks at and copies
// the sequence's pages before the call changes them.
func (e *engine) sample(c *call) (*sample, error) {
	s := &sample{b: e.check.IntN(c.ps.Batch), g: e.check.IntN(e.cfg.kvHeads)}
	s.length = int(c.lens[s.b])
	var err error
	s.k, s.v, err = e.dev.pages(c.reqs[s.b].pages)
	return s, err
}

// verify checks the sampled sequence and kv head of call c against the
// float64 references: O and LSE of the group's query heads
// (PagedReference) and the sequence's pages after the append
// (PagedAppendReference: the new rows rotated, the others unchanged), on
// a cache of that sequence's pages alone.
func (e *engine) verify(c *call, s *sample, o, lse []float32) error {
	cfg := e.cfg
	H, Hkv, D, sq, P := cfg.heads, cfg.kvHeads, cfg.dim, c.ps.SeqQ, cfg.pageSize
	group := H / Hkv
	r := c.reqs[s.b]
	n := len(r.pages)
	// head g of pages [n, P, Hkv, D] as a cache of one kv head [n, P, 1, D].
	head := func(x []float32) []float32 {
		out := make([]float32, n*P*D)
		for row := range n * P {
			copy(out[row*D:][:D], x[(row*Hkv+s.g)*D:][:D])
		}
		return out
	}
	table := make([]int32, n)
	for j := range table {
		table[j] = int32(j)
	}
	in := fac.PagedInputs{
		Q:      make([]float32, group*sq*D),
		KCache: head(s.k), VCache: head(s.v), PageTable: table, CacheSeqlens: []int32{int32(s.length)},
		KNew: make([]float32, sq*D), VNew: make([]float32, sq*D),
		Rotary: cfg.rotary, RotaryCos: e.cos, RotarySin: e.sin,
	}
	if cfg.rotary == fac.RotaryNone {
		in.RotaryCos, in.RotarySin = nil, nil
	}
	copy(in.Q, c.q[(s.b*H+s.g*group)*sq*D:][:group*sq*D])
	for t := range sq {
		at := ((s.b*sq+t)*Hkv + s.g) * D
		copy(in.KNew[t*D:][:D], c.kNew[at:][:D])
		copy(in.VNew[t*D:][:D], c.vNew[at:][:D])
	}
	ps := fac.PagedShape{Batch: 1, Heads: group, KVHeads: 1, SeqQ: sq, PageSize: P}
	ro, rlse, err := e.fwd.PagedReference(in, ps)
	if err != nil {
		return err
	}
	rk, rv, rlens, err := e.fwd.PagedAppendReference(in, ps)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("request %d (sequence %d of the call, %d keys before it), kv head %d", r.id, s.b, s.length, s.g)
	if int(rlens[0]) != int(c.lens[s.b]) {
		return fmt.Errorf("check FAILED for %s: cache length %d after the call, the reference's %d", what, c.lens[s.b], rlens[0])
	}
	gotO := o[(s.b*H+s.g*group)*sq*D:][:group*sq*D]
	gotLSE := lse[(s.b*H+s.g*group)*sq:][:group*sq]
	errO := relErr(gotO, ro, 0)
	errLSE := 0.0
	for i, x := range gotLSE {
		d := math.Abs(float64(x) - rlse[i])
		if math.IsInf(rlse[i], 0) && float64(x) == rlse[i] {
			d = 0
		}
		if d > errLSE || math.IsNaN(d) {
			errLSE = d
		}
	}
	k, v, err := e.dev.pages(r.pages)
	if err != nil {
		return err
	}
	errCache := max(relErr(head(k), rk, 1), relErr(head(v), rv, 1))
	e.st.errO, e.st.errLSE, e.st.errCache = max(e.st.errO, errO), max(e.st.errLSE, errLSE), max(e.st.errCache, errCache)
	var why []string
	if !(errO <= e.tol.o) {
		why = append(why, fmt.Sprintf("O's relative error %.3g > %.3g", errO, e.tol.o))
	}
	if !(errLSE <= e.tol.lse) {
		why = append(why, fmt.Sprintf("LSE's error %.3g > %.3g", errLSE, e.tol.lse))
	}
	if !(errCache <= e.tol.o) {
		why = append(why, fmt.Sprintf("the cache's relative error %.3g > %.3g", errCache, e.tol.o))
	}
	if len(why) > 0 {
		return fmt.Errorf("check FAILED against the float64 reference for %s: %v", what, why)
	}
	e.st.checks++
	return nil
}

// relErr is max |got − want| over max(max |want|, floor); NaN anywhere
// makes it NaN, which fails every bound.
func relErr(got []float32, want []float64, floor float64) float64 {
	maxAbs, maxRef := 0.0, floor
	for i, g := range got {
		d := math.Abs(float64(g) - want[i])
		if d > maxAbs || math.IsNaN(d) {
			maxAbs = d
		}
		maxRef = math.Max(maxRef, math.Abs(want[i]))
	}
	if maxRef == 0 {
		return maxAbs
	}
	return maxAbs / maxRef
}

// report prints the run's figures.
func (e *engine) report(w io.Writer) {
	st, c := e.st, e.cfg
	fmt.Fprintf(w, "ran %d steps: %d prefill calls, %d decode calls; batch up to %d, pages up to %d of %d, %d steps where the next request waited for pages\n",
		st.steps, st.prefillCalls, st.decodeCalls, st.peakBatch, st.peakPages, c.numPages, st.pageWaits)
	phase := func(name string, tokens int, t time.Duration, kv float64) {
		secs := t.Seconds()
		if tokens == 0 || secs == 0 {
			fmt.Fprintf(w, "%s: no tokens\n", name)
			return
		}
		fmt.Fprintf(w, "%s: %d tokens in %.3g s of attention: %.4g tokens/s, KV %.3g TB/s\n", name, tokens, secs, float64(tokens)/secs, kv/1e12/secs)
	}
	phase("prefill", st.prefillTokens, st.prefillTime, st.prefillKV)
	phase("decode", st.decodeTokens, st.decodeTime, st.decodeKV)
	fmt.Fprintf(w, "generated %d tokens for %d requests in %.3g s\n", st.generated, st.finished, st.wall.Seconds())
	if c.checkEvery == 0 {
		fmt.Fprintln(w, "checks: off")
		return
	}
	fmt.Fprintf(w, "checks: %d sampled calls passed against the float64 reference (max error: O %.2g relative, LSE %.2g, cache %.2g relative; tolerance for %s: %.3g, %.3g)\n",
		st.checks, st.errO, st.errLSE, st.errCache, e.dtype(), e.tol.o, e.tol.lse)
}

func (e *engine) dtype() string { return cmp.Or(e.fwd.Options().DType, "f32") }
