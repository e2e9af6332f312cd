package simt

// wgmma.mma_async m64nNk16 (f32 accumulators, bf16/f16 operands; A from
// registers or shared memory, B from shared memory), wgmma.fence /
// commit_group / wait_group. Written from the PTX ISA (§9.7.15),
// independently of codegen/sm90:
//
//   - register fragments: lane l of warp w%4 of a warpgroup holds A
//     element i (of 8, two per .b32, low half first) at row 16(w%4) + l/4 +
//     8((i>>1)&1), column 2(l%4) + (i&1) + 8(i>>2); D element i (of N/2) at
//     row 16(w%4) + l/4 + 8((i>>1)&1), column 8(i>>2) + 2(l%4) + (i&1);
//   - shared operands through the descriptor (start, leading and stride
//     byte offsets, swizzle mode) and the canonical layouts of
//     §9.7.15.5.1.2.1.3, in bytes with W the swizzle width: K-major
//     ((8,m),(T,2k)): element (mn, k) at start + (mn%8)·W + (mn/8)·SBO +
//     2k; MN-major ((T,W/16,m),(8,k)): at start + 2(mn%(W/2)) +
//     (mn/(W/2))·LBO + (k%8)·W + (k/8)·SBO; then the swizzle XORs address
//     bits 7.. into bits 4.. (Swizzle<log2(W/16),4,3>). The descriptors must
//     agree across the warpgroup and have base offset 0.

import (
	"encoding/binary"
)

const (
	placeholderBits = 0x7fc00000
	idMask          = 1<<22 - 1
	ringBits        = 15
)

// wgState is a warp's wgmma state; its results in flight are NaN
// placeholders whose ids index a ring.
type wgState struct {
	fenced  bool // wgmma.fence since the last wait
	commits int  // commit_groups so far (the open group's number)
	next    uint32
	ids     []uint32
	vals    []uint64
	groups  []int32
}

func (w *warp) placeholder(x uint64) uint64 {
	s := &w.wg
	if s.ids == nil {
		s.ids = make([]uint32, 1<<ringBits)
		s.vals = make([]uint64, 1<<ringBits)
		s.groups = make([]int32, 1<<ringBits)
	}
	s.next = s.next%idMask + 1
	k := s.next & (1<<ringBits - 1)
	s.ids[k], s.vals[k], s.groups[k] = s.next, x, int32(s.commits)
	return placeholderBits | uint64(s.next)
}

func isPlaceholder(x uint64) bool {
	return x&^uint64(idMask) == placeholderBits && x != placeholderBits
}

// resolve is the value behind a placeholder (other values as they are).
func (w *warp) resolve(x uint64) uint64 {
	if !isPlaceholder(x) {
		return x
	}
	s := &w.wg
	id := uint32(x & idMask)
	k := id & (1<<ringBits - 1)
	if s.ids == nil || s.ids[k] != id {
		fail("wgmma result placeholder %#x resolved twice or never produced", x)
	}
	s.ids[k] = 0
	return s.vals[k]
}

// groupOf is the commit group of a live placeholder, or -1.
func (w *warp) groupOf(x uint64) int {
	if !isPlaceholder(x) || w.wg.ids == nil {
		return -1
	}
	id := uint32(x & idMask)
	k := id & (1<<ringBits - 1)
	if w.wg.ids[k] != id {
		return -1
	}
	return int(w.wg.groups[k])
}

// wgmmaForm is one compiled wgmma.mma_async.
type wgmmaForm struct {
	n              int // N of m64nNk16
	f16            bool
	rs             bool  // A from registers
	aRegs          []int // RS: the A operands' argument indices
	descA, descB   int   // argument indices
	scaleD         int   // argument index of the accumulate predicate
	transA, transB bool
}

// wgmmaPart is one warp's deposit.
type wgmmaPart struct {
	f            *wgmmaForm
	a            [32][4]uint64
	descA, descB uint64
}

// wgmmaProduct is A·B (64 × n) of a warpgroup's parts.
func (c *cta) wgmmaProduct(f *wgmmaForm, parts [4]any) []float64 {
	p0 := parts[0].(*wgmmaPart)
	for _, x := range parts {
		p := x.(*wgmmaPart)
		if p.f != f {
			fail("the warps of a warpgroup at different wgmma instructions")
		}
		if p.descB != p0.descB || (!f.rs && p.descA != p0.descA) {
			fail("wgmma descriptors differ across the warpgroup")
		}
	}
	var A [64][16]float64
	if f.rs {
		for q, x := range parts {
			p := x.(*wgmmaPart)
			for l := 0; l < 32; l++ {
				for i := 0; i < 8; i++ {
					row := 16*q + l/4 + 8*((i>>1)&1)
					col := 2*(l%4) + (i & 1) + 8*(i>>2)
					A[row][col] = elem16(uint16(p.a[l][i/2]>>(16*(i&1))), f.f16)
				}
			}
		}
	} else {
		for r := 0; r < 64; r++ {
			for k := 0; k < 16; k++ {
				A[r][k] = elem16(c.descRead(p0.descA, f.transA, r, k), f.f16)
			}
		}
	}
	n := f.n
	B := make([][16]float64, n) // B[col][k]
	for col := 0; col < n; col++ {
		for k := 0; k < 16; k++ {
			B[col][k] = elem16(c.descRead(p0.descB, f.transB, col, k), f.f16)
		}
	}
	prod := make([]float64, 64*n)
	for r := 0; r < 64; r++ {
		for col := 0; col < n; col++ {
			s := 0.0
			for k := 0; k < 16; k++ {
				s += A[r][k] * B[col][k]
			}
			prod[r*n+col] = s
		}
	}
	return prod
}

// descRead reads element (mn, k) of a shared operand through descriptor
// desc (mnMajor: imm-trans 1).
func (c *cta) descRead(desc uint64, mnMajor bool, mn, k int) uint16 {
	start := int(desc&0x3FFF) << 4
	lbo := int(desc>>16&0x3FFF) << 4
	sbo := int(desc>>32&0x3FFF) << 4
	if desc>>49&7 != 0 || desc>>46&7 != 0 || desc>>14&3 != 0 || desc>>30&3 != 0 || desc>>52&0x3FF != 0 {
		fail("wgmma descriptor %#x: base offset or reserved bits set", desc)
	}
	var w int
	switch desc >> 62 {
	case 1:
		w = 128
	case 2:
		w = 64
	case 3:
		w = 32
	default:
		fail("wgmma descriptor %#x: no swizzle (not simulated)", desc)
	}
	var a int
	if mnMajor {
		a = start + 2*(mn%(w/2)) + (mn/(w/2))*lbo + (k%8)*w + (k/8)*sbo
	} else {
		a = start + (mn%8)*w + (mn/8)*sbo + 2*k
	}
	a ^= (a >> 7 & (w/16 - 1)) << 4
	if a < 0 || a+2 > len(c.shared) {
		fail("wgmma read at %d beyond SharedBytes=%d", a, len(c.shared))
	}
	c.checkLanded("wgmma read", uint64(a), 2)
	if c.marks != nil {
		if who := c.marks[a] | c.marks[a+1]; who != 0 {
			fail("wgmma reads shared byte %d written by thread %d through the generic proxy without fence.proxy.async", a, who-1)
		}
	}
	return binary.LittleEndian.Uint16(c.shared[a:])
}

// wgmma runs one wgmma.mma_async for warp w (all lanes): args(i) reads
// argument i per lane; out are the result slots.
func (w *warp) wgmma(f *wgmmaForm, arg func(i, l int) uint64, acc func(i, l int) uint64, out int) bool {
	if !w.wait.active {
		if !w.wg.fenced {
			fail("wgmma.mma_async without a wgmma.fence since the last wait")
		}
	}
	var part *wgmmaPart
	if !w.wait.active {
		part = &wgmmaPart{f: f, descA: arg(f.descA, 0), descB: arg(f.descB, 0)}
		for l := 0; l < 32; l++ {
			if arg(f.descB, l) != part.descB || (!f.rs && arg(f.descA, l) != part.descA) {
				fail("wgmma descriptors differ across the warpgroup")
			}
			if f.rs {
				for i, k := range f.aRegs {
					part.a[l][i] = arg(k, l)
				}
			}
		}
	}
	res, ok := w.meet("wgmma.mma_async", part, func(parts [4]any) any { return w.cta.wgmmaProduct(f, parts) })
	if !ok {
		return false
	}
	prod := res.([]float64)
	q := w.id % 4
	r := w.regs
	for l := 0; l < 32; l++ {
		accumulate := arg(f.scaleD, l) != 0
		for i := 0; i < f.n/2; i++ {
			row := 16*q + l/4 + 8*((i>>1)&1)
			col := 8*(i>>2) + 2*(l%4) + (i & 1)
			v := prod[row*f.n+col]
			if accumulate {
				v += float64(f32(w.resolve(acc(i, l))))
			}
			r[out+32*i+l] = w.placeholder(uf32(float32(v)))
		}
	}
	return true
}
