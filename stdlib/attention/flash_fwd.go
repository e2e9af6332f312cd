package attention

import (
	"fmt"
	"maps"

	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/tir"
)

// FlashFwd is flash_fwd.fa's launch contract: one program per (q tile,
// batch × head); q is [B, H, Sq, D], o [B, H, Sq, Dv], k [B, Hkv, Sk, D]
// and v [B, Hkv, Sk, Dv] with strides (Dv: Shape.VDim, HEAD_DIM_V); lse is
// [B, H, Sq] f32; the kv-direction block mask. Compiled
// with persistent = true, the kernel takes the grid parameters
// (tir.GridParams), which the launch binds: Grid is then its logical grid,
// whose tiles fewer programs loop over (launch.Call.Persist).
var FlashFwd = &launch.Contract{
	Kernel: "flash_fwd",
	File:   "flash_fwd.fa",
	Tensors: []launch.Tensor{
		{Name: "q", Dims: qDims, Strides: []string{"stride_qb", "stride_qh", "stride_qs"}},
		{Name: "k", Dims: kvDims, Strides: []string{"stride_kb", "stride_kh", "stride_ks"}},
		{Name: "v", Dims: vDims, Strides: []string{"stride_vb", "stride_vh", "stride_vs"}},
		{Name: "o", Output: true, Dims: oDims, Strides: []string{"stride_ob", "stride_oh", "stride_os"}},
		{Name: "lse", Output: true, Dims: lseDims},
	},
	Scalars:   attentionScalars,
	BlockMask: launch.KVBlockMask,
	Mods:      []string{"mask", "score"},
	Grid:      fwdGrid,
	TileCosts: fwdTileCosts,
	Check:     checkHeadDim,
	Tuned:     fwdTiles,
	// Arguments that change no tile may be set alone, keeping the set:
	// num_stages (a persistent kernel at D = 128 keeps its epilogue's
	// exchange through shared memory only at two buffers), the softmax
	// arguments, prefetch_q (a hint to L2), full_first and heads_group (an
	// order). heads_minor is not among them: the groups' set refuses it,
	// so that a request for it falls back to the plain set.
	TunedAlone: []string{"num_stages", "lazy_rescale", "fold_scale", "prefetch_q", "full_first", "heads_group"},
}

// The code generation variants the tuned sets were measured on
// (codegen.TargetConfig.Variant): sm_90a's wgmma path, and that path
// staging through cp.async (tma=off) or with a CTA barrier per iteration
// (release=barrier). A variant that extends one of them (wgmma-tmastore,
// wgmma-cpasync-ctas2) takes its sets (TuneVariants).
const (
	wgmma           = "wgmma"
	wgmmaCpAsync    = "wgmma-cpasync"
	wgmmaTMABarrier = "wgmma-tmabarrier"
)

// for16 is the condition of a set for 16-bit DTYPEs at head dim d on
// variants.
func for16(d int, variants ...string) launch.TuneCond { return for16Dims([]int{d}, variants...) }

// for16Dims is for16 at each of dims.
func for16Dims(dims []int, variants ...string) launch.TuneCond {
	return launch.TuneCond{Variants: variants, DTypes: []tir.Elem{tir.BF16, tir.F16}, HeadDims: dims}
}

// wgmmaTiles: on sm_90a's wgmma path, 128×128 tiles on two warpgroups
// (8 warps), with P·V overlapped with the next block's softmax
// (overlap-softmax), for 16-bit D = 64 and 128: faster than 64×64 on one
// warpgroup and than no overlap on the H200. Elsewhere the kernel's
// defaults (64×64 on 4 warps, which mma.sync runs faster) stay.
var wgmmaTiles = map[string]string{"BLOCK_M": "128", "BLOCK_N": "128", "num_warps": "8", "overlap": "true"}

// fwdTiles are wgmmaTiles with the softmax arguments (fwdSoftmaxArgs) and a
// producer warpgroup (warp_specialize), and at D = 128 three K/V buffers, so
// that a block's copies have two iterations to land (the producer makes room
// for them; at D = 64 more buffers measured no faster). Before that plain
// set, by preference: at D = 64, 192-row tiles on three consumer groups
// for the masks and scores they run fastest without spilling
// (fwdGroupsHeadsMinor, then fwdGroupsSet); at D = 128, two CTAs a
// multiprocessor for sliding window (fwdTwoCTAs), then heads-minor order for
// document and sliding window (fwdHeadsMinor). The varlen forward takes the
// plain set with packed_loads (varlenTiles). Without TMA (tma=off, or
// release=barrier) there is no producer for the groups: those variants keep
// the plain sets. BENCHMARKS.md has the figures.
var fwdTiles = []launch.TunedSet{
	{When: fwdGroupsHeadsMinorWhen, Args: fwdGroupsHeadsMinor},
	{When: fwdGroupsWhen, Args: fwdGroupsSet},
	{When: for16(64, wgmma, wgmmaCpAsync, wgmmaTMABarrier), Args: producerTiles(64, fwdSoftmaxArgs)},
	{When: fwdTwoCTAsWhen, Args: fwdTwoCTAs},
	{When: fwdHeadsMinorWhen, Args: fwdHeadsMinor(producerTiles(128, fwdSoftmaxArgs))},
	{When: for16(128, wgmma, wgmmaCpAsync, wgmmaTMABarrier), Args: producerTiles(128, fwdSoftmaxArgs)},
}

// producerTiles are wgmmaTiles with args, a producer warpgroup and, at D =
// 128, three K/V buffers: flash_fwd's plain set at head dim d, and
// flash_fwd_varlen's with packed_loads (varlenTiles).
func producerTiles(d int, args map[string]string) map[string]string {
	set := maps.Clone(wgmmaTiles)
	maps.Copy(set, args)
	set["warp_specialize"] = "true"
	if d == 128 {
		set["num_stages"] = "3"
	}
	return set
}

// fwdGroupsSet is FlashAttention-3's D = 64 forward: 64-row tiles on three
// consumer groups, one producer, four K/V buffers, O by TMA store, over mask
// blocks of 192 rows (a program's rows); the third warpgroup is what makes
// it faster than 128×128 (16% on none, 7% on causal). Only for the masks and
// scores it runs faster without spilling (fwdGroupsWhen): not sliding
// window (slower), nor masks and scores that read tensors or divide
// (document, chunked, alibi spill at the groups' 160 registers a thread),
// nor a user's own mods, whose registers nobody measured. A request that
// gives other mask blocks (a FlexAttention block mask's 128) or a schedule
// the groups do not take (pingpong, persistent) gets the 128×128 set.
// Causal-shaped masks take fwdGroupsHeadsMinor first.
var fwdGroupsSet = func() map[string]string {
	set := map[string]string{"BLOCK_M": "64", "BLOCK_N": "128", "num_warps": "4", "consumer_groups": "3",
		"SPARSE_Q": "192", "SPARSE_K": "128", "num_stages": "4", "warp_specialize": "true", "overlap": "true",
		"tma_store": "true", "pingpong": "false", "persistent": "false", "heads_minor": "false"}
	maps.Copy(set, fwdSoftmaxArgs)
	return set
}()

// fwdGroupsWhen: fwdGroupsSet's requests.
var fwdGroupsWhen = func() launch.TuneCond {
	w := for16(64, wgmma)
	w.Mask = launch.ModIs{MaskNone, MaskCausal, MaskCausalBottomRight, MaskPrefixLM}
	w.Score = launch.ModIs{ScoreIdentity, ScoreSoftcap}
	return w
}()

// fwdGroupsHeadsMinor is fwdGroupsSet launched heads-minor in groups of
// 16 heads, for causal-shaped masks: heads-major, a head's longest programs
// (its last q tiles) start in the launch's last waves and leave a tail;
// heads-minor starts them first (causal 5% faster). none measured the same
// either way, so it keeps the heads-major order, whose programs share K and
// V longest. The identity score only, until ptxas is seen to fit softcap's
// heads-minor kernel as it fits the heads-major one.
var fwdGroupsHeadsMinor = func() map[string]string {
	set := maps.Clone(fwdGroupsSet)
	set["heads_minor"] = "true"
	set["heads_group"] = "16"
	return set
}()

// fwdGroupsHeadsMinorWhen: fwdGroupsHeadsMinor's requests.
var fwdGroupsHeadsMinorWhen = func() launch.TuneCond {
	w := for16(64, wgmma)
	w.Mask = launch.ModIs{MaskCausal, MaskCausalBottomRight, MaskPrefixLM}
	w.Score = launch.ModIs{ScoreIdentity}
	return w
}()

// fwdTwoCTAs is sliding window's D = 128 set: two programs on each
// multiprocessor (ctas_per_sm), so that one's Q load, first block and
// epilogue (about a quarter of a 1024-key window's tile) run under the
// other's main loop. Two fit in 128-row tiles on 64-key blocks with no
// producer warpgroup, two K/V buffers and no overlap: 98,432 bytes of shared
// memory, 128 registers a thread with no spill (with overlap, ptxas spills
// and serializes the wgmmas, C7512). Document gains too, but spills under
// the register cap with every score, as alibi does with sliding window, and
// softcap is not timed: the set is for sliding window and the identity
// score only (fwdTwoCTAsWhen). Launched heads-minor in groups of 16 heads,
// as fwdHeadsMinor.
var fwdTwoCTAs = func() map[string]string {
	set := map[string]string{"BLOCK_M": "128", "BLOCK_N": "64", "num_warps": "8", "ctas_per_sm": "2",
		"SPARSE_Q": "128", "SPARSE_K": "64", "num_stages": "2", "warp_specialize": "false", "overlap": "false",
		"pingpong": "false", "persistent": "false", "consumer_groups": "1", "heads_minor": "true", "heads_group": "16"}
	maps.Copy(set, fwdSoftmaxArgs)
	return set
}()

// fwdTwoCTAsWhen: fwdTwoCTAs's requests.
var fwdTwoCTAsWhen = func() launch.TuneCond {
	w := for16(128, wgmma)
	w.Mask = launch.ModIs{MaskSlidingWindow}
	w.Score = launch.ModIs{ScoreIdentity}
	return w
}()

// fwdHeadsMinor is set with heads_minor, for document (and its spans form,
// which the runtime runs in its place) and sliding window
// (fwdHeadsMinorWhen), whose tiles are short and alike: starting programs
// q tile by q tile across the heads makes them faster, while the long rows
// of none and causal favour the heads-major order's K/V reuse in L2. In
// groups of 16 heads (heads_group): across all heads of a large batch the
// programs running at once share no K and V and the order turns into a
// loss; groups of 16 keep L2's reuse and measure as all heads do at small
// batches.
func fwdHeadsMinor(set map[string]string) map[string]string {
	s := maps.Clone(set)
	s["heads_minor"] = "true"
	s["heads_group"] = "16"
	return s
}

// fwdHeadsMinorWhen: fwdHeadsMinor's requests.
var fwdHeadsMinorWhen = func() launch.TuneCond {
	w := for16(128, wgmma)
	w.Mask = launch.ModIs{MaskDocument, MaskDocumentSpans, MaskSlidingWindow}
	return w
}()

// fwdSoftmaxArgs take two FP32 instructions per element out of the
// forwards' softmax on the wgmma path, which is bound by those
// instructions: lazy_rescale (O rescaled only when a row's max grew by more
// than 8 in log2 units, FlashAttention-4's conditional rescaling) and
// fold_scale (the scale in exp2's factor, not in every score).
var fwdSoftmaxArgs = map[string]string{"lazy_rescale": "true", "fold_scale": "true"}

// attentionScalars are the scalars flash_fwd's family takes.
var attentionScalars = []launch.Scalar{
	{Name: "heads", Value: func(p launch.Problem) any { return p.Shape.Heads }},
	{Name: "kv_group", Value: func(p launch.Problem) any { return p.Shape.Heads / p.Shape.KV() }},
	{Name: "seqlen_q", Value: func(p launch.Problem) any { return p.Shape.SeqQ }},
	{Name: "seqlen_k", Value: func(p launch.Problem) any { return p.Shape.SeqK }},
	{Name: "scale", Value: func(p launch.Problem) any { return p.SoftmaxScale() }},
}

// qGrid is one program per (q tile, batch × head).
func qGrid(p launch.Problem) [3]int {
	return [3]int{launch.CeilDiv(p.Shape.SeqQ, p.Attr("BLOCK_M")), p.Shape.Batch * p.Shape.Heads, 1}
}

// fwdGrid is qGrid, or with heads_minor (B × H, q tiles): the kernel then
// reads its tile's batch × head from program_id(0) and its q tile from
// program_id(1), so that programs start q tile by q tile across the heads;
// with heads_group, (a group's heads, q tiles, groups), the group's first
// head program_id(2) × num_programs(0).
func fwdGrid(p launch.Problem) [3]int {
	g := qGrid(p)
	if n := groups(p); n > 1 {
		// A program's groups take consecutive q tiles (flash_fwd.fa).
		g[0] = launch.CeilDiv(p.Shape.SeqQ, p.Attr("BLOCK_M")*n)
	}
	if headsMinor(p) {
		g[0], g[1] = g[1], g[0]
		if hg := headsGroup(p, g[0]); hg > 0 {
			g[0], g[2] = hg, g[0]/hg
		}
	}
	return g
}

// headsGroup is the heads of a heads_group group among nbh batch × heads:
// the largest divisor of nbh that is at most heads_group (0 without
// heads_group), so that every group is whole.
func headsGroup(p launch.Problem, nbh int) int {
	g := int(p.Attrs["heads_group"])
	if g <= 0 || nbh <= 0 {
		return 0
	}
	for g = min(g, nbh); nbh%g != 0; g-- {
	}
	return g
}

// headsMinor reports whether the kernel was compiled with heads_minor
// (flash_fwd's own argument; kernels that lack it run heads-major).
func headsMinor(p launch.Problem) bool { return p.Attrs["heads_minor"] != 0 }

// headsMinorTile is the launch-order index of q tile rank x (0: the last
// q tile) of batch × head bh in a heads_minor grid of nq q tiles and nbh
// heads: q tile by q tile across all heads, or across each group of g
// heads in turn (g > 0 divides nbh: headsGroup), as fwdGrid launches them.
func headsMinorTile(x, bh, nq, nbh, g int) int {
	if g <= 0 {
		return x*nbh + bh
	}
	g0 := bh / g * g
	return g0*nq + x*g + bh - g0
}

// groups is the kernel's consumer groups (1 for kernels that lack the
// argument).
func groups(p launch.Problem) int { return max(1, int(p.Attrs["consumer_groups"])) }

// fwdTileCosts are flash_fwd's tiles' expected times, in kv iterations,
// from the block mask's counts (a persistent launch deals its tiles from
// them, launch.Call.Persist): tile (x, bh) is q tile last − x of batch ×
// head bh, whose mask row lists its partial and full blocks; a partial
// block costs about two full ones (the mask's work), and a tile about 2.5
// iterations more outside its loop (an in-kernel timeline). Nil when the
// block mask's lists are not on the host.
func fwdTileCosts(p launch.Problem, bm launch.BlockMask, tiles [3]int) []float64 {
	counts, _, full, _ := bm.Lists(false)
	b, h, numQ, _ := bm.Dims()
	blockM, sparseQ := p.Attr("BLOCK_M"), p.Attr("SPARSE_Q")
	sub := float64(p.Attr("SPARSE_K") / max(1, p.Attr("BLOCK_N")))
	if len(counts) != b*h*numQ || len(full) != len(counts) || blockM <= 0 || sparseQ <= 0 || p.Shape.Heads <= 0 || groups(p) > 1 {
		return nil
	}
	nq, nbh := tiles[0], tiles[1]
	if headsMinor(p) {
		nq, nbh = tiles[1], tiles[0]*tiles[2]
	}
	costs := make([]float64, tiles[0]*tiles[1]*tiles[2])
	for bh := 0; bh < nbh; bh++ {
		bi, hi := bh/p.Shape.Heads, bh%p.Shape.Heads
		if b == 1 {
			bi = 0
		}
		if h == 1 {
			hi = 0
		}
		for x := 0; x < nq; x++ {
			q := (nq - 1 - x) * blockM / sparseQ
			i := (bi*h+hi)*numQ + q
			if bi >= b || hi >= h || q >= numQ {
				return nil
			}
			// Tiles are linearized x fastest: (x, bh), or (bh, x) with
			// heads_minor, or (head in group, x, group) with heads_group.
			t := bh*nq + x
			if headsMinor(p) {
				t = headsMinorTile(x, bh, nq, nbh, headsGroup(p, nbh))
			}
			costs[t] = sub*float64(2*counts[i]+full[i]) + 2.5
		}
	}
	return costs
}

func qDims(p launch.Problem) []int {
	return []int{p.Shape.Batch, p.Shape.Heads, p.Shape.SeqQ, p.Shape.Dim}
}

func kvDims(p launch.Problem) []int {
	return []int{p.Shape.Batch, p.Shape.KV(), p.Shape.SeqK, p.Shape.Dim}
}

// oDims are O's and dO's: Q's rows, V's head dim.
func oDims(p launch.Problem) []int {
	return []int{p.Shape.Batch, p.Shape.Heads, p.Shape.SeqQ, p.Shape.VDim()}
}

// vDims are V's and dV's: K's rows, V's head dim.
func vDims(p launch.Problem) []int {
	return []int{p.Shape.Batch, p.Shape.KV(), p.Shape.SeqK, p.Shape.VDim()}
}

func lseDims(p launch.Problem) []int { return []int{p.Shape.Batch, p.Shape.Heads, p.Shape.SeqQ} }

func init() { register(FlashFwd) }

// checkHeadDim rejects a problem whose head dims are not the ones compiled
// in (checkDim), and mask blocks that are not whole multiples of the kernel
// tile.
func checkHeadDim(p launch.Problem) error {
	if err := checkDim(p); err != nil {
		return err
	}
	if sq, sk, bm, bn := p.Attr("SPARSE_Q"), p.Attr("SPARSE_K"), p.Attr("BLOCK_M"), p.Attr("BLOCK_N"); sq%bm != 0 || sk%bn != 0 {
		return fmt.Errorf("mask blocks %d×%d must be multiples of the kernel tile %d×%d", sq, sk, bm, bn)
	}
	if n := groups(p); n > 1 {
		// The groups walk the block-mask row of group 0's q tile, which the
		// producer loads for all.
		if sq, bm := p.Attr("SPARSE_Q"), p.Attr("BLOCK_M"); sq%(bm*n) != 0 {
			return fmt.Errorf("consumer_groups = %d: mask blocks of %d rows must be multiples of the groups' %d×%d rows (--const SPARSE_Q=%d)", n, sq, n, bm, n*bm)
		}
		if p.Attrs["persistent"] != 0 {
			return fmt.Errorf("consumer_groups = %d: not with persistent", n)
		}
	}
	if g := p.Attrs["heads_group"]; g < 0 {
		return fmt.Errorf("heads_group = %d: want 0 (every head) or a number of heads (it orders heads_minor's launch)", g)
	}
	return nil
}

// FlashFwdSinks is flash_fwd_sinks.fa's contract: FlashFwd's plus sinks,
// the per-head sink logits [H] f32.
var FlashFwdSinks = withSinks(FlashFwd)

// withSinks is c with the sinks tensor added, for the sinks variant of a
// forward kernel.
func withSinks(c *launch.Contract) *launch.Contract {
	s := *c
	s.Kernel = c.Kernel + "_sinks"
	s.File = c.Kernel + "_sinks.fa"
	s.Tensors = append(append([]launch.Tensor(nil), c.Tensors...),
		launch.Tensor{Name: "sinks", Dims: func(p launch.Problem) []int { return []int{p.Shape.Heads} }})
	return &s
}

func init() { register(FlashFwdSinks) }

// Forward is the forward pass: flash_fwd, or flash_fwd_sinks with sinks.
var Forward = &Variant{
	Name: "forward",
	Kernels: func(o VariantOptions) ([]*launch.Contract, error) {
		if o.Sinks {
			return []*launch.Contract{FlashFwdSinks}, nil
		}
		return []*launch.Contract{FlashFwd}, nil
	},
	Results: []string{"o", "lse"},
}

func init() { registerVariant(Forward) }
