package core

import (
	"fmt"
	"strings"
)

// Linear is the concrete form of a distributed layout on one shape: the
// tensor coordinate held by (register r, lane l, warp w) is the XOR of the
// basis vectors of the set bits of r, l and w (Triton's LinearLayout,
// restricted to what register layouts need).
//
// Invariants (checked by Check): every dimension of shape is a power of
// two; every basis vector is zero or has exactly one non-zero component,
// a power of two; the non-zero bases are distinct and together cover every
// coordinate bit, so every element is held by some thread; register bases
// are never zero (a thread holds no element twice). Zero lane or warp
// bases mean those lanes/warps hold copies (broadcast).
//
// Because non-zero bases hit distinct coordinate bits, XOR is addition:
// coord(r, l, w) = base(l, w) + off(r), which the lowering exploits by
// computing base once per layout at run time and off(r) at compile time.
type Linear struct {
	shape []int
	reg   [][]int
	lane  [][]int // always 5 entries (32 lanes)
	warp  [][]int // log2(numWarps) entries
}

func (l *Linear) rank() int { return len(l.shape) }

// NumRegs is the number of registers a thread holds.
func (l *Linear) NumRegs() int { return 1 << len(l.reg) }

// RegOffset is the coordinate offset of register r (the compile-time part).
func (l *Linear) RegOffset(r int) []int { return l.offset(l.reg, r) }

// LaneOffset is the coordinate offset of lane l within its warp.
func (l *Linear) LaneOffset(lane int) []int { return l.offset(l.lane, lane) }

// offset is the coordinate offset of index x over bases: the xor of the
// bases of x's set bits.
func (l *Linear) offset(bases [][]int, x int) []int {
	c := make([]int, l.rank())
	for i, b := range bases {
		if x>>i&1 != 0 {
			xorInto(c, b)
		}
	}
	return c
}

func xorInto(c, b []int) {
	for d := range c {
		c[d] ^= b[d]
	}
}

func isZero(b []int) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// EqualVec reports whether two coordinate vectors are equal.
func EqualVec(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// EqualBases reports whether two basis lists are equal.
func EqualBases(a, b [][]int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !EqualVec(a[i], b[i]) {
			return false
		}
	}
	return true
}

// Equal reports whether l and m are the same linear layout.
func (l *Linear) Equal(m *Linear) bool { return l.equal(m) }

func (l *Linear) equal(m *Linear) bool {
	return EqualVec(l.shape, m.shape) && EqualBases(l.reg, m.reg) &&
		EqualBases(l.lane, m.lane) && EqualBases(l.warp, m.warp)
}

// key is a canonical string for memoizing per-layout run-time values.
func (l *Linear) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v|r%v|l%v|w%v", l.shape, l.reg, l.lane, l.warp)
	return b.String()
}

// regIndex maps a register offset (as a key string) to its register.
func (l *Linear) regIndex() map[string]int {
	m := make(map[string]int, l.NumRegs())
	for r := 0; r < l.NumRegs(); r++ {
		m[fmt.Sprint(l.RegOffset(r))] = r
	}
	return m
}

// zeroLaneMask and zeroWarpMask are the lane/warp id bits whose bases are
// zero: threads differing only in these bits hold the same elements.
func (l *Linear) zeroLaneMask() int {
	m := 0
	for i, b := range l.lane {
		if isZero(b) {
			m |= 1 << i
		}
	}
	return m
}

func (l *Linear) zeroWarpMask() int {
	m := 0
	for i, b := range l.warp {
		if isZero(b) {
			m |= 1 << i
		}
	}
	return m
}

func log2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// Check verifies the invariants documented on Linear.
func (l *Linear) Check() error {
	for _, d := range l.shape {
		if !isPow2(d) {
			return fmt.Errorf("shape %v: dimensions must be powers of two", l.shape)
		}
	}
	seen := map[[2]int]bool{}
	all := [][][]int{l.reg, l.lane, l.warp}
	for k, bs := range all {
		for _, b := range bs {
			if len(b) != l.rank() {
				return fmt.Errorf("basis %v has wrong rank for shape %v", b, l.shape)
			}
			if isZero(b) {
				if k == 0 {
					return fmt.Errorf("zero register basis")
				}
				continue
			}
			nz := 0
			for d, x := range b {
				if x == 0 {
					continue
				}
				nz++
				if !isPow2(x) || x >= l.shape[d] {
					return fmt.Errorf("basis %v out of shape %v", b, l.shape)
				}
				bit := [2]int{d, log2(x)}
				if seen[bit] {
					return fmt.Errorf("coordinate bit %v used twice in %s", bit, l.key())
				}
				seen[bit] = true
			}
			if nz != 1 {
				return fmt.Errorf("basis %v is not along one dimension", b)
			}
		}
	}
	for d, n := range l.shape {
		for k := 0; 1<<k < n; k++ {
			if !seen[[2]int{d, k}] {
				return fmt.Errorf("layout %s does not cover bit %d of dim %d", l.key(), k, d)
			}
		}
	}
	return nil
}

// dimBits describes, for one dimension, where each coordinate bit comes
// from, low bit first; builders of named layouts fill it and build turns it
// into bases. Sources past the dimension's size become zero (broadcast)
// bases; missing high bits are added as extra register bits (repeats).
type bitSrc struct {
	kind int // srcReg, srcLane, srcWarp
	idx  int // bit index within the register/lane/warp id (for regs: a slot id, see build)
}

const (
	srcReg = iota
	srcLane
	srcWarp
)

// layoutBuilder accumulates bit sources per dimension and register slot
// order, then produces a linear layout.
type layoutBuilder struct {
	shape    []int
	numWarps int
	dims     [][]bitSrc
	regOrder []regSlot // register bits in index order (low first)
}

// regSlot names one register bit: dim d, position within that dim's source
// list. Slots are resolved when building.
type regSlot struct{ dim, pos int }

func newLayoutBuilder(shape []int, numWarps int) *layoutBuilder {
	return &layoutBuilder{shape: shape, numWarps: numWarps, dims: make([][]bitSrc, len(shape))}
}

// addReg appends a register bit to dim d and returns its slot.
func (b *layoutBuilder) addReg(d int) regSlot {
	s := regSlot{d, len(b.dims[d])}
	b.dims[d] = append(b.dims[d], bitSrc{kind: srcReg})
	return s
}

func (b *layoutBuilder) addLane(d, bit int) { b.dims[d] = append(b.dims[d], bitSrc{srcLane, bit}) }
func (b *layoutBuilder) addWarp(d, bit int) { b.dims[d] = append(b.dims[d], bitSrc{srcWarp, bit}) }

// reg appends register bits in index order.
func (b *layoutBuilder) reg(slots ...regSlot) { b.regOrder = append(b.regOrder, slots...) }

// repeats adds, for dim d, register bits until the dim is covered, and
// appends them to the register order. Returns the number added.
func (b *layoutBuilder) repeats(d int) {
	for len(b.dims[d]) < log2(b.shape[d]) {
		b.reg(b.addReg(d))
	}
}

func (b *layoutBuilder) build() *Linear {
	rank := len(b.shape)
	l := &Linear{shape: append([]int(nil), b.shape...)}
	l.lane = make([][]int, 5)
	for i := range l.lane {
		l.lane[i] = make([]int, rank)
	}
	nw := log2(b.numWarps)
	l.warp = make([][]int, nw)
	for i := range l.warp {
		l.warp[i] = make([]int, rank)
	}
	regBasis := map[regSlot][]int{}
	for d, srcs := range b.dims {
		for pos, s := range srcs {
			v := make([]int, rank)
			if pos < log2(b.shape[d]) {
				v[d] = 1 << pos
			}
			switch s.kind {
			case srcReg:
				regBasis[regSlot{d, pos}] = v
			case srcLane:
				l.lane[s.idx] = v
			case srcWarp:
				if s.idx < nw {
					l.warp[s.idx] = v
				}
			}
		}
	}
	for _, s := range b.regOrder {
		v := regBasis[s]
		if v != nil && !isZero(v) {
			l.reg = append(l.reg, v)
		}
	}
	return l
}

// NewLinear builds a linear layout from its bases (lane must have 5
// entries, warp log2(numWarps)); check verifies the result.
func NewLinear(shape []int, reg, lane, warp [][]int) *Linear {
	return &Linear{shape: shape, reg: reg, lane: lane, warp: warp}
}

// Shape is the shape the layout applies to.
func (l *Linear) Shape() []int { return l.shape }

// RegBases, LaneBases and WarpBases are the basis vectors of the register,
// lane and warp id bits (shared with the layout: do not modify).
func (l *Linear) RegBases() [][]int  { return l.reg }
func (l *Linear) LaneBases() [][]int { return l.lane }
func (l *Linear) WarpBases() [][]int { return l.warp }
