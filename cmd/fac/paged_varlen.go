package main

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac"
)

// runRagged is fac run over a ragged batch (--seqlens-q): sequence b's
// --seqlens-q[b] queries are the last positions of its --cache-seqlens[b]
// keys, in shuffled pages of --page-size keys (the first page shared by
// the first two sequences where both fill it), run as one launch of
// flash_fwd_paged_varlen and checked against PagedVarlenReference (or, above
// fullCheckPairs, a sample of its rows).
func (p *pagedFlags) runRagged(cmd *cobra.Command, a pagedArgs, lens []int32) error {
	for _, f := range []string{"append", "rotary", "rotary-dim", "seqlen-q"} {
		if cmd.Flags().Changed(f) {
			return fmt.Errorf("--%s does not work with --seqlens-q: a ragged batch's query counts are --seqlens-q, and its caches already hold the queries' keys", f)
		}
	}
	sh := a.sh
	if len(p.seqlensQ) != sh.Batch {
		return fmt.Errorf("--seqlens-q has %d counts: want one per sequence (--batch %d)", len(p.seqlensQ), sh.Batch)
	}
	cu := []int32{0}
	decodeRows, chunks := 0, 0
	for b, n := range p.seqlensQ {
		if n < 0 || n > int(lens[b]) {
			return fmt.Errorf("--seqlens-q: %d queries for sequence %d, whose cache holds %d keys (--cache-seqlens): want 0 to %d, the queries being the cache's last positions", n, b, lens[b], lens[b])
		}
		cu = append(cu, cu[b]+int32(n))
		switch {
		case n == 1:
			decodeRows++
		case n > 1:
			chunks++
		}
	}
	totalQ := int(cu[sh.Batch])
	rng := rand.New(rand.NewPCG(a.seed, a.seed^0x9e3779b97f4a7c15))
	pc, numPages := pagedCache(rng, lens, lens, p.pageSize)
	in := fac.PagedVarlenInputs{CuSeqlensQ: cu, PageTable: pc.PageTable, CacheSeqlens: lens, Scale: a.scale, Sinks: a.sinks}
	in.Q = tensorArg(nil, totalQ*sh.Heads*sh.Dim, rng)
	in.KCache = tensorArg(nil, numPages*p.pageSize*sh.KV()*sh.Dim, rng)
	in.VCache = tensorArg(nil, numPages*p.pageSize*sh.KV()*sh.VDim(), rng)
	ps := fac.PagedVarlenShape{Batch: sh.Batch, Heads: sh.Heads, KVHeads: sh.KV(), PageSize: p.pageSize}
	t0 := time.Now()
	fwd, err := fac.CompileForward(a.opts, sh.Dim)
	if err != nil {
		return err
	}
	w := a.w
	gpu, sms, err := a.openDevice()
	if err != nil {
		return err
	}
	plan, err := fwd.PagedVarlenPlan(ps, cu, lens, sms)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "kernel flash_fwd_paged_varlen mask=%s score=%s dtype=%s on %s\n", modName(fwd.Mask()), modName(fwd.Score()), a.dtype, a.device)
	fmt.Fprintf(w, "ragged: B=%d H=%d Hkv=%d D=%d%s, %d queries (%d decode rows, %d prefill chunks), %d pages of %d keys (shuffled), query counts %v, cache lengths %v\n",
		sh.Batch, sh.Heads, sh.KV(), sh.Dim, dvNote(sh), totalQ, decodeRows, chunks, numPages, p.pageSize, p.seqlensQ, lens)
	fmt.Fprintf(w, "decoding: %s\n", plan)
	var o, lse []float32
	if gpu != nil {
		o, lse, err = fwd.RunPagedVarlenCUDA(gpu, in, ps)
	} else {
		o, lse, err = fwd.RunPagedVarlenCPU(in, ps)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "compile and run %.1f ms\n", ms(time.Since(t0)))
	if a.noCheck {
		fmt.Fprintln(w, "check skipped (--no-check): no float64 reference computed, the output is unchecked")
		return nil
	}
	var pairs int64
	for b, n := range lens {
		pairs += int64(cu[b+1]-cu[b]) * int64(n) * int64(sh.Heads)
	}
	if a.fullCheck || pairs <= fullCheckPairs {
		return checkAgainst(w, o, lse, func() ([]float64, []float64, error) { return fwd.PagedVarlenReference(in, ps) }, a.tol, a.dtype)
	}
	rows := raggedCheckRows(cu, sh.Heads)
	fmt.Fprintf(w, "check sampled: %d of the %d query rows (every sequence's last, then a fixed-seed sample) against a float64 reference of those rows; "+
		"H·Σ n_q·n = %d pairs is over %d (--full-check computes the whole reference)\n", len(rows), totalQ*sh.Heads, pairs, fullCheckPairs)
	so, slse := raggedRows(o, lse, cu, sh.Heads, sh.VDim(), rows)
	return checkAgainst(w, so, slse, func() ([]float64, []float64, error) { return fwd.PagedVarlenReferenceRows(in, ps, rows) }, a.tol, a.dtype)
}

// raggedCheckRows picks a sampled check's rows of a ragged batch (cu:
// cu_seqlens_q), deterministically: each sequence's last query (up to
// 1024 sequences, heads in turn), then fixed-seed rows until sampleRows;
// no row twice.
func raggedCheckRows(cu []int32, heads int) []fac.RefRow {
	total := int(cu[len(cu)-1]) * heads
	seen := map[fac.RefRow]bool{}
	var rows []fac.RefRow
	add := func(r fac.RefRow) {
		if !seen[r] {
			seen[r] = true
			rows = append(rows, r)
		}
	}
	for b := 0; b+1 < len(cu) && len(rows) < 1024; b++ {
		if n := int(cu[b+1] - cu[b]); n > 0 {
			add(fac.RefRow{B: b, H: b % heads, I: n - 1})
		}
	}
	rng := rand.New(rand.NewPCG(0x5eed, 0xcafe))
	for len(rows) < min(max(sampleRows, len(rows)), total) {
		t := int32(rng.IntN(int(cu[len(cu)-1])))
		b, _ := slices.BinarySearch(cu, t+1)
		add(fac.RefRow{B: b - 1, H: rng.IntN(heads), I: int(t - cu[b-1])})
	}
	slices.SortFunc(rows, func(a, b fac.RefRow) int {
		return cmp.Or(cmp.Compare(a.B, b.B), cmp.Compare(a.H, b.H), cmp.Compare(a.I, b.I))
	})
	return rows
}

// raggedRows are rows' O (dv values each) and LSE out of a ragged call's O
// [total_q, H, dv] and LSE [H, total_q].
func raggedRows(o, lse []float32, cu []int32, heads, dv int, rows []fac.RefRow) (so, slse []float32) {
	totalQ := int(cu[len(cu)-1])
	so, slse = make([]float32, len(rows)*dv), make([]float32, len(rows))
	for n, r := range rows {
		t := int(cu[r.B]) + r.I
		copy(so[n*dv:][:dv], o[(t*heads+r.H)*dv:][:dv])
		slse[n] = lse[r.H*totalQ+t]
	}
	return so, slse
}
