package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac"
)

// appendCase is one appending paged call: sq rows appended to sequences
// of lengths old, rotated in form rotary over rd columns (0: all of d), in
// pages of pageSize keys (docs/decoding.md#appending-to-the-cache).
type appendCase struct {
	mask     string
	d, dimV  int // dimV 0: d
	pageSize int
	sq       int
	old      []int32
	rotary   fac.RotaryForm
	rd       int
	dtype    string
	pack     fac.PackGQA
	splits   int
	sinks    bool
}

func (c appendCase) String() string {
	name := fmt.Sprintf("d%d/%s/page%d/sq%d/%v%d/old%v", c.d, strings.NewReplacer("(", "", ")", "", ", ", "_").Replace(c.mask),
		c.pageSize, c.sq, c.rotary, c.rd, c.old)
	if c.sinks {
		name += "/sinks"
	}
	return name
}

// opts are the case's forward options (pagedOpts': the paged suites'
// sources).
func (c appendCase) opts() fac.Options {
	o := pagedOpts(c.mask, c.dtype, c.splits)
	o.DimV, o.PackGQA, o.Sinks = c.dimV, c.pack, c.sinks
	return o
}

// appendInputs makes the inputs of case c with heads and hkv heads:
// pagedCache's pages for the lengths after the append (shuffled, a spare
// page, -1 past each sequence's pages), except that sequence 1 shares
// only the pages both sequences fill before it (the appended rows need
// rows of their own); random q, k_new and v_new; with a rotary form,
// RoPE's tables for every position the call reaches and a few more. Every
// float is rounded to the dtype, as a cache of that dtype holds it.
func appendInputs(c appendCase, heads, hkv int, seed uint64) (fac.PagedInputs, fac.PagedShape) {
	dv := c.d
	if c.dimV > 0 {
		dv = c.dimV
	}
	final := make([]int32, len(c.old))
	for b, n := range c.old {
		final[b] = n + int32(c.sq)
	}
	in, ps := pagedCache(final, c.pageSize, heads, hkv, c.sq, c.d, seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	randn := normals(rng)
	page := c.pageSize * hkv
	numPages := len(in.KCache) / (page * c.d)
	in.VCache = randn(numPages * page * dv)
	maxPages := len(in.PageTable) / ps.Batch
	for j := int(min(c.old[0], c.old[1])) / c.pageSize; j < maxPages; j++ {
		if pg := in.PageTable[j]; pg >= 0 && in.PageTable[maxPages+j] == pg {
			in.PageTable[maxPages+j] = int32(numPages)
			numPages++
			in.KCache, in.VCache = append(in.KCache, randn(page*c.d)...), append(in.VCache, randn(page*dv)...)
		}
	}
	in.CacheSeqlens = slices.Clone(c.old)
	if c.sinks {
		in.Sinks = randn(heads)
	}
	in.KNew, in.VNew = randn(ps.Batch*c.sq*hkv*c.d), randn(ps.Batch*c.sq*hkv*dv)
	if c.rotary != fac.RotaryNone {
		rd := c.rd
		if rd == 0 {
			rd = c.d
		}
		positions := int(slices.Max(final)) + 5
		in.Rotary, in.RotaryDim = c.rotary, c.rd
		in.RotaryCos, in.RotarySin = fac.RotaryTables(positions, rd, 10000)
	}
	if c.dtype != "" && c.dtype != "f32" {
		for _, xs := range [][]float32{in.Q, in.KCache, in.VCache, in.KNew, in.VNew, in.RotaryCos, in.RotarySin} {
			copy(xs, roundInputs(fac.Inputs{Q: xs}, c.dtype).Q)
		}
	}
	return in, ps
}

// beforeCall copies what an appending call updates in place.
func beforeCall(in fac.PagedInputs) fac.PagedInputs {
	in.KCache, in.VCache, in.CacheSeqlens = slices.Clone(in.KCache), slices.Clone(in.VCache), slices.Clone(in.CacheSeqlens)
	return in
}

// checkAppend checks an appending call that left in (o and lse its
// outputs; before its inputs as they were) against PagedReference and
// PagedAppendReference: O and LSE within tol, the lengths grown by SeqQ,
// q untouched, the appended rows of both caches within tol of the
// reference's (relative to their largest |ref|), and every other element
// bit-identical to what it was.
func checkAppend(t *testing.T, name string, fwd *fac.Forward, before, in fac.PagedInputs, ps fac.PagedShape, o, lse []float32, tol float64) {
	t.Helper()
	ro, rlse, err := fwd.PagedReference(before, ps)
	if err != nil {
		t.Fatal(err)
	}
	checkFlat(t, name, o, lse, ro, rlse, tol)
	rk, rv, rlens, err := fwd.PagedAppendReference(before, ps)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in.CacheSeqlens, rlens) {
		t.Errorf("%s: cache_seqlens %v after the call, want %v", name, in.CacheSeqlens, rlens)
	}
	if !slices.Equal(in.Q, before.Q) {
		t.Errorf("%s: the call changed q", name)
	}
	k, v := appendedElems(before, ps, len(in.KNew)/(ps.Batch*ps.SeqQ*ps.KVHeads), len(in.VNew)/(ps.Batch*ps.SeqQ*ps.KVHeads))
	for _, c := range []struct {
		name     string
		got, was []float32
		want     []float64
		appended map[int]bool
	}{{"k_cache", in.KCache, before.KCache, rk, k}, {"v_cache", in.VCache, before.VCache, rv, v}} {
		maxErr, maxRef, rows := 0.0, 0.0, 0
		for i, g := range c.got {
			if !c.appended[i] {
				if math.Float32bits(g) != math.Float32bits(c.was[i]) {
					t.Fatalf("%s: %s[%d] = %g, was %g: outside the appended rows", name, c.name, i, g, c.was[i])
				}
				continue
			}
			rows++
			maxRef = math.Max(maxRef, math.Abs(c.want[i]))
			if d := math.Abs(float64(g) - c.want[i]); !(d <= maxErr) {
				maxErr = d
			}
		}
		if rows != len(c.appended) || !(maxErr <= tol*math.Max(maxRef, 1)) {
			t.Errorf("%s: %s: %d of %d appended elements, max |cache - ref| = %.3g (max |ref| %.3g)", name, c.name, rows, len(c.appended), maxErr, maxRef)
		}
	}
}

// appendedElems are the elements of k_cache and of v_cache (head dims d
// and dv) that the call with inputs in (before it) appends to.
func appendedElems(in fac.PagedInputs, ps fac.PagedShape, d, dv int) (k, v map[int]bool) {
	k, v = map[int]bool{}, map[int]bool{}
	maxPages := len(in.PageTable) / ps.Batch
	for b, n := range in.CacheSeqlens {
		for j := int(n); j < int(n)+ps.SeqQ; j++ {
			row := (int(in.PageTable[b*maxPages+j/ps.PageSize])*ps.PageSize + j%ps.PageSize) * ps.KVHeads
			for i := range ps.KVHeads * d {
				k[row*d+i] = true
			}
			for i := range ps.KVHeads * dv {
				v[row*dv+i] = true
			}
		}
	}
	return k, v
}

// appendCPUCases are TestPagedAppendCPU's: both rotary forms over all or
// part of the head dim, and none; lengths 0, 1 and not a multiple of the
// page size, appends inside a page, across one or two page boundaries and
// longer than a kv_append tile (20 rows > BLOCK_M = 16); page sizes 1, 16
// and 64 (keys gathered, 4 pages per tile, a page per tile); GQA 4 packed
// and not, V's own head dim, a user mask, sinks (merged by
// flash_fwd_combine_sinks after the append), bf16.
var appendCPUCases = []appendCase{
	{mask: "causal_bottom_right", d: 32, pageSize: 16, sq: 3, old: []int32{30, 77, 0, 1, 14}, rotary: fac.RotaryNeoX},
	{mask: "causal_bottom_right", d: 32, pageSize: 16, sq: 3, old: []int32{30, 77, 0, 1, 14}, rotary: fac.RotaryGPTJ, rd: 16},
	{mask: "causal_bottom_right", d: 32, pageSize: 16, sq: 1, old: []int32{30, 77, 0, 1, 14}, rotary: fac.RotaryNeoX, rd: 8, pack: fac.PackGQAOff},
	{mask: "none", d: 32, pageSize: 64, sq: 2, old: []int32{30, 77, 0, 1, 14}, splits: 2},
	{mask: "causal_bottom_right", d: 32, dimV: 16, pageSize: 1, sq: 2, old: []int32{30, 77, 0, 1, 14}, rotary: fac.RotaryGPTJ},
	{mask: "causal_bottom_right", d: 32, pageSize: 16, sq: 20, old: []int32{14, 16, 0}, rotary: fac.RotaryNeoX, rd: 24},
	{mask: "causal_bottom_right", d: 32, pageSize: 16, sq: 2, old: []int32{30, 77, 0, 1, 14}, rotary: fac.RotaryGPTJ, rd: 16, sinks: true, splits: 3},
	{mask: "paged_window", d: 32, pageSize: 16, sq: 3, old: []int32{130, 77, 0, 1, 14}, rotary: fac.RotaryGPTJ, dtype: "bf16"},
}

// TestPagedAppendCPU runs appendCPUCases on the CPU device (kv_append, then
// the paged kernels over the grown caches) and checks each call's output,
// lengths and caches (checkAppend).
func TestPagedAppendCPU(t *testing.T) {
	for i, c := range appendCPUCases {
		fwd, err := fac.CompileForward(c.opts(), c.d)
		if err != nil {
			t.Fatal(err)
		}
		in, ps := appendInputs(c, 8, 2, uint64(40+i))
		before := beforeCall(in)
		o, lse, err := fwd.RunPagedCPU(in, ps)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		tol := 1e-5
		if c.dtype == "bf16" {
			tol = 2e-2
		}
		checkAppend(t, c.String(), fwd, before, in, ps, o, lse, tol)
	}
}

// TestPagedAppendErrors checks that bad appends are refused with the
// offending value named, and that a refused call leaves the cache and
// lengths as they were.
func TestPagedAppendErrors(t *testing.T) {
	fwd, err := fac.CompileForward(fac.Options{Mask: "causal_bottom_right"}, 16)
	if err != nil {
		t.Fatal(err)
	}
	good := func() (fac.PagedInputs, fac.PagedShape) {
		return appendInputs(appendCase{d: 16, pageSize: 16, sq: 2, old: []int32{20, 17}, rotary: fac.RotaryNeoX}, 2, 1, 5)
	}
	for _, c := range []struct {
		edit func(*fac.PagedInputs, *fac.PagedShape)
		want string
	}{
		{func(in *fac.PagedInputs, ps *fac.PagedShape) { in.VNew = nil }, "v_new has 0 elements"},
		{func(in *fac.PagedInputs, ps *fac.PagedShape) { in.KNew = in.KNew[1:] }, "k_new has"},
		{func(in *fac.PagedInputs, ps *fac.PagedShape) { in.RotaryDim = 24 }, "rotary dim 24"},
		{func(in *fac.PagedInputs, ps *fac.PagedShape) { in.RotaryDim = 7 }, "rotary dim 7"},
		{func(in *fac.PagedInputs, ps *fac.PagedShape) { in.Rotary = 9 }, "rotary form 9"},
		{func(in *fac.PagedInputs, ps *fac.PagedShape) { in.RotarySin = in.RotarySin[8:] }, "rotary_sin has"},
		{func(in *fac.PagedInputs, ps *fac.PagedShape) {
			in.RotaryCos, in.RotarySin = in.RotaryCos[:8*20], in.RotarySin[:8*20]
		}, "rotary tables have 20 positions, but sequence 0's appended rows reach position 21"},
		{func(in *fac.PagedInputs, ps *fac.PagedShape) { in.Rotary = fac.RotaryNone }, "rotary tables without a rotary form"},
		{func(in *fac.PagedInputs, ps *fac.PagedShape) { in.KNew, in.VNew = nil, nil }, "without k_new and v_new"},
		{func(in *fac.PagedInputs, ps *fac.PagedShape) { in.CacheSeqlens[1] = 31 }, "cache_seqlens[1] = 31: appending 2 rows"},
		{func(in *fac.PagedInputs, ps *fac.PagedShape) { in.PageTable[3] = in.PageTable[1] }, "sequence 1 appends position 17"},
	} {
		in, ps := good()
		c.edit(&in, &ps)
		was := beforeCall(in)
		if _, _, err := fwd.RunPagedCPU(in, ps); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error with %q, got %v", c.want, err)
		}
		if !slices.Equal(in.KCache, was.KCache) || !slices.Equal(in.CacheSeqlens, was.CacheSeqlens) {
			t.Errorf("%q: a refused call changed the cache", c.want)
		}
	}
	if _, err := fac.ParseRotaryForm("rope"); err == nil {
		t.Error("ParseRotaryForm(rope): no error")
	}
	for _, s := range []string{"none", "neox", "gptj"} {
		if r, err := fac.ParseRotaryForm(s); err != nil || r.String() != s {
			t.Errorf("ParseRotaryForm(%q) = %v, %v", s, r, err)
		}
	}
}
