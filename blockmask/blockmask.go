// Package blockmask computes block sparsity masks for attention kernels whose
// mask is user code: which (query block, key block) tiles a mask keeps
// entirely (full), keeps in part (partial) or drops (empty). The layout is
// FlexAttention's BlockMask, so masks move between fac and PyTorch as .npy
// files (see Save and Load, and docs/blockmask.md).
//
// Three builders give the same result: Analytic bounds the mask's tile IR
// over each block with interval and affine arithmetic (fast, for masks made
// of arithmetic on positions); EvaluateCPU runs the mask tile by tile on the
// reference interpreter (any mask, e.g. document masks reading aux tensors);
// BruteForce evaluates every element (the reference, for tests). Build tries
// Analytic, then falls back to EvaluateCPU. FromClasses turns a dense grid of
// block classes into the index lists, for any other builder.
package blockmask

import (
	"fmt"
	"slices"
)

// DefaultBlock is the default block size along each axis, FlexAttention's.
const DefaultBlock = 128

// MaxSeqLen bounds the sequence lengths the builders accept (2^30): it keeps
// the analytic builder's arithmetic exact in 64 bits.
const MaxSeqLen = 1 << 30

// MaxBlocks bounds the blocks of a block mask, B·H·NumQ·NumK with B and H
// those of the mask (1 where it ignores b or h), counted at its block size:
// 2^31 blocks already take 32 GiB of index tensors (16 bytes a block).
const MaxBlocks = 1 << 31

// Class is what a mask does on one block.
type Class uint8

const (
	Empty   Class = iota // the mask is false on every in-bounds pair of the block
	Partial              // true on some pairs, false on others
	Full                 // true on every in-bounds pair of the block
)

func (c Class) String() string {
	switch c {
	case Empty:
		return "empty"
	case Partial:
		return "partial"
	case Full:
		return "full"
	}
	return fmt.Sprintf("class(%d)", c)
}

// BlockMask is FlexAttention's BlockMask: for each query block the key
// blocks the kernel visits, split into partial blocks (the kernel evaluates
// the mask) and full blocks (it does not), and the transposed lists for the
// backward pass. Tensors are row-major; their leading dims are B and H, which
// are 1 where the mask ignores b (resp. h): one mask then serves every batch
// (head), as PyTorch broadcasts it.
//
// A block is Full when the mask is true for every (q, kv) of the block that
// lies inside [0,SeqQ)×[0,SeqK) (kernels mask sequence ends themselves),
// Empty when it is false for all of them, Partial otherwise.
//
// Each index row holds the valid indices first, ascending, then the other
// block indices, ascending, as far as the row goes (FlexAttention's
// stable-argsort layout, cut to the row's width); only the first count
// entries mean anything.
//
// An index row is KVWidth (QWidth) long: FlexAttention's tensors have rows
// of NumK (NumQ), but a row only needs to hold its longest list, and
// kernels use the width only as the row stride. The builders make rows as
// long as the longest list of the direction (at least 1), so a sliding
// window over a million positions takes megabytes, not a gigabyte; Load
// keeps the width of the files it reads.
type BlockMask struct {
	B, H           int
	SeqQ, SeqK     int
	BlockQ, BlockK int
	NumQ, NumK     int // ceil(SeqQ/BlockQ), ceil(SeqK/BlockK)
	KVWidth        int // length of a kv index row, in [1, NumK]
	QWidth         int // length of a q index row, in [1, NumQ]

	KVNumBlocks, FullKVNumBlocks []int32 // [B, H, NumQ]
	KVIndices, FullKVIndices     []int32 // [B, H, NumQ, KVWidth]
	QNumBlocks, FullQNumBlocks   []int32 // [B, H, NumK]
	QIndices, FullQIndices       []int32 // [B, H, NumK, QWidth]

	// Provenance, when known, so that a block mask is never used with a
	// mask it was not made from (a kernel trusts its full and empty blocks
	// and would compute the wrong attention): Mask is the canonical string
	// of the mask mod it was built from ("causal", "sliding_window(1023,
	// 0)", "none" for no mask), BuiltB and BuiltH the batch and heads of the
	// shape it was built for (B and H above are 1 where the mask ignores b
	// or h, so they alone cannot tell a shared mask from one built for a
	// single head). "" and 0 mean unknown: a set made by hand or by PyTorch.
	// Params are the values of the mask's run-time parameters it was built
	// with ("offset" → "5"); a decode offset changes the blocks. Save and
	// Load keep all of them in block_mask.json.
	Mask           string
	BuiltB, BuiltH int
	Params         map[string]string
}

// Grid is a dense grid of block classes, the common form every builder
// produces before FromClasses lists it.
type Grid struct {
	B, H           int
	SeqQ, SeqK     int
	BlockQ, BlockK int
	NumQ, NumK     int
	Classes        []Class // [B, H, NumQ, NumK], row-major
}

// NewGrid makes an all-empty grid, checking the geometry.
func NewGrid(b, h, seqQ, seqK, blockQ, blockK int) (*Grid, error) {
	if err := checkGeometry(b, h, seqQ, seqK, blockQ, blockK); err != nil {
		return nil, err
	}
	nq, nk := cdiv(seqQ, blockQ), cdiv(seqK, blockK)
	return &Grid{B: b, H: h, SeqQ: seqQ, SeqK: seqK, BlockQ: blockQ, BlockK: blockK, NumQ: nq, NumK: nk,
		Classes: make([]Class, b*h*nq*nk)}, nil
}

// checkGeometry checks a block mask's dimensions and that it has at most
// MaxBlocks blocks.
func checkGeometry(b, h, seqQ, seqK, blockQ, blockK int) error {
	if err := checkShape(b, h, seqQ, seqK); err != nil {
		return err
	}
	if err := checkBlockSize(blockQ, blockK); err != nil {
		return err
	}
	nq, nk := cdiv(seqQ, blockQ), cdiv(seqK, blockK)
	if _, ok := numBlocks(b, h, nq, nk); !ok {
		return fmt.Errorf("blockmask: B×H×NumQ×NumK = %d×%d×%d×%d blocks of %d×%d is more than %d",
			b, h, nq, nk, blockQ, blockK, MaxBlocks)
	}
	return nil
}

// checkShape checks B, H and the sequence lengths, each on its own: how
// many blocks they make depends on the block size, and on which of b and h
// the mask reads.
func checkShape(b, h, seqQ, seqK int) error {
	switch {
	case b < 1 || h < 1:
		return fmt.Errorf("blockmask: B and H must be at least 1, got B=%d H=%d", b, h)
	case seqQ < 1 || seqK < 1 || seqQ > MaxSeqLen || seqK > MaxSeqLen:
		return fmt.Errorf("blockmask: sequence lengths must be in [1, 2^30], got SeqQ=%d SeqK=%d", seqQ, seqK)
	}
	return nil
}

func checkBlockSize(blockQ, blockK int) error {
	if blockQ < 1 || blockK < 1 || blockQ > MaxSeqLen || blockK > MaxSeqLen {
		return fmt.Errorf("blockmask: block sizes must be in [1, 2^30], got BlockQ=%d BlockK=%d", blockQ, blockK)
	}
	return nil
}

// numBlocks is the product of positive dims, or false when it is more than
// MaxBlocks. Each partial product stays at most MaxBlocks, so no
// multiplication overflows, whatever the dims.
func numBlocks(dims ...int) (int64, bool) {
	n := int64(1)
	for _, d := range dims {
		if d < 1 || int64(d) > MaxBlocks/n {
			return 0, false
		}
		n *= int64(d)
	}
	return n, true
}

func cdiv(a, b int) int { return (a + b - 1) / b }

// At is the class of block (qb, kb) of mask (b, h).
func (g *Grid) At(b, h, qb, kb int) Class { return g.Classes[((b*g.H+h)*g.NumQ+qb)*g.NumK+kb] }

// Set sets the class of block (qb, kb) of mask (b, h).
func (g *Grid) Set(b, h, qb, kb int, c Class) { g.Classes[((b*g.H+h)*g.NumQ+qb)*g.NumK+kb] = c }

// Rows is the number of in-bounds query positions of query block qb.
func (g *Grid) Rows(qb int) int { return min(g.BlockQ, g.SeqQ-qb*g.BlockQ) }

// Cols is the number of in-bounds key positions of key block kb.
func (g *Grid) Cols(kb int) int { return min(g.BlockK, g.SeqK-kb*g.BlockK) }

// FromClasses lists a dense class grid as a BlockMask: the kv lists from the
// rows, the q lists from the columns, each row valid-first in FlexAttention's
// layout, as long as the longest list of its direction.
func FromClasses(g *Grid) (*BlockMask, error) {
	if err := checkGeometry(g.B, g.H, g.SeqQ, g.SeqK, g.BlockQ, g.BlockK); err != nil {
		return nil, err
	}
	nq, nk := cdiv(g.SeqQ, g.BlockQ), cdiv(g.SeqK, g.BlockK)
	if g.NumQ != nq || g.NumK != nk {
		return nil, fmt.Errorf("blockmask: grid has %d×%d blocks, SeqQ=%d SeqK=%d in %d×%d blocks need %d×%d",
			g.NumQ, g.NumK, g.SeqQ, g.SeqK, g.BlockQ, g.BlockK, nq, nk)
	}
	if len(g.Classes) != g.B*g.H*nq*nk {
		return nil, fmt.Errorf("blockmask: grid has %d classes, want B*H*NumQ*NumK = %d", len(g.Classes), g.B*g.H*nq*nk)
	}
	for i, c := range g.Classes {
		if c > Full {
			return nil, fmt.Errorf("blockmask: grid class %d at index %d is not empty, partial or full", c, i)
		}
	}
	runs := make([][]blockRun, g.B*g.H)
	for m := range runs {
		classes := g.Classes[m*nq*nk:][:nq*nk]
		for qb := range nq {
			runs[m] = rowRuns(runs[m], qb, classes[qb*nk:][:nk])
		}
	}
	return listsFromRuns(g.B, g.H, g.SeqQ, g.SeqK, g.BlockQ, g.BlockK, runs, 0, 0)
}

// Grid returns the dense class grid of a valid BlockMask (from its kv lists).
func (bm *BlockMask) Grid() *Grid {
	g := &Grid{B: bm.B, H: bm.H, SeqQ: bm.SeqQ, SeqK: bm.SeqK, BlockQ: bm.BlockQ, BlockK: bm.BlockK,
		NumQ: bm.NumQ, NumK: bm.NumK, Classes: make([]Class, bm.B*bm.H*bm.NumQ*bm.NumK)}
	for r := range bm.B * bm.H * bm.NumQ {
		row := g.Classes[r*bm.NumK:][:bm.NumK]
		for _, kb := range bm.KVIndices[r*bm.KVWidth:][:bm.KVNumBlocks[r]] {
			row[kb] = Partial
		}
		for _, kb := range bm.FullKVIndices[r*bm.KVWidth:][:bm.FullKVNumBlocks[r]] {
			row[kb] = Full
		}
	}
	return g
}

// Class is the class of block (qb, kb) of mask (b, h). A B (or H) of 1
// broadcasts: any b (h) reads the one mask. It panics on indices out of
// range, like a slice.
func (bm *BlockMask) Class(b, h, qb, kb int) Class {
	if bm.B == 1 {
		b = 0
	}
	if bm.H == 1 {
		h = 0
	}
	if b < 0 || b >= bm.B || h < 0 || h >= bm.H || qb < 0 || qb >= bm.NumQ || kb < 0 || kb >= bm.NumK {
		panic(fmt.Sprintf("blockmask: block (b=%d, h=%d, q=%d, kv=%d) out of range [%d, %d, %d, %d]", b, h, qb, kb, bm.B, bm.H, bm.NumQ, bm.NumK))
	}
	r := (b*bm.H+h)*bm.NumQ + qb
	if slices.Contains(bm.KVIndices[r*bm.KVWidth:][:bm.KVNumBlocks[r]], int32(kb)) {
		return Partial
	}
	if slices.Contains(bm.FullKVIndices[r*bm.KVWidth:][:bm.FullKVNumBlocks[r]], int32(kb)) {
		return Full
	}
	return Empty
}

// Density is the fraction of (q, kv) pairs of [0,SeqQ)×[0,SeqK), over every
// (b, h) mask, that lie in partial or full blocks: the share of the work a
// kernel does. Blocks at the sequence ends count their clipped area. It
// reads the lists: O(rows + kept blocks).
func (bm *BlockMask) Density() float64 {
	kept := bm.KeptArea()
	return float64(kept) / (float64(bm.B*bm.H) * float64(bm.SeqQ) * float64(bm.SeqK))
}

// KeptArea is the number of (q, kv) pairs of [0,SeqQ)×[0,SeqK), summed over
// the (b, h) masks, that lie in partial or full blocks (blocks at the
// sequence ends count their clipped area).
func (bm *BlockMask) KeptArea() int64 {
	var kept int64
	lastK := bm.SeqK - (bm.NumK-1)*bm.BlockK // columns of the last kv block
	for r := range bm.B * bm.H * bm.NumQ {
		qb := r % bm.NumQ
		rows := int64(min(bm.BlockQ, bm.SeqQ-qb*bm.BlockQ))
		var cols int64
		for _, list := range [2][]int32{bm.KVIndices[r*bm.KVWidth:][:bm.KVNumBlocks[r]], bm.FullKVIndices[r*bm.KVWidth:][:bm.FullKVNumBlocks[r]]} {
			cols += int64(len(list)) * int64(bm.BlockK)
			if slices.Contains(list, int32(bm.NumK-1)) {
				cols -= int64(bm.BlockK - lastK)
			}
		}
		kept += rows * cols
	}
	return kept
}

// Counts returns how many blocks are empty, partial and full, over all
// (b, h) masks.
func (bm *BlockMask) Counts() (empty, partial, full int) {
	for _, n := range bm.KVNumBlocks {
		partial += int(n)
	}
	for _, n := range bm.FullKVNumBlocks {
		full += int(n)
	}
	return bm.B*bm.H*bm.NumQ*bm.NumK - partial - full, partial, full
}

// Equal reports whether two block masks are identical: same geometry, same
// B and H (a broadcast mask is not equal to its copies), same index row
// widths and same tensors, filler slots included. Provenance (Mask, BuiltB,
// BuiltH) is not compared: it says where the blocks came from, not what a
// kernel reads.
func (bm *BlockMask) Equal(o *BlockMask) bool {
	if bm == nil || o == nil {
		return bm == o
	}
	return bm.B == o.B && bm.H == o.H && bm.SeqQ == o.SeqQ && bm.SeqK == o.SeqK &&
		bm.BlockQ == o.BlockQ && bm.BlockK == o.BlockK && bm.NumQ == o.NumQ && bm.NumK == o.NumK &&
		bm.KVWidth == o.KVWidth && bm.QWidth == o.QWidth &&
		slices.Equal(bm.KVNumBlocks, o.KVNumBlocks) && slices.Equal(bm.FullKVNumBlocks, o.FullKVNumBlocks) &&
		slices.Equal(bm.KVIndices, o.KVIndices) && slices.Equal(bm.FullKVIndices, o.FullKVIndices) &&
		slices.Equal(bm.QNumBlocks, o.QNumBlocks) && slices.Equal(bm.FullQNumBlocks, o.FullQNumBlocks) &&
		slices.Equal(bm.QIndices, o.QIndices) && slices.Equal(bm.FullQIndices, o.FullQIndices)
}

// Diff describes the first block where two masks of the same geometry
// differ ("" when their class grids agree), for test failures.
func Diff(a, b *BlockMask) string {
	if a.B != b.B || a.H != b.H || a.NumQ != b.NumQ || a.NumK != b.NumK || a.SeqQ != b.SeqQ || a.SeqK != b.SeqK {
		return fmt.Sprintf("geometry differs: B=%d H=%d Seq=%d×%d blocks %d×%d vs B=%d H=%d Seq=%d×%d blocks %d×%d",
			a.B, a.H, a.SeqQ, a.SeqK, a.NumQ, a.NumK, b.B, b.H, b.SeqQ, b.SeqK, b.NumQ, b.NumK)
	}
	ga, gb := a.Grid(), b.Grid()
	for i := range ga.Classes {
		if ga.Classes[i] != gb.Classes[i] {
			kb := i % a.NumK
			qb := i / a.NumK % a.NumQ
			h := i / (a.NumK * a.NumQ) % a.H
			bb := i / (a.NumK * a.NumQ * a.H)
			return fmt.Sprintf("block (b=%d, h=%d, q=%d, kv=%d): %s vs %s", bb, h, qb, kb, ga.Classes[i], gb.Classes[i])
		}
	}
	return ""
}
