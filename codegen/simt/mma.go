package simt

// Warp-wide matrix instructions, from the PTX ISA's fragment layouts,
// independently of codegen's.

import (
	"encoding/binary"
	"math"

	"github.com/fac-compiler/fac/internal/half"
)

// elem16 decodes a 16-bit operand element.
func elem16(h uint16, f16 bool) float64 {
	if f16 {
		return float64(half.F16ToF32(h))
	}
	return float64(math.Float32frombits(uint32(h) << 16))
}

// mma implements mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: a, b
// and cc are each lane's A (4 words), B (2 words) and C (4 floats); the
// layouts, with g = lane>>2 and t = lane%4: A element i of the 8 a lane
// holds (two per .b32, low half first) is at row g + 8*((i>>1)&1), col 2t
// + (i&1) + 8*(i>>2); B element i of 4 at row 2t + (i&1) + 8*(i>>1), col
// g; C/D element i of 4 at row g + 8*(i>>1), col 2t + (i&1).
func mma(a *[32][4]uint64, b *[32][2]uint64, cc *[32][4]uint64, f16 bool) (d [32][4]uint64) {
	var A [16][16]float64
	var B [8][16]float64 // B[col][k]
	for l := 0; l < 32; l++ {
		g, t := l>>2, l%4
		for i := 0; i < 8; i++ {
			A[g+8*((i>>1)&1)][2*t+(i&1)+8*(i>>2)] = elem16(uint16(a[l][i/2]>>(16*(i&1))), f16)
		}
		for i := 0; i < 4; i++ {
			B[g][2*t+(i&1)+8*(i>>1)] = elem16(uint16(b[l][i/2]>>(16*(i&1))), f16)
		}
	}
	for l := 0; l < 32; l++ {
		g, t := l>>2, l%4
		for i := 0; i < 4; i++ {
			r, col := g+8*(i>>1), 2*t+(i&1)
			s := float64(f32(cc[l][i]))
			ar, bc := &A[r], &B[col]
			for k := 0; k < 16; k++ {
				s += ar[k] * bc[k]
			}
			d[l][i] = uf32(float32(s))
		}
	}
	return d
}

// ldmatrix implements ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.b16:
// lanes 8j..8j+7 give the addresses of rows 0..7 of matrix j (8
// contiguous b16 each); lane l receives, per matrix, the pair at row l/4,
// cols 2(l%4), 2(l%4)+1 (low half first), or with .trans the pair at rows
// 2(l%4), 2(l%4)+1 of col l/4.
func (c *cta) ldmatrix(addrs *[32]uint64, n int, trans bool) (out [32][4]uint64) {
	for i := 0; i < 8*n; i++ {
		if a := addrs[i]; a%16 != 0 {
			fail("ldmatrix row address 0x%x not 16-byte aligned", a)
		}
	}
	read := func(a uint64) uint64 {
		if a+2 > uint64(len(c.shared)) {
			fail("ldmatrix read at %d beyond SharedBytes=%d", a, len(c.shared))
		}
		c.checkLanded("ldmatrix read", a, 2)
		return uint64(binary.LittleEndian.Uint16(c.shared[a:]))
	}
	for l := 0; l < 32; l++ {
		g, t := uint64(l/4), l%4
		for j := 0; j < n; j++ {
			var lo, hi uint64
			if trans {
				lo = read(addrs[8*j+2*t] + 2*g)
				hi = read(addrs[8*j+2*t+1] + 2*g)
			} else {
				lo = read(addrs[8*j+int(g)] + uint64(4*t))
				hi = read(addrs[8*j+int(g)] + uint64(4*t+2))
			}
			out[l][j] = lo | hi<<16
		}
	}
	return out
}
