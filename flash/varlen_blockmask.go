package flash

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/passes"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// VarlenBlockMask is the block mask of a varlen call: every sequence's own,
// built for its lengths with its blocks counted from its first token, and
// concatenated (one row per sequence, mask head and block, in both
// directions: the kv blocks of each q block, which flash_fwd_varlen walks,
// and the q blocks of each kv block, for a backward). A mask that ignores
// h has one row set for all heads of a sequence.
//
// How it is built depends on what the mask reads, so that the host work
// is O(blocks), not O(tokens²) nor a build per sequence:
//   - neither the lengths nor b (causal, windows, documents): one block
//     mask for the longest lengths, each sequence's rows cut from it
//     (blocks at a sequence's ends keep their class, which stays right:
//     a full or empty block is full or empty on any part of it, and a
//     partial one is evaluated);
//   - seqlen_q or seqlen_k (bottom-right causal): one block mask per
//     distinct pair of lengths;
//   - b (or batch): each sequence would need its own; its blocks are all
//     listed as partial instead (the mask is evaluated on every tile).
//
// It records what it was built for (the cu_seqlens, heads, mask, block
// sizes and the mask's run-time parameters) and a call with anything else
// refuses it; the aux data a mask reads is the caller's to keep.
type VarlenBlockMask struct {
	blockQ, blockK int
	heads          int
	cuQ, cuK       []int32
	mask           string
	params         map[string]string
	kv, q          varlenRows
	evaluated      int // sequences listed all-partial (the mask reads b)
}

// varlenRows are one direction's rows (attention.VarlenLists): rowStart
// [num_seqs·heads] is the first row of (b, h); each row has counts[r]
// partial and full[r] full blocks, listed from listStart[r] in indices.
type varlenRows struct {
	rowStart, counts, full, listStart, indices []int32
}

// Counts are the partial and full (q block, kv block) pairs the mask's
// rows list, summed over sequences and mask heads (once per head where
// the mask reads h); the rest of each sequence's blocks are skipped.
func (m *VarlenBlockMask) Counts() (partial, full int) {
	for r := range m.kv.counts {
		partial += int(m.kv.counts[r])
		full += int(m.kv.full[r])
	}
	return partial, full
}

// Blocks is the number of (q block, kv block) pairs of all sequences,
// listed or not, at the mask's block size, per mask head.
func (m *VarlenBlockMask) Blocks() int {
	n := 0
	for b := 0; b+1 < len(m.cuQ); b++ {
		sq, sk := int(m.cuQ[b+1]-m.cuQ[b]), int(m.cuK[b+1]-m.cuK[b])
		n += cdiv(sq, m.blockQ) * cdiv(sk, m.blockK)
	}
	return n
}

// EvaluatedSequences is the number of sequences whose blocks are all
// listed as partial because the mask reads b.
func (m *VarlenBlockMask) EvaluatedSequences() int { return m.evaluated }

func cdiv(a, b int) int { return (a + b - 1) / b }

// seqBlocks is one sequence's block mask in row form, for heads mask heads
// (1 where the mask ignores h): kv has heads·numQ rows, q heads·numK.
type seqBlocks struct {
	heads int
	kv, q varlenRows // rowStart unused; listStart relative to indices
}

// BlockMask builds the block mask of a call (in's cu_seqlens, aux tensors
// and run-time parameters; Q, K, V are not read), for heads query heads.
func (v *ForwardVarlen) BlockMask(in VarlenInputs, heads int) (*VarlenBlockMask, error) {
	f := v.f
	// Check the lengths before anything is allocated for them.
	if len(in.CuSeqlensQ) > 0 && len(in.CuSeqlensK) > 0 {
		if _, err := VarlenShape(in.CuSeqlensQ, in.CuSeqlensK, int(in.CuSeqlensQ[len(in.CuSeqlensQ)-1]), int(in.CuSeqlensK[len(in.CuSeqlensK)-1]), heads, heads, f.dim); err != nil {
			return nil, err
		}
	}
	a := f.res.Attrs()
	return buildVarlenBlockMask(f.res.Program, f.res.Mask, in, heads, int(a["SPARSE_Q"]), int(a["SPARSE_K"]), f.maskParams(in.modValues()))
}

// modValues are the mods' aux tensors and run-time parameters by name.
func (in VarlenInputs) modValues() map[string]any {
	return Inputs{Aux: in.Aux, Scalars: in.Scalars}.modValues()
}

func buildVarlenBlockMask(prog *lang.Program, mask *lang.ModInst, in VarlenInputs, heads, bq, bk int, params map[string]string) (*VarlenBlockMask, error) {
	cuQ, cuK := in.CuSeqlensQ, in.CuSeqlensK
	if len(cuQ) < 2 || len(cuQ) != len(cuK) {
		return nil, fmt.Errorf("cu_seqlens_q and cu_seqlens_k must have the same length num_seqs + 1 ≥ 2, got %d and %d", len(cuQ), len(cuK))
	}
	if heads <= 0 || bq <= 0 || bk <= 0 {
		return nil, fmt.Errorf("varlen block mask: heads %d and blocks %d×%d must be positive", heads, bq, bk)
	}
	nseq := len(cuQ) - 1
	m := &VarlenBlockMask{blockQ: bq, blockK: bk, heads: heads, cuQ: slices.Clone(cuQ), cuK: slices.Clone(cuK), mask: "none", params: params}
	if mask != nil {
		m.mask = mask.String()
	}
	m.kv.rowStart = make([]int32, nseq*heads)
	m.q.rowStart = make([]int32, nseq*heads)
	maxQ, maxK := 0, 0
	for b := range nseq {
		sq, sk := int(cuQ[b+1])-int(cuQ[b]), int(cuK[b+1])-int(cuK[b])
		if sq < 0 || sk < 0 {
			return nil, fmt.Errorf("cu_seqlens decrease at sequence %d", b)
		}
		if sq > 0 && sk > 0 {
			maxQ, maxK = max(maxQ, sq), max(maxK, sk)
		}
	}
	src := &seqSource{prog: prog, mask: mask, nseq: nseq, heads: heads, bq: bq, bk: bk, vals: in.modValues(), maxQ: maxQ, maxK: maxK}
	if err := src.init(); err != nil {
		return nil, err
	}
	built := map[[2]int]*seqBlocks{}
	for b := range nseq {
		sq, sk := int(cuQ[b+1])-int(cuQ[b]), int(cuK[b+1])-int(cuK[b])
		key := [2]int{sq, sk}
		sb, ok := built[key]
		if !ok {
			var err error
			if sb, err = src.blocks(sq, sk); err != nil {
				return nil, fmt.Errorf("block mask of sequence %d (%d×%d): %w", b, sq, sk, err)
			}
			built[key] = sb
		}
		if src.readsB && sq > 0 && sk > 0 {
			m.evaluated++
		}
		m.kv.add(b, heads, sb.heads, sb.kv)
		m.q.add(b, heads, sb.heads, sb.q)
	}
	if int64(len(m.kv.indices)) > 1<<31-1 || int64(len(m.q.indices)) > 1<<31-1 {
		return nil, fmt.Errorf("varlen block mask: more than 2^31 listed blocks")
	}
	return m, nil
}

// add appends one sequence's rows (for hs mask heads) and points the
// (b, h) row starts at them.
func (r *varlenRows) add(b, heads, hs int, s varlenRows) {
	base, lbase := int32(len(r.counts)), int32(len(r.indices))
	per := int32(len(s.counts) / hs)
	for h := range heads {
		r.rowStart[b*heads+h] = base + int32(h%hs)*per
	}
	r.counts = append(r.counts, s.counts...)
	r.full = append(r.full, s.full...)
	for _, x := range s.listStart {
		r.listStart = append(r.listStart, lbase+x)
	}
	r.indices = append(r.indices, s.indices...)
}

// seqSource makes the block masks of a call's sequences (see
// VarlenBlockMask for the three ways).
type seqSource struct {
	prog        *lang.Program
	mask        *lang.ModInst
	nseq, heads int
	bq, bk      int
	vals        map[string]any
	maxQ, maxK  int // the longest lengths of sequences with queries and keys
	readsB      bool
	readsLen    bool
	big         *blockmask.BlockMask // for maxQ × maxK, when the mask reads neither
	// noEvaluate: where the analytic builder declines, list every block
	// as partial (the kernel evaluates the mask) rather than evaluate
	// the mask over the whole problem on the CPU, which a ragged batch's
	// problems (each sequence's cache length squared) make too dear.
	noEvaluate bool
	partial    bool                         // every block partial (noEvaluate, declined)
	built      map[int]*blockmask.BlockMask // ragged: by length, when the mask reads the lengths
}

// init finds what the mask reads and builds the block mask for the
// longest lengths when the mask reads neither b nor the lengths.
func (s *seqSource) init() error {
	if s.mask == nil || s.maxQ == 0 {
		return nil
	}
	var err error
	if s.readsB, s.readsLen, err = maskReads(s.prog, s.mask); err != nil {
		return err
	}
	if s.readsB || s.readsLen {
		return nil
	}
	s.big, err = s.build(s.maxQ, s.maxK)
	s.partial = s.big == nil
	return err
}

// build is the block mask of one sq × sk problem, analytic or evaluated.
func (s *seqSource) build(sq, sk int) (*blockmask.BlockMask, error) {
	sh := blockmask.Shape{B: s.nseq, H: s.heads, SeqQ: sq, SeqK: sk}
	opts := blockmask.Options{BlockQ: s.bq, BlockK: s.bk}
	bm, err := blockmask.AnalyticWith(s.prog, s.mask, sh, opts, s.vals)
	if errors.Is(err, blockmask.ErrNotAnalyzable) {
		if s.noEvaluate {
			return nil, nil
		}
		bm, err = blockmask.EvaluateCPU(s.prog, s.mask, sh, opts, s.vals)
	}
	if err != nil {
		return nil, err
	}
	if bm.B != 1 || (bm.H != 1 && bm.H != s.heads) {
		return nil, fmt.Errorf("internal error: block mask of a mask that ignores b has B=%d H=%d", bm.B, bm.H)
	}
	return bm, nil
}

// blocks are the rows of one sequence of sq × sk positions. A sequence
// with no queries or no keys has no blocks to visit; no mask makes every
// block full, a mask reading b every block partial.
func (s *seqSource) blocks(sq, sk int) (*seqBlocks, error) {
	switch {
	case sq == 0 || sk == 0 || s.mask == nil:
		return allBlocks(sq, sk, s.bq, s.bk, true), nil
	case s.readsB:
		return allBlocks(sq, sk, s.bq, s.bk, false), nil
	}
	bm := s.big
	if bm == nil {
		var err error
		if bm, err = s.build(sq, sk); err != nil {
			return nil, err
		}
	}
	nq, nk := cdiv(sq, s.bq), cdiv(sk, s.bk)
	return &seqBlocks{heads: bm.H,
		kv: cutRows(bm.KVNumBlocks, bm.KVIndices, bm.FullKVNumBlocks, bm.FullKVIndices, bm.H, bm.NumQ, 0, nq, nk),
		q:  cutRows(bm.QNumBlocks, bm.QIndices, bm.FullQNumBlocks, bm.FullQIndices, bm.H, bm.NumK, 0, nk, nq)}, nil
}

// cutRows lists rows first to rows-1 of each of hs heads' rowsPer rows of
// a block mask direction as varlenRows, keeping the blocks below lim:
// each row's partial blocks, then its full ones. Valid indices lead each
// index row in ascending order (blockmask.BlockMask), so a row costs what
// it keeps; a row's width is the index tensor's length over the rows.
func cutRows(counts, indices, fullCounts, fullIndices []int32, hs, rowsPer, first, rows, lim int) varlenRows {
	var r varlenRows
	w, fw := len(indices)/max(len(counts), 1), len(fullIndices)/max(len(fullCounts), 1)
	below := func(xs []int32) []int32 {
		n, _ := slices.BinarySearch(xs, int32(lim))
		return xs[:n]
	}
	for h := range hs {
		for i := first; i < rows; i++ {
			row := h*rowsPer + i
			p := below(indices[row*w:][:counts[row]])
			f := below(fullIndices[row*fw:][:fullCounts[row]])
			r.listStart = append(r.listStart, int32(len(r.indices)))
			r.counts = append(r.counts, int32(len(p)))
			r.full = append(r.full, int32(len(f)))
			r.indices = append(append(r.indices, p...), f...)
		}
	}
	return r
}

// kvRowsFrom are the kv rows of one sequence's n × n problem (a ragged
// batch's: its queries are its last positions, the mods see seqlen_q =
// seqlen_k = n) from q block first on, the blocks its queries touch, and
// the mask heads they are for. Where the mask reads the lengths, each
// length's block mask is built once.
func (s *seqSource) kvRowsFrom(first, n int) (varlenRows, int, error) {
	nq, nk := cdiv(n, s.bq), cdiv(n, s.bk)
	switch {
	case n == 0 || s.mask == nil:
		return allRows(first, nq, nk, true), 1, nil
	case s.readsB || s.partial:
		return allRows(first, nq, nk, false), 1, nil
	}
	bm := s.big
	if bm == nil {
		bm = s.built[n]
		if bm == nil {
			var err error
			if bm, err = s.build(n, n); err != nil {
				return varlenRows{}, 0, err
			}
			if bm == nil { // declined (noEvaluate): the kernel evaluates every block
				s.partial = true
				return allRows(first, nq, nk, false), 1, nil
			}
			if s.built == nil {
				s.built = map[int]*blockmask.BlockMask{}
			}
			s.built[n] = bm
		}
	}
	return cutRows(bm.KVNumBlocks, bm.KVIndices, bm.FullKVNumBlocks, bm.FullKVIndices, bm.H, bm.NumQ, first, nq, nk), bm.H, nil
}

// maskReads reports whether a mask reads b (or batch) and whether it reads
// seqlen_q or seqlen_k, after dead code is removed (without folding the
// lengths: a conservative answer).
func maskReads(prog *lang.Program, inst *lang.ModInst) (b, lens bool, err error) {
	mod, err := prog.LowerMod(inst)
	if err != nil {
		return false, false, err
	}
	if err := passes.RunPipeline(mod, passes.MaskAnalysisPipeline, passes.Options{}); err != nil {
		return false, false, err
	}
	f := mod.Func("mask")
	// b, h, q_idx, kv_idx, seqlen_q, seqlen_k, batch, num_heads (lang.ModInputs)
	if f == nil || len(f.Params) < 8 {
		return false, false, fmt.Errorf("internal error: lowering mask %s gave no mask function", inst)
	}
	uses := func(i int) bool {
		found := false
		f.Body.Walk(func(op *tir.Op) bool {
			found = found || slices.Contains(op.Args, f.Params[i])
			return !found
		})
		return found
	}
	return uses(0) || uses(6), uses(4) || uses(5), nil
}

// allBlocks lists every block of an sq × sk sequence, all full or all
// partial, for one mask head.
func allBlocks(sq, sk, bq, bk int, full bool) *seqBlocks {
	nq, nk := cdiv(sq, bq), cdiv(sk, bk)
	return &seqBlocks{heads: 1, kv: allRows(0, nq, nk, full), q: allRows(0, nk, nq, full)}
}

// allRows lists rows first to rows-1 of one direction, each with all n
// blocks of the other, all full or all partial.
func allRows(first, rows, n int, full bool) varlenRows {
	rows = max(rows-first, 0)
	r := varlenRows{counts: make([]int32, rows), full: make([]int32, rows), listStart: make([]int32, rows),
		indices: make([]int32, 0, rows*n)}
	for i := range rows {
		r.listStart[i] = int32(len(r.indices))
		if full {
			r.full[i] = int32(n)
		} else {
			r.counts[i] = int32(n)
		}
		for j := range n {
			r.indices = append(r.indices, int32(j))
		}
	}
	return r
}

// varlenBlockMask is the call's block mask: in.BlockMask, checked against
// the call, or one built for it.
func (v *ForwardVarlen) varlenBlockMask(in VarlenInputs, heads int) (*VarlenBlockMask, error) {
	m := in.BlockMask
	if m == nil {
		return v.BlockMask(in, heads)
	}
	a := v.f.res.Attrs()
	want := "none"
	if v.f.res.Mask != nil {
		want = v.f.res.Mask.String()
	}
	switch {
	case m.mask != want:
		return nil, fmt.Errorf("varlen block mask was built for mask %s, the kernel has %s", m.mask, want)
	case m.blockQ != int(a["SPARSE_Q"]) || m.blockK != int(a["SPARSE_K"]):
		return nil, fmt.Errorf("varlen block mask has blocks of %d×%d, the kernel SPARSE_Q × SPARSE_K = %d×%d", m.blockQ, m.blockK, a["SPARSE_Q"], a["SPARSE_K"])
	case m.heads != heads:
		return nil, fmt.Errorf("varlen block mask was built for %d heads, the call has %d", m.heads, heads)
	case !slices.Equal(m.cuQ, in.CuSeqlensQ) || !slices.Equal(m.cuK, in.CuSeqlensK):
		return nil, fmt.Errorf("varlen block mask was built for other cu_seqlens")
	case !maps.Equal(m.params, v.f.maskParams(in.modValues())):
		return nil, fmt.Errorf("varlen block mask was built with the mask's run-time parameters %v, the call has %v", m.params, v.f.maskParams(in.modValues()))
	}
	return m, nil
}

// addLists adds lists l of m to host by kernel parameter name (the q
// lists where l is transposed, else the kv lists), and their lengths to
// lens for launch.Problem.Lens (each buffer at least 1 long).
func (m *VarlenBlockMask) addLists(l *attention.VarlenLists, host map[string]any, lens map[string]int) {
	r := &m.kv
	if l.Transposed {
		r = &m.q
	}
	pad := func(xs []int32) []int32 {
		if len(xs) == 0 {
			return []int32{0}
		}
		return xs
	}
	host[l.RowStart] = pad(r.rowStart)
	host[l.Counts] = pad(r.counts)
	host[l.FullCounts] = pad(r.full)
	host[l.ListStart] = pad(r.listStart)
	host[l.Indices] = pad(r.indices)
	lens[l.Counts] = len(r.counts)
	lens[l.Indices] = len(r.indices)
}
