package sm90

import (
	"fmt"

	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/codegen/core"
)

// Shared-memory operand tiles for wgmma, and their matrix descriptors.
//
// A tile holds a 16-bit matrix of rows x cols elements, cols being the
// dim that is contiguous in shared memory, in the PTX ISA's canonical
// swizzled layout (§9.7.15.5.1.2; what TMA's SWIZZLE_{32,64,128}B writes):
// the contiguous dim is cut into panels of W bytes (W/2 elements); panel p
// holds those columns of every row, row r at r·W, and starts at p·rows·W;
// then every 16-byte chunk is moved by XORing address bits 7.. into bits
// 4.. (Swizzle<3,4,3> for W = 128: chunk c of row r lands at c ^ r%8;
// <2,4,3> for 64, <1,4,3> for 32). The pattern repeats every 8·W bytes, so
// rows is a multiple of 8 and tiles start 1024-byte aligned (descriptor
// base offset 0).
//
// Because the row and column fields of the unswizzled offset occupy
// disjoint bits and the swizzle is an XOR of bits, offset(a|b) =
// offset(a) ^ offset(b) for coordinates with disjoint bits: a thread's
// address is the offset of its layout base (computed once) XOR a constant
// per register.
type tile struct {
	rows, cols int // cols: the contiguous dim, in elements
	w          int // swizzle width in bytes: 32, 64 or 128
	// eb is the bytes of an element: 2 (0 means 2: wgmma's operands), or 4
	// for f32 staging tiles (TMA reductions).
	eb int
}

// elem is the bytes of an element.
func (t tile) elem() int {
	if t.eb == 0 {
		return 2
	}
	return t.eb
}

// tileAlign is the alignment of every wgmma tile: the largest swizzle
// pattern (128B: 8 rows of 128 bytes).
const tileAlign = 1024

// newTile is the tile of a rows x cols 16-bit matrix with cols
// contiguous, or false when wgmma cannot read it (fewer than 16 contiguous
// elements, rows not a multiple of 8).
func newTile(rows, cols int) (tile, bool) { return newTileMax(rows, cols, 128) }

// newTileMax is newTile with a swizzle at most maxW bytes wide (at least
// 32: panels of 16 elements).
func newTileMax(rows, cols, maxW int) (tile, bool) {
	w := min(128, 2*cols, maxW)
	if w < 32 || rows%8 != 0 || cols%(w/2) != 0 {
		return tile{}, false
	}
	return tile{rows: rows, cols: cols, w: w}, true
}

func (t tile) String() string {
	if t.elem() != 2 {
		return fmt.Sprintf("%dx%d sw%d b%d", t.rows, t.cols, t.w, 8*t.elem())
	}
	return fmt.Sprintf("%dx%d sw%d", t.rows, t.cols, t.w)
}

// bytes is the tile's size, a multiple of the pattern (8·W).
func (t tile) bytes() int { return t.elem() * t.rows * t.cols }

// panelCols is the columns of a panel: W bytes of elements.
func (t tile) panelCols() int { return t.w / t.elem() }

// unswizzled is the byte offset of (r, c) before the swizzle.
func (t tile) unswizzled(r, c int) int {
	pc := t.panelCols()
	return (c/pc)*t.rows*t.w + r*t.w + (c%pc)*t.elem()
}

// swizzle moves a tile-relative byte offset (pattern-aligned tile) to its
// swizzled place.
func swizzle(a, w int) int { return a ^ ((a>>7)&(w/16-1))<<4 }

// offset is the byte offset of element (r, c) from the tile's start.
func (t tile) offset(r, c int) int { return swizzle(t.unswizzled(r, c), t.w) }

// mode is the descriptor's swizzle field (bits 62-63).
func (t tile) mode() uint64 {
	switch t.w {
	case 128:
		return 1
	case 64:
		return 2
	}
	return 3
}

// ---- matrix descriptors (PTX ISA §9.7.15.5.1.2.2) ----

// encode is matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4.
func encode(x int) uint64 { return uint64(x&0x3FFFF) >> 4 }

// descriptor packs a matrix descriptor: start address (bits 0-13), leading
// byte offset (16-29), stride byte offset (32-45), base offset 0 (49-51),
// swizzle mode (62-63).
func descriptor(start, lbo, sbo int, mode uint64) uint64 {
	return encode(start) | encode(lbo)<<16 | encode(sbo)<<32 | mode<<62
}

// An operand view of a tile: the operand's K dim is the tile's contiguous
// dim (K-major: imm-trans 0) or its rows (MN-major: imm-trans 1).
type view struct {
	tile
	kMajor bool
}

func (v view) trans() int {
	if v.kMajor {
		return 0
	}
	return 1
}

// strides are the descriptor's leading and stride byte offsets. K-major
// (canonical ((8,m),(T,2k)):((W/16·T,SBO),(1,T))): rows W bytes apart, 8-row
// groups SBO = 8·W apart; the leading offset is unused with swizzling
// (encoded 1). MN-major (((T,W/16,m),(8,k)):((1,T,LBO),(W/16·T,SBO))):
// W/2-element panels of MN LBO = rows·W apart, 8-row groups of K SBO =
// 8·W apart.
func (v view) strides() (lbo, sbo int) {
	if v.kMajor {
		return 16, 8 * v.w
	}
	return v.rows * v.w, 8 * v.w
}

// desc is the descriptor of the tile with start address 0: add the start
// address >> 4 (tile base plus kOff and mnOff) to it.
func (v view) desc() uint64 {
	lbo, sbo := v.strides()
	return descriptor(0, lbo, sbo, v.mode())
}

// kOff is the byte offset of k-step kk (16 elements of K) from the tile
// start: K-major steps 32 bytes within a W-byte row, then to the next
// panel; MN-major steps 16 rows.
func (v view) kOff(kk int) int {
	if v.kMajor {
		per := v.w / 32
		return (kk/per)*v.rows*v.w + (kk%per)*32
	}
	return kk * 16 * v.w
}

// mnOff is the byte offset of MN coordinate m0 (a multiple of 8 for
// K-major, of W/2 for MN-major) from the tile start.
func (v view) mnOff(m0 int) int {
	if v.kMajor {
		return m0 * v.w
	}
	return (m0 / (v.w / 2)) * v.rows * v.w
}

// mnAligned reports whether an instruction may start at MN coordinate m0.
func (v view) mnAligned(m0 int) bool {
	if v.kMajor {
		return m0%8 == 0
	}
	return m0%(v.w/2) == 0
}

// runAlong is the length of the runs, up to most, of a thread's registers
// in layout x that are consecutive along dim cd of a 2-D tensor and start
// at a multiple of that length (1 when there are none): what one vector
// access of a staged tile may hold.
func runAlong(x *core.Linear, cd, most int) int {
	unit := func(n int) []int {
		u := make([]int, 2)
		u[cd] = n
		return u
	}
	v := 1
	for i, b := range x.RegBases() {
		if v >= most || !core.EqualVec(b, unit(1<<i)) {
			break
		}
		v *= 2
	}
	for _, bs := range [][][]int{x.RegBases()[log2(v):], x.LaneBases(), x.WarpBases()} {
		for _, b := range bs {
			if b[cd]%v != 0 {
				return 1
			}
		}
	}
	return v
}

// ---- emission ----

// runtimeOffset emits offset(r, c) for i32 coordinates in block-free form
// on l's entry block (coordinates from layout bases are entry-block
// values).
func (t tile) runtimeOffset(l *core.Lowerer, r, c value.Value) value.Value {
	e := l.Entry()
	pc := t.panelCols()
	k := func(x int) value.Value { return core.ConstI32(int64(x)) }
	p := e.NewLShr(c, k(log2(pc)))
	cw := e.NewAnd(c, k(pc-1))
	un := e.NewAdd(e.NewAdd(e.NewMul(p, k(t.rows*t.w)), e.NewMul(r, k(t.w))), e.NewShl(cw, k(log2(t.elem()))))
	x := e.NewAnd(e.NewLShr(un, k(7)), k(t.w/16-1))
	return e.NewXor(un, e.NewShl(x, k(4)))
}

// xorOff is base ^ off in the current block (folding off == 0).
func xorOff(l *core.Lowerer, base value.Value, off int) value.Value {
	if off == 0 {
		return base
	}
	return l.Block().NewXor(base, core.ConstI32(int64(off)))
}

// sharedAddr64 is the shared-space address of byte byteOff of shared
// memory as an i64 (what descriptors encode; the reads are asynchronous,
// tracked by the target rather than as a generic access).
func sharedAddr64(l *core.Lowerer, byteOff int) value.Value {
	p := l.SharedAddress(types.I8, byteOff, core.ConstI32(0))
	return l.Block().NewPtrToInt(p, types.I64)
}

// descValue is v's descriptor for the tile at byte tileOff (+ dyn bytes,
// an i32, when not nil) of shared memory: the constant fields with the
// encoded base address added.
func descValue(l *core.Lowerer, v view, tileOff int, dyn value.Value) value.Value {
	b := l.Block()
	addr := sharedAddr64(l, tileOff)
	if dyn != nil {
		addr = b.NewAdd(addr, b.NewZExt(dyn, types.I64))
	}
	a := b.NewLShr(b.NewAnd(addr, ci64(0x3FFFF)), ci64(4))
	return b.NewOr(a, ci64(int64(v.desc())))
}

// addDesc is desc advanced by off bytes (a multiple of 16; the address
// field cannot overflow within 256 KiB of shared memory).
func addDesc(l *core.Lowerer, d value.Value, off int) value.Value {
	if off == 0 {
		return d
	}
	return l.Block().NewAdd(d, ci64(int64(off>>4)))
}

func ci64(x int64) value.Value { return core.ConstI64(x) }

func log2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}
