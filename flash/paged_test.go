package flash

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/runtime/cuda"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// pagedSrc is a user mask that reads h and both lengths: each head looks
// back its own distance from the bottom-right diagonal, so its block-mask
// rows differ by head and packed tiles give way to one head per tile.
const pagedSrc = `
mask paged_lookback(b, h, q_idx, kv_idx) {
    let qk = q_idx + seqlen_k - seqlen_q
    return kv_idx <= qk && qk - kv_idx < 20 + 37 * h
}
`

// pagedCache makes a shuffled paged cache for lengths lens: sequence 1
// shares sequence 0's first pages (a common prefix), every other page is
// its own, and the pages lie in a random order.
func pagedCache(rng *rand.Rand, lens []int32, pageSize, hkv, d, dv int) PagedInputs {
	maxPages := 1
	for _, n := range lens {
		maxPages = max(maxPages, (int(n)+pageSize-1)/pageSize)
	}
	table := make([]int32, len(lens)*maxPages)
	for i := range table {
		table[i] = -1 // never read: past every length
	}
	next := 0
	for b, n := range lens {
		for j := 0; j < (int(n)+pageSize-1)/pageSize; j++ {
			if b == 1 && j < (int(min(n, lens[0])))/pageSize {
				table[b*maxPages+j] = table[j]
				continue
			}
			table[b*maxPages+j] = int32(next)
			next++
		}
	}
	numPages := next + 1 // one unused page
	perm := rng.Perm(numPages)
	for i, p := range table {
		if p >= 0 {
			table[i] = int32(perm[p])
		}
	}
	return PagedInputs{
		KCache:       randF32(rng, numPages*pageSize*hkv*d),
		VCache:       randF32(rng, numPages*pageSize*hkv*dv),
		PageTable:    table,
		CacheSeqlens: lens,
	}
}

// TestPagedCPU checks flash_fwd_paged + flash_fwd_combine on the CPU device
// against the dense reference of each sequence's gathered pages: page
// sizes 1 to 256 (keys gathered by page at 1 and 8, 4 and 2 pages per
// 64-key tile at 16 and 32, a page per tile from 64, and 16-key tiles on
// 16-key pages), shuffled and shared pages,
// unequal lengths (0 and 1 among them), GQA packed and not, splits auto
// and forced, stdlib and user masks, with and without sinks (a sequence
// of no keys then gets LSE = its head's sink, not -inf).
func TestPagedCPU(t *testing.T) {
	const H, Hkv, D = 8, 2, 32
	lens := []int32{300, 170, 0, 1, 65}
	type run struct {
		mask     string
		pageSize int
		sq       int
		pack     PackGQA
		splits   int
		dimV     int
		blockN   string // DecodeConsts' BLOCK_N ("": the default 64)
		sinks    bool
	}
	var runs []run
	for _, ps := range []int{1, 8, 16, 32, 64, 256} {
		runs = append(runs, run{mask: "causal_bottom_right", pageSize: ps, sq: 3})
	}
	runs = append(runs,
		run{mask: "none", pageSize: 16, sq: 1},
		run{mask: "none", pageSize: 64, sq: 2, pack: PackGQAOff, splits: 3},
		run{mask: "sliding_window(40, 0)", pageSize: 16, sq: 4, splits: 2},
		run{mask: "causal_bottom_right", pageSize: 16, sq: 5, pack: PackGQAOn, splits: 4, dimV: 16},
		run{mask: "paged_lookback", pageSize: 16, sq: 3, splits: 2},
		run{mask: "causal_bottom_right", pageSize: 16, sq: 3, splits: 3, blockN: "16"}, // a page per 16-key tile
		run{mask: "sliding_window(40, 0)", pageSize: 128, sq: 2, splits: 2},
		run{mask: "causal_bottom_right", pageSize: 16, sq: 3, splits: 3, sinks: true},
		run{mask: "sliding_window(40, 0)", pageSize: 1, sq: 2, pack: PackGQAOff, sinks: true},
	)
	for _, r := range runs {
		name := fmt.Sprintf("%s/page%d/sq%d/n%s/sinks=%v", strings.NewReplacer("(", "", ")", "", ", ", "_").Replace(r.mask), r.pageSize, r.sq, r.blockN, r.sinks)
		t.Run(name, func(t *testing.T) {
			opts := Options{Mask: r.mask, NumSplits: r.splits, PackGQA: r.pack, DimV: r.dimV, Sinks: r.sinks, Sources: map[string]string{"paged.fa": pagedSrc}}
			if r.blockN != "" {
				opts.DecodeConsts = map[string]string{"BLOCK_N": r.blockN}
			}
			f, err := CompileForward(opts, D)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(r.pageSize), uint64(r.sq)))
			dv := D
			if r.dimV > 0 {
				dv = r.dimV
			}
			in := pagedCache(rng, lens, r.pageSize, Hkv, D, dv)
			ps := PagedShape{Batch: len(lens), Heads: H, KVHeads: Hkv, SeqQ: r.sq, PageSize: r.pageSize}
			in.Q = randF32(rng, ps.Batch*H*r.sq*D)
			if r.sinks {
				in.Sinks = randF32(rng, H)
				in.Sinks[0], in.Sinks[1] = 6, float32(math.Inf(-1))
			}
			plan, err := f.PagedPlan(ps, 300, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			switch {
			case r.pageSize%plan.BlockN == 0:
				want = 1
			case plan.BlockN == 2*r.pageSize || plan.BlockN == 4*r.pageSize:
				want = plan.BlockN / r.pageSize
			}
			if plan.TilePages != want {
				t.Errorf("page size %d, BLOCK_N %d: TilePages %d, want %d", r.pageSize, plan.BlockN, plan.TilePages, want)
			}
			o, lse, err := f.RunPagedCPU(in, ps)
			if err != nil {
				t.Fatal(err)
			}
			wo, wlse, err := f.PagedReference(in, ps)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(o, wo); d > 2e-5 {
				t.Errorf("page size %d: O differs by %g", r.pageSize, d)
			}
			if d := maxDiff(lse, wlse); d > 2e-5 || math.IsNaN(d) {
				t.Errorf("page size %d: LSE differs by %g", r.pageSize, d)
			}
			// The empty cache's rows keep nothing: LSE is -inf, or the
			// head's sink.
			per := H * r.sq
			for i := 2 * per; i < 3*per; i++ {
				want := math.Inf(-1)
				if r.sinks {
					want = float64(in.Sinks[(i-2*per)/r.sq])
				}
				if got := float64(lse[i]); got != want && math.Abs(got-want) > 2e-5 {
					t.Fatalf("sequence of no keys: LSE %g, want %g", got, want)
				}
			}
		})
	}
}

// TestPagedShortTail: sequences no longer than a page, so the page table
// has one column, and 64-key tiles whose second half lies past every
// sequence's end: the kernel must not read the table past a sequence's
// row (past the last row, there is no memory).
func TestPagedShortTail(t *testing.T) {
	const H, D = 4, 16
	f, err := CompileForward(Options{Mask: "causal_bottom_right", NumSplits: 2}, D)
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range []int{16, 64, 128} {
		rng := rand.New(rand.NewPCG(uint64(ps), 3))
		lens := []int32{int32(ps), int32(ps / 2), 1}
		in := pagedCache(rng, lens, ps, H, D, D)
		shape := PagedShape{Batch: len(lens), Heads: H, SeqQ: 2, PageSize: ps}
		in.Q = randF32(rng, shape.Batch*H*2*D)
		o, lse, err := f.RunPagedCPU(in, shape)
		if err != nil {
			t.Fatalf("page size %d: %v", ps, err)
		}
		wo, wlse, err := f.PagedReference(in, shape)
		if err != nil {
			t.Fatal(err)
		}
		if d := max(maxDiff(o, wo), maxDiff(lse, wlse)); d > 2e-5 || math.IsNaN(d) {
			t.Errorf("page size %d: differs from the reference by %g", ps, d)
		}
	}
}

// TestPagedErrors checks that bad paged inputs are refused with the
// offending value named.
func TestPagedErrors(t *testing.T) {
	f, err := CompileForward(Options{Mask: "causal_bottom_right"}, 16)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	good := func() (PagedInputs, PagedShape) {
		in := pagedCache(rng, []int32{20, 5}, 16, 1, 16, 16)
		in.Q = randF32(rng, 2*2*16)
		return in, PagedShape{Batch: 2, Heads: 2, KVHeads: 1, SeqQ: 1, PageSize: 16}
	}
	for _, c := range []struct {
		edit func(*PagedInputs, *PagedShape)
		want string
	}{
		{func(in *PagedInputs, ps *PagedShape) { ps.PageSize = 0 }, "page size 0"},
		{func(in *PagedInputs, ps *PagedShape) { in.CacheSeqlens = []int32{20, 33} }, "cache_seqlens[1] = 33"},
		{func(in *PagedInputs, ps *PagedShape) { in.CacheSeqlens = []int32{20} }, "cache_seqlens has 1 elements"},
		{func(in *PagedInputs, ps *PagedShape) { in.PageTable[0] = 99 }, "page_table[0, 0] = 99"},
		{func(in *PagedInputs, ps *PagedShape) { in.VCache = in.VCache[1:] }, "v_cache has"},
		{func(in *PagedInputs, ps *PagedShape) { in.Q = in.Q[1:] }, "q has"},
	} {
		in, ps := good()
		c.edit(&in, &ps)
		if _, _, err := f.RunPagedCPU(in, ps); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error with %q, got %v", c.want, err)
		}
	}
	// Packed tiles read one head's block-mask rows: a mask reading h
	// cannot be packed on request.
	on, err := CompileForward(Options{Mask: "paged_lookback", PackGQA: PackGQAOn, Sources: map[string]string{"paged.fa": pagedSrc}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	in, ps := good()
	if _, _, err := on.RunPagedCPU(in, ps); err == nil || !strings.Contains(err.Error(), "reads h") {
		t.Errorf("PackGQA on with a mask reading h: %v", err)
	}
	alibi, err := CompileForward(Options{Score: "alibi"}, 16)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := alibi.RunPagedCPU(in, ps); err == nil || !strings.Contains(err.Error(), "[slopes]") {
		t.Errorf("alibi: %v", err)
	}
	sinks, err := CompileForward(Options{Sinks: true}, 16)
	if err != nil {
		t.Fatal(err)
	}
	// A sinks forward takes one sink per head, and a plain one none.
	if _, _, err := sinks.RunPagedCPU(in, ps); err == nil || !strings.Contains(err.Error(), "want one per head") {
		t.Errorf("sinks without sinks: %v", err)
	}
	in.Sinks = []float32{1}
	if _, _, err := f.RunPagedCPU(in, ps); err == nil || !strings.Contains(err.Error(), "compiled without them") {
		t.Errorf("sinks on a plain forward: %v", err)
	}
}

// TestAfterStreamRunsLaterAdditions: a launch defers the freeing of what
// it allocates before allocating it, so the deferred run must see what is
// added after the defer (without a driver, the stream's wait fails and
// the frees still run).
func TestAfterStreamRunsLaterAdditions(t *testing.T) {
	ran := 0
	func() {
		var after afterStream
		defer after.run(cuda.Stream{})
		after = append(after, func() { ran++ }, func() { ran++ })
	}()
	if ran != 2 {
		t.Fatalf("%d of 2 frees ran", ran)
	}
}

// TestPagedLaunchBuffers: LaunchPagedCUDA names a device buffer for every
// buffer of its kernels' calls (d.Launch refuses a null one, which only a
// GPU would show), appending or not, with or without rotary tables; an
// appending launch's q is the workspace's, and a plain launch's the
// caller's even with a workspace made for appending ones; a workspace
// without q is refused for an appending launch. Merged in place
// (fused_combine), the paged kernel's counters are the workspace's.
func TestPagedLaunchBuffers(t *testing.T) {
	ps := PagedShape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 1, PageSize: 16}
	for i, dev := range []PagedDeviceTensors{
		{},
		{KNew: 2, VNew: 2},
		{KNew: 2, VNew: 2, Rotary: RotaryGPTJ, RotaryDim: 8, RotaryCos: 2, RotarySin: 2, RotaryPositions: 100},
		{},
		{KNew: 2, VNew: 2},
	} {
		opts := Options{Mask: "causal_bottom_right"}
		if i >= 3 {
			opts.DecodeConsts = map[string]string{"fused_combine": "true"}
		}
		f, err := CompileForward(opts, 16)
		if err != nil {
			t.Fatal(err)
		}
		dev.Q, dev.KCache, dev.VCache, dev.PageTable, dev.O, dev.LSE = 1, 1, 1, 1, 1, 1
		dev.NumPages, dev.MaxPages, dev.CacheSeqlens = 3, 3, []int32{40, 0}
		c, err := f.checkPagedDevice(dev, ps)
		if err != nil {
			t.Fatal(err)
		}
		b, err := f.bindPaged(c, 0, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		kernels := 2 // the paged kernel and the combine
		if i >= 3 {
			kernels = 1
		}
		if c.app != nil {
			kernels++ // kv_append
		}
		if b.plan.FusedCombine != (i >= 3) || len(b.calls) != kernels {
			t.Errorf("fused_combine %v, appends %v: plan %v with %d kernels", i >= 3, c.app != nil, b.plan, len(b.calls))
		}
		lists := map[string]uintptr{}
		for name := range b.lists {
			lists[name] = 1
		}
		ws := &workspace{names: attention.PagedAppend.Workspace, ptrs: []cuda.DevicePtr{1, 1, 1, 3}}
		ptrs := pagedPtrs(dev, ws, lists, c.app != nil)
		for _, call := range b.calls {
			for _, buf := range call.Buffers {
				if ptrs[buf.Name] == 0 {
					t.Errorf("appends %v: kernel %s: no device buffer for %s", c.app != nil, call.Kernel, buf.Name)
				}
			}
		}
		if want := map[bool]uintptr{false: 1, true: 3}[c.app != nil]; ptrs["q"] != want {
			t.Errorf("appends %v: q is buffer %d, want %d", c.app != nil, ptrs["q"], want)
		}
	}
	// A split-KV workspace (no q) is refused for an appending launch,
	// and serves a plain one.
	dense := &workspace{names: attention.SplitKV.Workspace, lens: []int{100, 100, 100}}
	if _, err := dense.orNew(attention.PagedAppend.Workspace, []int{1, 1, 1, 1}, "an appending call", nil); err == nil || !strings.Contains(err.Error(), "needs [o_partial lse_partial split_counters q]") {
		t.Errorf("a workspace without q for an appending call: %v", err)
	}
	if _, err := dense.orNew(attention.Paged.Workspace, []int{1, 1, 1}, "a plain call", nil); err != nil {
		t.Errorf("a split-KV workspace for a plain paged call: %v", err)
	}
}
