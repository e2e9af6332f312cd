package blockmask

// Listing blocks without a dense grid: builders hand over rectangles of
// blocks of one class (runs), and listsFromRuns writes FlexAttention's four
// tensors of each direction from them, in time and memory proportional to
// the rows, the kept blocks and the index rows' width.

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// blockRun is a rectangle of blocks of one class: query blocks [r0, r1] by
// key blocks [c0, c1], inclusive.
type blockRun struct {
	r0, r1, c0, c1 int32
	c              Class
}

// appendBlock adds block (qb, kb) of class c to runs, extending the last run
// when it is the block just left of this one, in the same row and class.
// Empty blocks are left out.
func appendBlock(runs []blockRun, qb, kb int, c Class) []blockRun {
	if c == Empty {
		return runs
	}
	if n := len(runs); n > 0 {
		l := &runs[n-1]
		if l.c == c && l.r0 == int32(qb) && l.r1 == int32(qb) && l.c1 == int32(kb)-1 {
			l.c1++
			return runs
		}
	}
	return append(runs, blockRun{int32(qb), int32(qb), int32(kb), int32(kb), c})
}

// rowRuns appends the runs of one row of classes (block row qb).
func rowRuns(runs []blockRun, qb int, row []Class) []blockRun {
	for kb := 0; kb < len(row); {
		c := row[kb]
		end := kb + 1
		for end < len(row) && row[end] == c {
			end++
		}
		if c != Empty {
			runs = append(runs, blockRun{int32(qb), int32(qb), int32(kb), int32(end - 1), c})
		}
		kb = end
	}
	return runs
}

// listsFromRuns lists the partial and full runs of every (b, h) mask
// (runs[m], m = b·H + h; empty runs are ignored) as a BlockMask. The runs
// of a mask must be disjoint and come in an order where each block row
// meets its runs of a class left to right and each block column meets them
// top to bottom: row by row, or a recursive bisection that visits the first
// half of a rectangle before the second. kvWidth and qWidth are the index
// rows' lengths; 0 takes the longest list of the direction (at least 1).
func listsFromRuns(b, h, seqQ, seqK, blockQ, blockK int, runs [][]blockRun, kvWidth, qWidth int) (*BlockMask, error) {
	if err := checkGeometry(b, h, seqQ, seqK, blockQ, blockK); err != nil {
		return nil, err
	}
	nq, nk := cdiv(seqQ, blockQ), cdiv(seqK, blockK)
	bh := b * h
	if len(runs) != bh {
		return nil, fmt.Errorf("blockmask: internal error: runs of %d masks, want B*H = %d", len(runs), bh)
	}
	bm := &BlockMask{B: b, H: h, SeqQ: seqQ, SeqK: seqK, BlockQ: blockQ, BlockK: blockK, NumQ: nq, NumK: nk}
	counts := make([]int32, 2*bh*nq+2*bh*nk)
	take := func(s *[]int32, n int) []int32 {
		x := (*s)[:n:n]
		*s = (*s)[n:]
		return x
	}
	bm.KVNumBlocks, bm.FullKVNumBlocks = take(&counts, bh*nq), take(&counts, bh*nq)
	bm.QNumBlocks, bm.FullQNumBlocks = take(&counts, bh*nk), take(&counts, bh*nk)

	// Counts, by difference arrays over the rows (columns) each run spans.
	var dRow, dCol [2][]int64
	for f := range 2 {
		dRow[f], dCol[f] = make([]int64, nq+1), make([]int64, nk+1)
	}
	maxKV, maxQ := int64(0), int64(0)
	for m, rs := range runs {
		for f := range 2 {
			clear(dRow[f])
			clear(dCol[f])
		}
		for i, r := range rs {
			if r.c == Empty {
				continue
			}
			if r.c > Full || r.r0 < 0 || r.r0 > r.r1 || int(r.r1) >= nq || r.c0 < 0 || r.c0 > r.c1 || int(r.c1) >= nk {
				return nil, fmt.Errorf("blockmask: internal error: run %d of mask %d (%s, q blocks [%d,%d], kv blocks [%d,%d]) is not inside %d×%d blocks",
					i, m, r.c, r.r0, r.r1, r.c0, r.c1, nq, nk)
			}
			f := 0
			if r.c == Full {
				f = 1
			}
			w, ht := int64(r.c1-r.c0+1), int64(r.r1-r.r0+1)
			dRow[f][r.r0] += w
			dRow[f][r.r1+1] -= w
			dCol[f][r.c0] += ht
			dCol[f][r.c1+1] -= ht
		}
		for f, dst := range [2][]int32{bm.KVNumBlocks[m*nq:][:nq], bm.FullKVNumBlocks[m*nq:][:nq]} {
			n := int64(0)
			for r := range nq {
				n += dRow[f][r]
				if n > int64(nk) {
					return nil, fmt.Errorf("blockmask: internal error: runs of mask %d overlap (q block %d lists %d of %d kv blocks)", m, r, n, nk)
				}
				dst[r] = int32(n)
				maxKV = max(maxKV, n)
			}
		}
		for f, dst := range [2][]int32{bm.QNumBlocks[m*nk:][:nk], bm.FullQNumBlocks[m*nk:][:nk]} {
			n := int64(0)
			for c := range nk {
				n += dCol[f][c]
				if n > int64(nq) {
					return nil, fmt.Errorf("blockmask: internal error: runs of mask %d overlap (kv block %d lists %d of %d q blocks)", m, c, n, nq)
				}
				dst[c] = int32(n)
				maxQ = max(maxQ, n)
			}
		}
	}
	var err error
	if bm.KVWidth, err = rowWidth("kv", kvWidth, maxKV, nk); err != nil {
		return nil, err
	}
	if bm.QWidth, err = rowWidth("q", qWidth, maxQ, nq); err != nil {
		return nil, err
	}
	wk, wq := bm.KVWidth, bm.QWidth
	idx := make([]int32, 2*bh*nq*wk+2*bh*nk*wq)
	bm.KVIndices, bm.FullKVIndices = take(&idx, bh*nq*wk), take(&idx, bh*nq*wk)
	bm.QIndices, bm.FullQIndices = take(&idx, bh*nk*wq), take(&idx, bh*nk*wq)

	// The two directions are independent: list them side by side.
	var errs [2]error
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = writeLists(bm, runs, false) })
	errs[1] = writeLists(bm, runs, true)
	wg.Wait()
	if err := firstErr(errs[:]); err != nil {
		return nil, err
	}
	return bm, nil
}

// writeLists writes the index rows of one direction (the q lists when
// transposed) from the runs, then the filler. Each row's (column's) runs of
// a class come in ascending order, so every list comes out ascending.
func writeLists(bm *BlockMask, runs [][]blockRun, transposed bool) error {
	rows, w := bm.NumQ, bm.KVWidth
	idx := [2][]int32{bm.KVIndices, bm.FullKVIndices}
	counts := [2][]int32{bm.KVNumBlocks, bm.FullKVNumBlocks}
	what, other := "q", "kv" // a row is a q block, its indices kv blocks
	if transposed {
		rows, w = bm.NumK, bm.QWidth
		idx = [2][]int32{bm.QIndices, bm.FullQIndices}
		counts = [2][]int32{bm.QNumBlocks, bm.FullQNumBlocks}
		what, other = "kv", "q"
	}
	n := bm.NumK // the indices of this direction's rows
	if transposed {
		n = bm.NumQ
	}
	iota := make([]int32, n) // 0, 1, 2, ...: copied, which is faster than a loop of stores
	for i := range iota {
		iota[i] = int32(i)
	}
	pos := [2][]int32{make([]int32, rows), make([]int32, rows)}
	for m, rs := range runs {
		clear(pos[0])
		clear(pos[1])
		lists := [2][]int32{idx[0][m*rows*w:][:rows*w], idx[1][m*rows*w:][:rows*w]}
		for i, r := range rs {
			if r.c == Empty {
				continue
			}
			f := 0
			if r.c == Full {
				f = 1
			}
			// A run spans rows a0..a1 of this direction and indices b0..b1.
			a0, a1, b0, b1 := r.r0, r.r1, r.c0, r.c1
			if transposed {
				a0, a1, b0, b1 = r.c0, r.c1, r.r0, r.r1
			}
			for a := a0; a <= a1; a++ {
				row, p := lists[f][int(a)*w:][:w], pos[f][a]
				if p > 0 && row[p-1] >= b0 {
					return fmt.Errorf("blockmask: internal error: run %d of mask %d comes after %s block %d in %s block %d", i, m, other, row[p-1], what, a)
				}
				p += int32(copy(row[p:], iota[b0:b1+1]))
				pos[f][a] = p
			}
		}
	}
	// The filler: each row's other indices, ascending, as far as it goes.
	for f := range 2 {
		for r, n := range counts[f] {
			fillRow(idx[f][r*w:][:w], int(n), iota)
		}
	}
	return nil
}

// rowWidth picks an index row's length: want, or the longest list (at
// least 1) when want is 0.
func rowWidth(dir string, want int, longest int64, n int) (int, error) {
	if want == 0 {
		return int(max(longest, 1)), nil
	}
	if want < 1 || want > n {
		return 0, fmt.Errorf("blockmask: %s index rows of %d, want 1 to %d (the number of blocks)", dir, want, n)
	}
	if int64(want) < longest {
		return 0, fmt.Errorf("blockmask: %s index rows of %d cannot hold a list of %d blocks", dir, want, longest)
	}
	return want, nil
}

// fillRow completes an index row whose first n entries hold its valid
// indices, ascending: the other indices follow, ascending, until the row
// is full (iota holds 0, 1, 2, ... up to the number of blocks). A
// full-width row is FlexAttention's stable argsort; a shorter one is its
// first len(dst) entries.
func fillRow(dst []int32, n int, iota []int32) {
	j, next := n, int32(0)
	for _, v := range dst[:n] {
		if v > next {
			j += copy(dst[j:], iota[next:v])
			if j == len(dst) {
				return
			}
		}
		next = v + 1
	}
	copy(dst[j:], iota[next:])
}

// listRuns turns one direction's kv lists (counts [bh, nq], index rows of
// w) into runs, row by row. The valid indices of a row may come in any
// order; they are taken sorted.
func listRuns(bh, nq, w int, num, idx, fullNum, fullIdx []int32) [][]blockRun {
	runs := make([][]blockRun, bh)
	var scratch []int32
	for m := range bh {
		for qb := range nq {
			r := m*nq + qb
			for _, l := range [2]struct {
				num, idx []int32
				c        Class
			}{{num, idx, Partial}, {fullNum, fullIdx, Full}} {
				if l.num == nil {
					continue
				}
				list := l.idx[r*w:][:l.num[r]]
				if !slices.IsSorted(list) {
					scratch = append(scratch[:0], list...)
					slices.Sort(scratch)
					list = scratch
				}
				for _, kb := range list {
					runs[m] = appendBlock(runs[m], qb, int(kb), l.c)
				}
			}
		}
	}
	return runs
}

// WithWidths is bm with index rows kv and q long: 0 makes them as long as
// the longest list of the direction (what the builders make), NumK and
// NumQ give FlexAttention's full rows (for scripts that take the number of
// blocks from the index tensors' last dimension). The provenance is kept.
func (bm *BlockMask) WithWidths(kv, q int) (*BlockMask, error) {
	if err := bm.Validate(); err != nil {
		return nil, err
	}
	runs := listRuns(bm.B*bm.H, bm.NumQ, bm.KVWidth, bm.KVNumBlocks, bm.KVIndices, bm.FullKVNumBlocks, bm.FullKVIndices)
	out, err := listsFromRuns(bm.B, bm.H, bm.SeqQ, bm.SeqK, bm.BlockQ, bm.BlockK, runs, kv, q)
	if err != nil {
		return nil, err
	}
	out.Mask, out.BuiltB, out.BuiltH, out.Params = bm.Mask, bm.BuiltB, bm.BuiltH, maps.Clone(bm.Params)
	return out, nil
}
