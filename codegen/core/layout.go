package core

import "fmt"

// Layout is a distributed (register) layout template, in the manner of
// Triton's TTGIR encodings: it says how a tensor's elements are spread over
// the registers of the threads of a CTA. A template applies to any shape of
// its rank; Linear gives its concrete form on one shape. Layouts compare by
// String, which is canonical.
type Layout interface {
	Rank() int
	String() string
	// Linear is the layout on shape for a CTA of numWarps warps.
	Linear(shape []int, numWarps int) *Linear
}

// Blocked spreads a tensor in contiguous per-thread blocks: each thread
// holds SizePerThread elements along each dim, a warp's lanes tile
// ThreadsPerWarp blocks, and the CTA's warps tile WarpsPerCTA warp tiles;
// the CTA tile repeats (in registers) to cover bigger shapes and wraps
// (threads hold copies) on smaller ones. Order lists dims from fastest
// varying: lanes, warps and registers are assigned in that order.
type Blocked struct {
	SizePerThread  []int
	ThreadsPerWarp []int
	WarpsPerCTA    []int
	Order          []int
}

func (b Blocked) Rank() int { return len(b.Order) }

func (b Blocked) String() string {
	return fmt.Sprintf("blocked{spt=%v, tpw=%v, wpc=%v, order=%v}", b.SizePerThread, b.ThreadsPerWarp, b.WarpsPerCTA, b.Order)
}

func (b Blocked) Linear(shape []int, numWarps int) *Linear {
	lb := newLayoutBuilder(shape, numWarps)
	laneStart, warpStart := map[int]int{}, map[int]int{}
	ln, wn := 0, 0
	for _, d := range b.Order {
		laneStart[d], warpStart[d] = ln, wn
		ln += log2(b.ThreadsPerWarp[d])
		wn += log2(b.WarpsPerCTA[d])
	}
	var within [][]regSlot
	for d := range shape {
		var s []regSlot
		for i := 0; i < log2(b.SizePerThread[d]); i++ {
			s = append(s, lb.addReg(d))
		}
		within = append(within, s)
		for i := 0; i < log2(b.ThreadsPerWarp[d]); i++ {
			lb.addLane(d, laneStart[d]+i)
		}
		for i := 0; i < log2(b.WarpsPerCTA[d]); i++ {
			lb.addWarp(d, warpStart[d]+i)
		}
	}
	for _, d := range b.Order {
		lb.reg(within[d]...)
	}
	for _, d := range b.Order {
		lb.repeats(d)
	}
	return lb.build()
}

// permute returns the blocked layout of the transposed tensor: out dim i is
// in dim perm[i].
func (b Blocked) permute(perm []int) Blocked {
	n := len(perm)
	o := Blocked{make([]int, n), make([]int, n), make([]int, n), make([]int, n)}
	inv := make([]int, n)
	for i, p := range perm {
		o.SizePerThread[i] = b.SizePerThread[p]
		o.ThreadsPerWarp[i] = b.ThreadsPerWarp[p]
		o.WarpsPerCTA[i] = b.WarpsPerCTA[p]
		inv[p] = i
	}
	for i, d := range b.Order {
		o.Order[i] = inv[d]
	}
	return o
}

// DefaultBlocked is the layout of loads and of values with no better home:
// row-major (last dim fastest), up to 4 contiguous elements per thread
// along the last dim, lanes filling the last dim first, warps filling dim 0
// first. It does not depend on the element type, so that loads of
// different types feeding one elementwise op agree without conversions.
func DefaultBlocked(shape []int, numWarps int) Blocked {
	return blockedVec(shape, numWarps, 4)
}

// StoreVec is the layout a store converts narrow fragments to
// (coalesceStore): DefaultBlocked with vec contiguous elements (16 bytes)
// per thread, so that each thread writes 16 bytes at once and a warp whole
// sectors. Its own type, so that the conversion into it pads shared
// memory for the fragments' writes and is counted apart.
type StoreVec struct{ Blocked }

// NewStoreVec is StoreVec on shape with up to vec elements per thread.
func NewStoreVec(shape []int, numWarps, vec int) StoreVec {
	return StoreVec{blockedVec(shape, numWarps, vec)}
}

func (s StoreVec) String() string { return "store" + s.Blocked.String() }

func blockedVec(shape []int, numWarps, maxVec int) Blocked {
	r := len(shape)
	b := Blocked{make([]int, r), make([]int, r), make([]int, r), make([]int, r)}
	n := 1
	for _, d := range shape {
		n *= d
	}
	for i := range b.Order {
		b.Order[i] = r - 1 - i
		b.SizePerThread[i] = 1
		b.ThreadsPerWarp[i] = 1
		b.WarpsPerCTA[i] = 1
	}
	vec := min(max(1, n/(32*numWarps)), maxVec, shape[r-1])
	b.SizePerThread[r-1] = vec
	lanes := 32
	for d := r - 1; d >= 0 && lanes > 1; d-- {
		room := shape[d] / b.SizePerThread[d]
		t := min(lanes, max(room, 1))
		b.ThreadsPerWarp[d] = t
		lanes /= t
	}
	b.ThreadsPerWarp[0] *= lanes // leftover lanes hold copies
	warps := numWarps
	for d := 0; d < r && warps > 1; d++ {
		room := shape[d] / (b.SizePerThread[d] * b.ThreadsPerWarp[d])
		w := min(warps, max(room, 1))
		b.WarpsPerCTA[d] = w
		warps /= w
	}
	b.WarpsPerCTA[0] *= warps
	return b
}

// MMA is the accumulator layout of mma.sync m16n8k16 (Triton's
// NvidiaMmaEncoding version 2): in a warp's 16x8 tile, lane l holds rows
// l/4 and l/4+8, columns 2(l%4) and 2(l%4)+1 (c0..c3); warps tile
// WarpsPerCTA[0] x WarpsPerCTA[1] such tiles (warp w is at
// (w % WarpsPerCTA[0], w / WarpsPerCTA[0])), repeated in registers over the
// shape. Register order: c0/c1 pair, the row+8 half, then N repeats, then
// M repeats, so registers 4(i*nN+j)+c are tile (i, j)'s c.
//
// Version 3 is the accumulator of wgmma.mma_async m64nNk16 (Triton's
// MMAv3): a warpgroup of 4 consecutive warps covers 64 rows, and per warp
// the fragment is exactly the m16n8 one above (the PTX ISA's wgmma D
// fragment: d[4j+c] at row l/4+8(c/2), column 8j+2(l%4)+c%2), so an
// instruction's n8 tiles are consecutive registers. WarpsPerCTA is
// [4a, b]: warpgroup g = w/4 is at M block g%a (warp w%4 of it at rows
// 64(g%a)+16(w%4) and up of each 64a-row block) and at N block g/a, a
// contiguous range of N/b columns, since one instruction's B descriptor
// covers contiguous columns. So the warp bits along N sit above the
// warpgroup's N repeats (not below them, as version 2's would), and
// register 4(i*nN+j)+c is tile (i, j)'s c of the warpgroup's own nN
// column tiles: instruction (i, N chunk) owns a contiguous register
// range. With all warps along M (b = 1) the concrete layout is version
// 2's; the version only names which instruction produces it.
// DotOperand{0, v3} is the RS form's A fragment (per warp the m16n8k16 A
// fragment, copied across the warpgroups along N).
type MMA struct {
	WarpsPerCTA [2]int
	// Version is 2 (or 0) for mma.sync, 3 for wgmma.
	Version int
}

func (m MMA) Rank() int { return 2 }

func (m MMA) String() string {
	v := 2
	if m.Version == 3 {
		v = 3
	}
	return fmt.Sprintf("mma{v%d, wpc=%v}", v, m.WarpsPerCTA[:])
}

func (m MMA) Linear(shape []int, numWarps int) *Linear {
	lb := newLayoutBuilder(shape, numWarps)
	wm := log2(m.WarpsPerCTA[0])
	wn := log2(m.WarpsPerCTA[1])
	// rows
	lb.addLane(0, 2)
	lb.addLane(0, 3)
	lb.addLane(0, 4)
	m8 := lb.addReg(0)
	for i := 0; i < wm; i++ {
		lb.addWarp(0, i)
	}
	// columns
	n1 := lb.addReg(1)
	lb.addLane(1, 0)
	lb.addLane(1, 1)
	nIn := m.groupRepeats(lb, shape[1])
	for i := 0; i < wn; i++ {
		lb.addWarp(1, wm+i)
	}
	lb.reg(n1, m8)
	lb.reg(nIn...)
	lb.repeats(1)
	lb.repeats(0)
	return lb.build()
}

// splitN reports whether the layout is wgmma's with warpgroups along N,
// each holding contiguous columns.
func (m MMA) splitN() bool { return m.Version == 3 && m.WarpsPerCTA[1] > 1 }

// groupRepeats adds to dim 1 (n long) the register bits that step a
// warpgroup's 8-column tiles within its own columns, below the warp bits
// along N, for splitN layouts (none otherwise: the repeats then go above
// the warp bits); it returns their slots, low first.
func (m MMA) groupRepeats(lb *layoutBuilder, n int) []regSlot {
	if !m.splitN() {
		return nil
	}
	var s []regSlot
	for i := 3 + log2(m.WarpsPerCTA[1]); i < log2(n); i++ {
		s = append(s, lb.addReg(1))
	}
	return s
}

// DotOperand is the register layout of an mma.sync m16n8k16 operand with
// 16-bit elements (kWidth 2): OpIdx 0 is A[M,K] (a0..a3: rows g, g+8, k
// pairs 2t, 2t+8 with g = lane/4, t = lane%4), OpIdx 1 is B[K,N] (b0, b1:
// k pairs 2t, 2t+8, column g). Warps follow Parent along M (A) or N (B),
// B's in Parent's contiguous column ranges where it has them (version 3),
// and hold copies along the other dim. Register order: A: k pair, row+8,
// k+8, K repeats, M repeats (8 per 16x16 tile); B: k pair, k+8, K repeats,
// N repeats (4 per 16x8 tile). Consecutive register pairs pack into the
// i32 operands of mma.
type DotOperand struct {
	OpIdx  int
	Parent MMA
}

func (d DotOperand) Rank() int { return 2 }

func (d DotOperand) String() string { return fmt.Sprintf("dot{op=%d, %s}", d.OpIdx, d.Parent) }

func (d DotOperand) Linear(shape []int, numWarps int) *Linear {
	lb := newLayoutBuilder(shape, numWarps)
	wm := log2(d.Parent.WarpsPerCTA[0])
	wn := log2(d.Parent.WarpsPerCTA[1])
	kdim := 1
	if d.OpIdx == 1 {
		kdim = 0
	}
	k1 := lb.addReg(kdim)
	lb.addLane(kdim, 0)
	lb.addLane(kdim, 1)
	k8 := lb.addReg(kdim)
	if d.OpIdx == 0 {
		lb.addLane(0, 2)
		lb.addLane(0, 3)
		lb.addLane(0, 4)
		m8 := lb.addReg(0)
		for i := 0; i < wm; i++ {
			lb.addWarp(0, i)
		}
		lb.reg(k1, m8, k8)
		lb.repeats(1)
		lb.repeats(0)
	} else {
		lb.addLane(1, 2)
		lb.addLane(1, 3)
		lb.addLane(1, 4)
		nIn := d.Parent.groupRepeats(lb, shape[1])
		for i := 0; i < wn; i++ {
			lb.addWarp(1, wm+i)
		}
		lb.reg(k1, k8)
		lb.repeats(0)
		lb.reg(nIn...)
		lb.repeats(1)
	}
	return lb.build()
}

// Slice is the layout of Parent with dimension Dim removed: the layout of
// reductions along Dim, and the operand layout that broadcasts back into
// Parent for free. Threads that held different Dim coordinates of the same
// element hold copies.
type Slice struct {
	Dim    int
	Parent Layout
}

func (s Slice) Rank() int { return s.Parent.Rank() - 1 }

func (s Slice) String() string { return fmt.Sprintf("slice{dim=%d, %s}", s.Dim, s.Parent) }

func (s Slice) Linear(shape []int, numWarps int) *Linear {
	full := insertDim(shape, s.Dim, 1)
	p := s.Parent.Linear(full, numWarps)
	drop := func(bs [][]int) [][]int {
		out := make([][]int, 0, len(bs))
		for _, b := range bs {
			out = append(out, removeDim(b, s.Dim))
		}
		return out
	}
	l := &Linear{shape: append([]int(nil), shape...), lane: drop(p.lane), warp: drop(p.warp)}
	for _, b := range drop(p.reg) {
		if !isZero(b) {
			l.reg = append(l.reg, b)
		}
	}
	return l
}

// scalarLayout is the layout of rank-0 values: one register, the same in
// every thread (scalars are uniform across the CTA).
type scalarLayout struct{}

func (scalarLayout) Rank() int      { return 0 }
func (scalarLayout) String() string { return "scalar" }
func (scalarLayout) Linear(shape []int, numWarps int) *Linear {
	l := &Linear{lane: make([][]int, 5), warp: make([][]int, log2(numWarps))}
	for i := range l.lane {
		l.lane[i] = []int{}
	}
	for i := range l.warp {
		l.warp[i] = []int{}
	}
	return l
}

// Shared describes a tensor's placement in shared memory (Triton's
// SharedEncoding): elements in Order (fastest dim first), with rows XOR
// swizzled in units of Vec elements: the Vec-group index within a row is
// XORed with (row/PerPhase) % Max. Max 1 is an unswizzled placement, which
// is what every exchange uses today (row-major, or rows padded by 16 bytes
// for ldmatrix); swizzled placements plug in here (docs/codegen.md).
type Shared struct {
	Order              []int
	Vec, PerPhase, Max int
}

func (s Shared) String() string {
	return fmt.Sprintf("shared{order=%v, vec=%d, perPhase=%d, maxPhase=%d}", s.Order, s.Vec, s.PerPhase, s.Max)
}

func insertDim(s []int, d, v int) []int {
	out := make([]int, 0, len(s)+1)
	out = append(out, s[:d]...)
	out = append(out, v)
	return append(out, s[d:]...)
}

func removeDim(s []int, d int) []int {
	out := make([]int, 0, len(s))
	out = append(out, s[:d]...)
	return append(out, s[d+1:]...)
}

// priority ranks layouts for elementwise ops whose anchored operands
// disagree: mma-derived layouts win over blocked ones, so the softmax of
// the attention kernel stays in the accumulator layout.
func priority(l Layout) int {
	switch l := l.(type) {
	case MMA:
		return 3
	case DotOperand:
		return 2
	case Slice:
		return priority(l.Parent)
	}
	return 1
}

// MMAWarps picks warpsPerCTA for an MxN accumulator: as many warps along M
// as 16-row tiles allow (rows stay in one warp for row reductions, and the
// accumulator doubles as the A operand of a following dot), the rest on N.
func MMAWarps(M, N, numWarps int) [2]int {
	wm := 1
	for wm < numWarps && wm*2*16 <= M {
		wm *= 2
	}
	return [2]int{wm, numWarps / wm}
}
