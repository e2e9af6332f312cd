package flash

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// Decoding (docs/decoding.md): a forward call whose grid of q tiles is too
// small to fill the GPU (few query positions, long keys) runs
// flash_fwd_splitkv, which splits each tile's kv blocks over NumSplits
// programs and packs the query heads of a GQA group into one tile
// (PackGQA), then flash_fwd_combine, which merges the splits. Plan says
// which kernels a call runs.

// PackGQA chooses whether the query heads that share a kv head are packed
// into one tile's rows (one program reads each K/V block once for the
// whole group).
type PackGQA int

const (
	// PackGQAAuto packs when the query is short (SeqQ ≤ 64) and there is
	// more than one query head per kv head.
	PackGQAAuto PackGQA = iota
	// PackGQAOn always runs flash_fwd_splitkv with the group packed (for
	// Heads = KVHeads: the split kernel, one head per tile).
	PackGQAOn
	// PackGQAOff never packs.
	PackGQAOff
)

func (p PackGQA) String() string {
	switch p {
	case PackGQAAuto:
		return "auto"
	case PackGQAOn:
		return "on"
	case PackGQAOff:
		return "off"
	}
	return fmt.Sprintf("PackGQA(%d)", int(p))
}

// ParsePackGQA reads "auto", "on" or "off".
func ParsePackGQA(s string) (PackGQA, error) {
	switch strings.ToLower(s) {
	case "auto", "":
		return PackGQAAuto, nil
	case "on", "true":
		return PackGQAOn, nil
	case "off", "false":
		return PackGQAOff, nil
	}
	return 0, fmt.Errorf("pack-gqa %q: want auto, on or off", s)
}

// ParseNumSplits reads a split count as the command line spells it:
// "auto" (Options.NumSplits 0) or 1 (no split) to MaxSplits. "0" is
// refused (issue 46 item 15: the help said "auto, or 1 to 64" while 0
// was taken as auto): there, auto is spelled auto.
func ParseNumSplits(s string) (int, error) {
	if strings.EqualFold(s, "auto") {
		return 0, nil
	}
	if strings.TrimSpace(s) == "0" {
		return 0, fmt.Errorf("num-splits 0: want auto or 1 (off) to %d (0 is Options.NumSplits' value for auto; on the command line, write auto)", MaxSplits)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxSplits {
		return 0, fmt.Errorf("num-splits %q: want auto or 1..%d", s, MaxSplits)
	}
	return n, nil
}

const (
	// DefaultSMs is the multiprocessor count the automatic split choice
	// assumes where the device does not give one (the CPU device): an
	// H200's 132.
	DefaultSMs = 132
	// MaxSplits is the most splits flash_fwd_combine merges (its
	// MAX_SPLITS).
	MaxSplits = 64
	// MaxPackSeqQ is the longest query that PackGQAAuto packs.
	MaxPackSeqQ = 64
	// minKeysPerSplit is the fewest keys (four 128-key mask blocks) the
	// automatic choice gives a split.
	minKeysPerSplit = 512
)

// DecodePlan is how a forward call runs.
type DecodePlan struct {
	// SplitKV is true when the call runs flash_fwd_splitkv and
	// flash_fwd_combine; false: flash_fwd (or flash_fwd_sinks) alone.
	SplitKV bool
	// NumSplits is the number of programs each q tile's kv blocks are split
	// over (1: none).
	NumSplits int
	// Pack is the number of query heads packed into one tile (1: none).
	Pack int
	// BlockM and BlockN are flash_fwd_splitkv's tile; QPerTile the query
	// positions in one tile (BlockM / Pack, rounded down to a power of two
	// that divides SPARSE_Q).
	BlockM, BlockN, QPerTile int
	// Programs is the number of flash_fwd_splitkv programs (q tiles ×
	// B·H/Pack × NumSplits); SMs the multiprocessor count the choice
	// assumed.
	Programs, SMs int
	// Paged is true for a paged call's plan (Forward.PagedPlan): the split
	// kernel is flash_fwd_paged.
	Paged bool
	// TilePages (flash_fwd_paged's TILE_PAGES) is the number of pages a kv
	// tile covers where it covers whole pages: 1 where each tile lies in
	// one page (the page size a multiple of BLOCK_N), 2 or 4 where the
	// page size is BLOCK_N / 2 or / 4; each page is then one table read and
	// the tiles are prefetched. 0: each key's page is gathered.
	TilePages int
	// Varlen is true for a ragged batch's plan (Forward.PagedVarlenPlan):
	// the split kernel is flash_fwd_paged_varlen, over the q tiles of
	// every sequence (Programs counts them times the packed heads and
	// the splits).
	Varlen bool
	// Append is true for a paged call that appends keys and values first:
	// kv_append runs before the paged kernels.
	Append bool
	// Sinks: the forward has sinks, which the combination adds
	// (flash_fwd_combine_sinks); the splits are flash_fwd_splitkv's.
	Sinks bool
	// FusedCombine: the split kernel (flash_fwd_splitkv, flash_fwd_paged)
	// merges its splits in place, the last program of each q tile merging
	// the tile's (DecodeConsts fused_combine=true), and no
	// flash_fwd_combine runs. Ragged batches (flash_fwd_paged_varlen) keep
	// the combine.
	FusedCombine bool
	// Fallback says why the call runs flash_fwd alone where Plan chose
	// split-KV: the device cannot have a split-KV kernel (PlanCUDA).
	Fallback string
}

// tilePagesForms are the TILE_PAGES a paged plan can pick (tilePages).
var tilePagesForms = []int{0, 1, 2, 4}

// tilePages is TILE_PAGES for pages of pageSize keys and tiles of blockN.
func tilePages(pageSize, blockN int) int {
	switch {
	case blockN <= 0 || pageSize <= 0:
		return 0
	case pageSize%blockN == 0:
		return 1
	case blockN%pageSize == 0 && (blockN/pageSize == 2 || blockN/pageSize == 4):
		return blockN / pageSize
	}
	return 0
}

// variant is the variant a split-KV plan runs.
func (p DecodePlan) variant() *attention.Variant {
	switch {
	case p.Paged && p.Varlen:
		return attention.PagedVarlen
	case p.Paged && p.Append && p.FusedCombine:
		return attention.PagedAppendFused
	case p.Paged && p.Append:
		return attention.PagedAppend
	case p.Paged && p.FusedCombine:
		return attention.PagedFused
	case p.Paged:
		return attention.Paged
	case p.FusedCombine:
		return attention.SplitKVFused
	}
	return attention.SplitKV
}

// Kernels are the kernels the plan launches, in order.
func (p DecodePlan) Kernels() []string {
	if !p.SplitKV {
		return nil
	}
	return p.variant().Names(attention.VariantOptions{Sinks: p.Sinks})
}

func (p DecodePlan) String() string {
	if !p.SplitKV {
		if p.Fallback != "" {
			return "no split-KV, no PackGQA (" + p.Fallback + ")"
		}
		return "no split-KV, no PackGQA"
	}
	pack := "off"
	if p.Pack > 1 {
		pack = fmt.Sprintf("%d heads per tile", p.Pack)
	}
	tile := ""
	switch {
	case p.Paged && p.TilePages == 1:
		tile = ", a page per tile"
	case p.Paged && p.TilePages > 1:
		tile = fmt.Sprintf(", %d pages per tile", p.TilePages)
	case p.Paged:
		tile = ", keys gathered by page"
	}
	names, first := p.Kernels(), ""
	if p.Append {
		first, names = names[0]+" + ", names[1:]
	}
	merge := " merging in place (fused_combine)"
	if len(names) > 1 {
		merge = " + " + names[1]
	}
	return fmt.Sprintf("%s%s (BLOCK_M=%d, BLOCK_N=%d, %d positions per tile%s)%s: %d splits, PackGQA %s, %d programs (%d SMs)",
		first, names[0], p.BlockM, p.BlockN, p.QPerTile, tile, merge, p.NumSplits, pack, p.Programs, p.SMs)
}

// Reason says in plain words why a call of shape sh runs plan p (from
// f.Plan), for reports: a split-KV plan of a full-length call reads as a
// contradiction next to "kernel flash_fwd" unless it says that the q
// tiles alone would leave most of the GPU idle (issue 46 item 17; the
// rule is FlashAttention-2's, which splits any forward call whose tiles
// fill less than 80% of a wave, docs/decisions.md#decoding).
func (f *Forward) Reason(p DecodePlan, sh Shape) string {
	if !p.SplitKV {
		return "flash_fwd alone"
	}
	var why []string
	switch {
	case p.Pack > 1 && f.opts.PackGQA == PackGQAOn:
		why = append(why, fmt.Sprintf("PackGQA on (asked for): the %d query heads of a kv head share a tile, which reads their K and V once", p.Pack))
	case p.Pack > 1:
		why = append(why, fmt.Sprintf("PackGQA: %d query heads share each kv head and Sq = %d ≤ %d, so they share a tile, which reads their K and V once", p.Pack, sh.SeqQ, MaxPackSeqQ))
	case f.opts.PackGQA == PackGQAOn:
		why = append(why, "PackGQA on (asked for), with one query head per kv head")
	}
	tiles := p.Programs / p.NumSplits
	merges := "flash_fwd_combine merges their results"
	if p.FusedCombine {
		merges = "the last of a tile's programs to finish merges their results (fused_combine)"
	}
	switch {
	case p.NumSplits > 1 && f.opts.NumSplits > 1:
		why = append(why, fmt.Sprintf("%d splits (asked for): each q tile's keys are split over %d programs and %s", p.NumSplits, p.NumSplits, merges))
	case p.NumSplits > 1:
		why = append(why, fmt.Sprintf("%d splits: the %d q tiles of %d positions would fill %d of the %d program slots of %d multiprocessors (two each), so each tile's %d keys are split over %d programs and %s",
			p.NumSplits, tiles, p.QPerTile, tiles, 2*p.SMs, p.SMs, sh.SeqK, p.NumSplits, merges))
	}
	return strings.Join(why, "; ")
}

// splitKVCapable reports whether the kernel has a split-KV form: flash_fwd
// and flash_fwd_sinks do (the sinks join in the combination); varlen and
// the .full variant do not.
func (f *Forward) splitKVCapable() bool {
	return f.contract == attention.FlashFwd || f.contract == attention.FlashFwdSinks
}

// Plan is the plan of a call of shape sh on a device with sms
// multiprocessors (0: Options.SMs, else DefaultSMs): flash_fwd alone, or
// split-KV with the number of splits and the packing that Options ask for
// or, where they say auto, that the shape calls for. It depends on the
// shape only, not on the block mask (a sparse mask leaves some splits with
// fewer blocks, or none).
func (f *Forward) Plan(sh Shape, sms int) (DecodePlan, error) {
	p, err := f.plan(sh, sms, f.opts.PackGQA, sh.Validate)
	if err != nil || p.SplitKV {
		p.FusedCombine = p.SplitKV && f.opts.fusedCombine()
		return p, err
	}
	return DecodePlan{NumSplits: 1, Pack: 1, SMs: p.SMs}, nil
}

// plan is Plan with packing pk, its tile filled in even where split-KV does
// not pay (a paged call runs the split kernel whatever the plan says);
// validate checks sh (Validate, or ValidatePaged for a paged cache).
func (f *Forward) plan(sh Shape, sms int, pk PackGQA, validate func() error) (DecodePlan, error) {
	if f.opts.SMs > 0 {
		sms = f.opts.SMs
	}
	if sms <= 0 {
		sms = DefaultSMs
	}
	p := DecodePlan{NumSplits: 1, Pack: 1, SMs: sms, Sinks: f.opts.Sinks}
	if err := validate(); err != nil {
		return p, err
	}
	ns := f.opts.NumSplits
	if ns < 0 || ns > MaxSplits {
		return p, fmt.Errorf("NumSplits %d: want 0 (auto) to %d", ns, MaxSplits)
	}
	if pk < PackGQAAuto || pk > PackGQAOff {
		return p, fmt.Errorf("PackGQA %d: want auto, on or off", int(pk))
	}
	if !f.splitKVCapable() {
		if ns > 1 || pk == PackGQAOn {
			return p, fmt.Errorf("kernel %s has no split-KV or PackGQA form (set NumSplits 0 or 1 and PackGQA auto or off)", f.res.Kernel)
		}
		return p, nil
	}
	if err := f.splitTile(&p, sh.Heads/sh.KV(), sh.SeqQ, pk, sh.SeqQ <= MaxPackSeqQ); err != nil {
		return p, err
	}
	tiles := launch.CeilDiv(sh.SeqQ, p.QPerTile)
	if err := f.splitCount(&p, tiles*sh.Batch*sh.Heads/p.Pack, sh.SeqK, sh.Batch*sh.Heads*sh.SeqQ*sh.VDim()); err != nil {
		return p, err
	}
	p.SplitKV = p.NumSplits > 1 || p.Pack > 1 || pk == PackGQAOn
	return p, nil
}

// splitTile fills in p's packing and split kernel tile for query heads in
// groups of group per kv head and queries of up to seqQ positions (a q
// tile's run): PackGQA on packs every group, auto where short (the call
// would otherwise read each K/V tile once per query head) and the group
// fits a tile; BLOCK_M is DecodeConsts', else 16 where one 16-row tile
// holds seqQ positions of the packed heads, else 64.
func (f *Forward) splitTile(p *DecodePlan, group, seqQ int, pk PackGQA, short bool) error {
	switch {
	case pk == PackGQAOn:
		p.Pack = group
	case pk == PackGQAAuto && short && group > 1 && group <= maxBlockM:
		p.Pack = group
	}
	if p.Pack > maxBlockM {
		return fmt.Errorf("PackGQA: %d query heads per kv head do not fit a tile of at most %d rows", p.Pack, maxBlockM)
	}
	bm, userBM, err := f.splitBlockM(seqQ, p.Pack)
	if err != nil {
		return err
	}
	if p.Pack > bm {
		if userBM {
			return fmt.Errorf("PackGQA: %d query heads per kv head do not fit BLOCK_M = %d", p.Pack, bm)
		}
		bm = maxBlockM
	}
	sq, _ := f.sparse()
	bn, err := f.splitBlockN()
	if err != nil {
		return err
	}
	p.BlockM, p.BlockN = bm, bn
	p.QPerTile = attention.QPerTile(bm, p.Pack, sq)
	return nil
}

// splitCount fills in p's split count and programs for programs q-tile
// programs over up to seqK keys, whose partial outputs have rowElems
// elements a split (which must stay addressable with 32-bit offsets):
// Options.NumSplits, or where it says auto, chooseSplits' count.
func (f *Forward) splitCount(p *DecodePlan, programs, seqK, rowElems int) error {
	_, sk := f.sparse()
	iters := launch.CeilDiv(seqK, sk) * (sk / p.BlockN)
	most := min(MaxSplits, math.MaxInt32/max(rowElems, 1))
	switch ns := f.opts.NumSplits; {
	case ns == 0:
		p.NumSplits = min(chooseSplits(programs, iters*p.BlockN/minKeysPerSplit, p.SMs), most)
	case ns > most:
		return fmt.Errorf("NumSplits %d: the partial outputs of %d splits of %d elements each exceed 32-bit offsets", ns, ns, rowElems)
	default:
		p.NumSplits = ns
	}
	p.Programs = programs * p.NumSplits
	return nil
}

// chooseSplits is the automatic split count (FlashAttention-2's rule): none
// when the q tiles already fill 80% of two waves of programs (two per
// multiprocessor); else the smallest count whose last wave is at least 85%
// as full as the best count's, at most most (each split keeping at least
// minKeysPerSplit keys).
func chooseSplits(programs, most, sms int) int {
	slots := 2 * sms
	if programs*5 >= slots*4 {
		return 1
	}
	most = min(MaxSplits, most)
	if most <= 1 {
		return 1
	}
	eff := func(s int) float64 {
		w := float64(programs*s) / float64(slots)
		return w / math.Ceil(w)
	}
	best := 0.0
	for s := 1; s <= most; s++ {
		best = max(best, eff(s))
	}
	for s := 1; s <= most; s++ {
		if eff(s) >= 0.85*best {
			return s
		}
	}
	return 1
}

// maxBlockM is the largest tile flash_fwd_splitkv is compiled with.
const maxBlockM = 64

// splitBlockM is flash_fwd_splitkv's BLOCK_M for sq query positions of
// pack heads: DecodeConsts' BLOCK_M when given (user true), else 16 (the
// smallest mma tile) when one such tile holds them all, 64 otherwise.
func (f *Forward) splitBlockM(sq, pack int) (bm int, user bool, err error) {
	if v, ok := f.opts.DecodeConsts["BLOCK_M"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, true, fmt.Errorf("DecodeConsts BLOCK_M = %q: want a positive integer", v)
		}
		return n, true, nil
	}
	if sparseQ, _ := f.sparse(); attention.QPerTile(16, pack, sparseQ) >= sq {
		return 16, false, nil
	}
	return maxBlockM, false, nil
}

// splitBlockN is flash_fwd_splitkv's BLOCK_N: DecodeConsts' BLOCK_N, else
// 64 or the largest power of two below it that divides SPARSE_K (64 keys:
// K and V tiles of 16 KB each at D = 128 in bf16, double-buffered by
// codegen's prefetch, 72 KB of shared memory, three programs per H200
// multiprocessor; 128 keys take 144 KB, one program).
func (f *Forward) splitBlockN() (int, error) {
	_, sk := f.sparse()
	if v, ok := f.opts.DecodeConsts["BLOCK_N"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || sk%n != 0 {
			return 0, fmt.Errorf("DecodeConsts BLOCK_N = %q: want a positive divisor of SPARSE_K = %d", v, sk)
		}
		return n, nil
	}
	bn := 64
	for bn > 1 && sk%bn != 0 {
		bn /= 2
	}
	return bn, nil
}

// splitFamilyKernel compiles (once per kernel, BLOCK_M and tilePages) c's
// kernel, flash_fwd_splitkv, flash_fwd_paged or flash_fwd_paged_varlen,
// which take the same constants; tilePages sets the paged kernels'
// TILE_PAGES.
func (f *Forward) splitFamilyKernel(c *launch.Contract, blockM int, tilePages int) (*compiler.Result, error) {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	key := splitKey{c.Kernel, blockM, tilePages}
	if r, ok := f.splitRes[key]; ok {
		return r, nil
	}
	a := f.res.Attrs()
	consts := map[string]string{}
	for k, v := range f.opts.DecodeConsts {
		switch k {
		case "HEAD_DIM", "HEAD_DIM_V", "DTYPE", "SPARSE_Q", "SPARSE_K", "mask", "score":
			return nil, fmt.Errorf("DecodeConsts %s: flash_fwd_splitkv takes it from the forward kernel (Options.Consts, DimV, Mask, Score, DType)", k)
		case "TILE_PAGES":
			return nil, fmt.Errorf("DecodeConsts TILE_PAGES: a paged call sets it from its page size and BLOCK_N")
		case fusedCombineConst:
			if c == attention.FlashFwdPagedVarlen {
				continue // ragged batches keep flash_fwd_combine
			}
		}
		consts[k] = v
	}
	if tilePages > 0 {
		consts["TILE_PAGES"] = strconv.Itoa(tilePages)
	}
	bn, err := f.splitBlockN()
	if err != nil {
		return nil, err
	}
	consts["BLOCK_M"] = strconv.Itoa(blockM)
	consts["BLOCK_N"] = strconv.Itoa(bn)
	consts["HEAD_DIM"] = strconv.Itoa(f.dim)
	if f.dimV != f.dim {
		consts["HEAD_DIM_V"] = strconv.Itoa(f.dimV)
	}
	consts["DTYPE"] = f.dtype.String()
	consts["SPARSE_Q"] = strconv.FormatInt(a["SPARSE_Q"], 10)
	consts["SPARSE_K"] = strconv.FormatInt(a["SPARSE_K"], 10)
	res, err := compileKernel(c, compiler.Request{Sources: f.opts.Sources, Kernel: c.Kernel,
		Mask: f.opts.Mask, Score: f.opts.Score, Consts: consts, Passes: f.opts.Passes, Target: f.opts.target()})
	if err != nil {
		return nil, err
	}
	if f.splitRes == nil {
		f.splitRes = map[splitKey]*compiler.Result{}
	}
	f.splitRes[key] = res
	return res, nil
}

// fusedCombineConst is flash_fwd_splitkv's compile-time argument that
// merges the splits in place (DecodePlan.FusedCombine).
const fusedCombineConst = "fused_combine"

// fusedCombine reports whether DecodeConsts ask flash_fwd_splitkv to merge
// its splits in place (check has refused a value other than true or
// false, and true with sinks).
func (o Options) fusedCombine() bool { return o.DecodeConsts[fusedCombineConst] == "true" }

// splitKey names a compiled split-family kernel: its name, BLOCK_M and
// TILE_PAGES.
type splitKey struct {
	kernel    string
	blockM    int
	tilePages int
}

// combineKernel compiles (once per width) flash_fwd_combine for f's dtype
// and head dims, merging up to combineWidth(splits) splits: a program loads
// a [MAX_SPLITS, HEAD_DIM_V] tile, so 64 rows for 4 splits would be 16 times
// the registers, masked loads and reduction work the row needs.
func (f *Forward) combineKernel(splits int) (*compiler.Result, error) {
	w := combineWidth(splits)
	f.dmu.Lock()
	defer f.dmu.Unlock()
	if r, ok := f.combineRes[w]; ok {
		return r, nil
	}
	consts := map[string]string{"HEAD_DIM": strconv.Itoa(f.dim), "DTYPE": f.dtype.String(), "MAX_SPLITS": strconv.Itoa(w)}
	if f.dimV != f.dim {
		consts["HEAD_DIM_V"] = strconv.Itoa(f.dimV)
	}
	// A dependent launch of the split kernel asks the same of its combine.
	if v, ok := f.opts.DecodeConsts["pdl"]; ok {
		consts["pdl"] = v
	}
	c := attention.FlashFwdCombine
	if f.opts.Sinks {
		c = attention.FlashFwdCombineSinks
	}
	res, err := compileKernel(c, compiler.Request{Kernel: c.Kernel, Passes: f.opts.Passes,
		Target: f.opts.target(), Consts: consts})
	if err != nil {
		return nil, err
	}
	if f.combineRes == nil {
		f.combineRes = map[int]*compiler.Result{}
	}
	f.combineRes[w] = res
	return res, nil
}

// combineWidth is flash_fwd_combine's MAX_SPLITS for a plan of n splits:
// the power of two from 2 to MaxSplits that holds them.
func combineWidth(n int) int {
	w := 2
	for w < n && w < MaxSplits {
		w *= 2
	}
	return w
}

// combineWidths are the widths a bundle holds: every one a plan can pick.
func combineWidths() []int {
	var out []int
	for w := 2; w <= MaxSplits; w *= 2 {
		out = append(out, w)
	}
	return out
}

// DecodeKernels compiles the kernels of plan (none for a plan without
// split-KV), in launch order.
func (f *Forward) DecodeKernels(plan DecodePlan) ([]*compiler.Result, error) {
	if !plan.SplitKV {
		return nil, nil
	}
	ks, err := f.planKernels(plan)
	if err != nil {
		return nil, err
	}
	return results(ks), nil
}

// planKernels compiles the kernels of split-KV plan's variant: kv_append
// where the paged call appends, the split kernel (flash_fwd_splitkv,
// flash_fwd_paged or flash_fwd_paged_varlen) with the plan's tile, then
// flash_fwd_combine for its splits.
func (f *Forward) planKernels(plan DecodePlan) ([]stage, error) {
	cs, err := plan.variant().Kernels(attention.VariantOptions{Sinks: plan.Sinks})
	if err != nil {
		return nil, err
	}
	ks := make([]stage, len(cs))
	for i, c := range cs {
		var res *compiler.Result
		switch c {
		case attention.FlashFwdCombine, attention.FlashFwdCombineSinks:
			res, err = f.combineKernel(plan.NumSplits)
		case attention.KVAppend:
			res, err = f.appendKernel()
		default:
			res, err = f.splitFamilyKernel(c, plan.BlockM, plan.TilePages)
		}
		if err != nil {
			return nil, err
		}
		ks[i] = stage{res: res, contract: c}
	}
	return ks, nil
}

// forwardCall is a forward call bound: the kernels it runs (flash_fwd, or
// a split-KV plan's), their calls and the block mask they read.
type forwardCall struct {
	ks    []stage
	calls []*launch.Call
	bm    *blockmask.BlockMask
}

// bindPlan binds a call of plan: f's kernel, or the split-KV kernels with
// bm packed for PackGQA. aux are the aux tensors' lengths by the caller's
// names, strides the leading-dimension strides of q, k, v and o.
func (f *Forward) bindPlan(plan DecodePlan, sh Shape, scale float32, bm *blockmask.BlockMask, aux map[string]int, scalars map[string]any, strides map[string][]int) (*forwardCall, error) {
	c := &forwardCall{ks: f.kernels(), bm: bm}
	p := launch.Problem{Shape: sh, Scale: scale}
	if plan.SplitKV {
		var err error
		if c.ks, err = f.planKernels(plan); err != nil {
			return nil, err
		}
		if c.bm, err = packBlockMask(bm, plan.Pack, sh.KV()); err != nil {
			return nil, err
		}
		p.NumSplits, p.Pack = plan.NumSplits, plan.Pack
	}
	var err error
	c.calls, err = bindAll(c.ks, 0, launch.Request{Problem: p, Strides: strides, BlockMask: c.bm, Aux: aux, Scalars: scalars}, nil)
	return c, err
}

// packBlockMask is bm as PackGQA's tiles read it, one row per (b, kv head,
// q block): bm itself when it is shared over heads (H = 1) or nothing is
// packed; else each kv head's row is the union of its query heads' rows,
// a block full only where it is full for every head of the group, empty
// only where it is empty for every one, partial otherwise (the kernel then
// applies the mask, which gives each row its own head's answer).
func packBlockMask(bm *blockmask.BlockMask, pack, kvHeads int) (*blockmask.BlockMask, error) {
	b, h, nq, nk := bm.Dims()
	if pack <= 1 || h == 1 {
		return bm, nil
	}
	if h != pack*kvHeads {
		return nil, fmt.Errorf("block mask has %d heads; PackGQA needs 1 or %d (%d kv heads × %d)", h, pack*kvHeads, kvHeads, pack)
	}
	counts, idx, fullCounts, fullIdx := bm.Lists(false)
	rows := b * h * nq
	if rows == 0 || len(counts) != rows || len(fullCounts) != rows || len(idx)%rows != 0 || len(fullIdx)%rows != 0 {
		return nil, fmt.Errorf("block mask lists do not match its dims %d×%d×%d×%d", b, h, nq, nk)
	}
	w, fw := len(idx)/rows, len(fullIdx)/rows // index row strides
	g, err := blockmask.NewGrid(b, kvHeads, bm.SeqQ, bm.SeqK, bm.BlockQ, bm.BlockK)
	if err != nil {
		return nil, err
	}
	if g.NumQ != nq || g.NumK != nk {
		return nil, fmt.Errorf("block mask has %d×%d blocks, its sizes give %d×%d", nq, nk, g.NumQ, g.NumK)
	}
	nFull, nAny := make([]int, nk), make([]int, nk)
	for bb := 0; bb < b; bb++ {
		for hk := 0; hk < kvHeads; hk++ {
			for qb := 0; qb < nq; qb++ {
				clear(nFull)
				clear(nAny)
				for hh := hk * pack; hh < (hk+1)*pack; hh++ {
					row := (bb*h+hh)*nq + qb
					for i := 0; i < int(counts[row]); i++ {
						if kb := int(idx[row*w+i]); kb >= 0 && kb < nk {
							nAny[kb]++
						}
					}
					for i := 0; i < int(fullCounts[row]); i++ {
						if kb := int(fullIdx[row*fw+i]); kb >= 0 && kb < nk {
							nAny[kb]++
							nFull[kb]++
						}
					}
				}
				for kb := 0; kb < nk; kb++ {
					switch {
					case nFull[kb] == pack:
						g.Set(bb, hk, qb, kb, blockmask.Full)
					case nAny[kb] > 0:
						g.Set(bb, hk, qb, kb, blockmask.Partial)
					}
				}
			}
		}
	}
	out, err := blockmask.FromClasses(g)
	if err != nil {
		return nil, err
	}
	out.Mask, out.BuiltB, out.BuiltH, out.Params = bm.Mask, bm.BuiltB, bm.BuiltH, bm.Params
	return out, nil
}
