package codegen

// The simulator's Hopper instructions: wgmma.mma_async m64nNk16 (f32
// accumulators, bf16/f16 operands; A from registers or shared memory, B
// from shared memory), wgmma.fence / commit_group / wait_group, and
// fence.proxy.async. Written from the PTX ISA (§9.7.15), independently of
// codegen/sm90:
//
//   - register fragments: thread l of warp w%4 of a warpgroup holds A
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
//
// Results are placeholders (NaNs tagged with an id) until wgmma.wait_group
// (or a later wgmma accumulating into them) resolves them, so reading an
// accumulator early gives NaN. Shared bytes written through the generic
// proxy (st.shared, cp.async) carry their writer until it executes
// fence.proxy.async; a wgmma reading a marked byte fails.

import (
	"encoding/binary"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/internal/half"
)

// simWG is a thread's wgmma state.
type simWG struct {
	fenced  bool              // wgmma.fence since the last wait
	pending map[uint32]uint64 // placeholder id -> result
	group   map[uint32]int    // placeholder id -> the commit group it belongs to
	commits int               // commit_groups so far (the open group's number)
	next    uint32
	written [][2]uint64 // shared writes not yet fenced: address, bytes
}

// proxyMarks records, per shared byte, the thread (tid+1) that wrote it
// through the generic proxy and has not fenced since.
type proxyMarks struct {
	mu    sync.Mutex
	marks []int32
}

func newProxyMarks(n int) *proxyMarks { return &proxyMarks{marks: make([]int32, n)} }

// markShared records a generic-proxy write to shared memory.
func (t *simThread) markShared(ptr value.Value, addr uint64, n int) {
	p := t.cta.proxy
	if p == nil || ptr.Type().(*types.PointerType).AddrSpace != 3 {
		return
	}
	p.mu.Lock()
	for i := 0; i < n; i++ {
		p.marks[addr+uint64(i)] = int32(t.tid + 1)
	}
	p.mu.Unlock()
	t.wg.written = append(t.wg.written, [2]uint64{addr, uint64(n)})
}

// fenceProxy clears this thread's marks.
func (t *simThread) fenceProxy() {
	p := t.cta.proxy
	if p == nil {
		return
	}
	p.mu.Lock()
	for _, w := range t.wg.written {
		for i := uint64(0); i < w[1]; i++ {
			if p.marks[w[0]+i] == int32(t.tid+1) {
				p.marks[w[0]+i] = 0
			}
		}
	}
	p.mu.Unlock()
	t.wg.written = nil
}

const placeholderBits = 0x7fc00000

func (t *simThread) placeholder(x uint64) uint64 {
	if t.wg.pending == nil {
		t.wg.pending = map[uint32]uint64{}
		t.wg.group = map[uint32]int{}
	}
	t.wg.next = t.wg.next%(1<<22-1) + 1
	t.wg.pending[t.wg.next] = x
	t.wg.group[t.wg.next] = t.wg.commits
	return placeholderBits | uint64(t.wg.next)
}

// resolve returns the value behind a placeholder (other values as they
// are).
func (t *simThread) resolve(x uint64) uint64 {
	if x&^uint64(1<<22-1) != placeholderBits || x == placeholderBits {
		return x
	}
	v, ok := t.wg.pending[uint32(x&(1<<22-1))]
	if !ok {
		t.cta.m.fail("wgmma result placeholder %#x resolved twice or never produced", x)
	}
	delete(t.wg.pending, uint32(x&(1<<22-1)))
	return v
}

// setAgg sets an inline asm's results (a struct, or one value).
func (t *simThread) setAgg(in *ir.InstCall, vals []uint64) {
	if types.Equal(in.Type(), types.Void) {
		return
	}
	if _, ok := in.Type().(*types.StructType); ok {
		t.aggs[in] = vals
		return
	}
	t.vals[in] = vals[0]
}

// wgmmaAsm runs the Hopper inline asm; false for other asm.
func (t *simThread) wgmmaAsm(in *ir.InstCall, ia *ir.InlineAsm, args []uint64) bool {
	s := ia.Asm
	switch {
	case strings.Contains(s, "wgmma.mma_async"):
		t.wgmma(in, s, args)
	case s == "wgmma.fence.sync.aligned;":
		t.wg.fenced = true
	case s == "wgmma.commit_group.sync.aligned;":
		t.wg.commits++
	case strings.HasPrefix(s, "wgmma.wait_group.sync.aligned"):
		// wait_group N completes every group but the N most recent: the
		// registers tied through it must all belong to completed groups.
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "wgmma.wait_group.sync.aligned"), ";")))
		if err != nil || n < 0 {
			t.cta.m.fail("wgmma.wait_group with a bad count: %q", s)
		}
		out := make([]uint64, len(args))
		for i, a := range args {
			if id := uint32(a & (1<<22 - 1)); a&^uint64(1<<22-1) == placeholderBits && a != placeholderBits {
				if g, ok := t.wg.group[id]; ok && g >= t.wg.commits-n {
					t.cta.m.fail("wgmma.wait_group %d returns a result of group %d, still in flight (%d committed)", n, g, t.wg.commits)
				}
				delete(t.wg.group, id)
			}
			out[i] = t.resolve(a)
		}
		t.setAgg(in, out)
		t.wg.fenced = false
	case s == "fence.proxy.async.shared::cta;":
		t.fenceProxy()
	case s == "" && len(args) > 0:
		// An operand pin: its outputs are its inputs.
		t.setAgg(in, append([]uint64(nil), args...))
	default:
		return false
	}
	return true
}

var (
	wgmmaShapeRE = regexp.MustCompile(`wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.(bf16|f16)\.(bf16|f16) \{([^}]*)\}, (\{[^}]*\}|\$\d+), (\$\d+), p, 1, 1, (\d)(?:, (\d))?;`)
	setpRE       = regexp.MustCompile(`setp\.ne\.b32 p, (\$\d+), 0;`)
)

type wgmmaDeposit struct {
	a            [4]uint64
	descA, descB uint64
}

// wgmma implements one wgmma.mma_async of a warpgroup.
func (t *simThread) wgmma(in *ir.InstCall, s string, args []uint64) {
	m := t.cta.m
	sm := wgmmaShapeRE.FindStringSubmatch(s)
	pm := setpRE.FindStringSubmatch(s)
	if sm == nil || pm == nil {
		m.fail("unparsed wgmma asm %q", s)
	}
	if !t.wg.fenced {
		m.fail("wgmma.mma_async without a wgmma.fence since the last wait")
	}
	n, _ := strconv.Atoi(sm[1])
	nOut := n / 2
	if st, ok := in.Type().(*types.StructType); !ok || len(st.Fields) != nOut {
		m.fail("wgmma m64n%d returns %s, want %d floats", n, in.Type(), nOut)
	}
	arg := func(ref string) uint64 {
		k, _ := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(ref), "$"))
		if k < nOut || k-nOut >= len(args) {
			m.fail("wgmma operand %s is not an input", ref)
		}
		return args[k-nOut]
	}
	accumulate := arg(pm[1]) != 0
	var dep wgmmaDeposit
	rs := strings.HasPrefix(sm[5], "{")
	if rs {
		for i, r := range strings.Split(strings.Trim(sm[5], "{}"), ",") {
			dep.a[i] = arg(r)
		}
	} else {
		dep.descA = arg(sm[5])
	}
	dep.descB = arg(sm[6])
	transA, transB := 0, 0
	if rs {
		transB, _ = strconv.Atoi(sm[7])
	} else {
		transA, _ = strconv.Atoi(sm[7])
		transB, _ = strconv.Atoi(sm[8])
	}
	var c []uint64
	if accumulate {
		c = args[:nOut]
	}
	f16 := sm[2] == "f16"

	g, q := t.tid/128, t.tid%128
	all, ok := t.cta.wgs[g].exchange(q, dep)
	if !ok {
		panic(simAbort{})
	}
	var prod []float64
	if q == 0 {
		prod = t.cta.wgmmaProduct(all, rs, n, f16, transA, transB)
	}
	res, ok := t.cta.wgs[g].exchange(q, prod)
	if !ok {
		panic(simAbort{})
	}
	prod = res[0].([]float64)
	w, lane := q/32, q%32
	out := make([]uint64, nOut)
	for i := range out {
		row := 16*w + lane/4 + 8*((i>>1)&1)
		col := 8*(i>>2) + 2*(lane%4) + (i & 1)
		v := prod[row*n+col]
		if accumulate {
			v += float64(f32(t.resolve(c[i])))
		}
		out[i] = t.placeholder(uf32(float32(v)))
	}
	t.aggs[in] = out
}

// wgmmaProduct is A·B (64 x n) of a warpgroup's deposits.
func (c *simCTA) wgmmaProduct(all []any, rs bool, n int, f16 bool, transA, transB int) []float64 {
	elem := func(h uint16) float64 {
		if f16 {
			return float64(half.F16ToF32(h))
		}
		return float64(half.BF16ToF32(h))
	}
	d0 := all[0].(wgmmaDeposit)
	for _, x := range all {
		d := x.(wgmmaDeposit)
		if d.descB != d0.descB || (!rs && d.descA != d0.descA) {
			c.m.fail("wgmma descriptors differ across the warpgroup")
		}
	}
	var A [64][16]float64
	if rs {
		for q, x := range all {
			d := x.(wgmmaDeposit)
			w, lane := q/32, q%32
			for i := 0; i < 8; i++ {
				row := 16*w + lane/4 + 8*((i>>1)&1)
				col := 2*(lane%4) + (i & 1) + 8*(i>>2)
				A[row][col] = elem(uint16(d.a[i/2] >> (16 * (i & 1))))
			}
		}
	} else {
		for r := 0; r < 64; r++ {
			for k := 0; k < 16; k++ {
				A[r][k] = elem(c.descRead(d0.descA, transA == 1, r, k))
			}
		}
	}
	B := make([][16]float64, n) // B[col][k]
	for col := 0; col < n; col++ {
		for k := 0; k < 16; k++ {
			B[col][k] = elem(c.descRead(d0.descB, transB == 1, col, k))
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
func (c *simCTA) descRead(desc uint64, mnMajor bool, mn, k int) uint16 {
	start := int(desc&0x3FFF) << 4
	lbo := int(desc>>16&0x3FFF) << 4
	sbo := int(desc>>32&0x3FFF) << 4
	if desc>>49&7 != 0 || desc>>46&7 != 0 || desc>>14&3 != 0 || desc>>30&3 != 0 || desc>>52&0x3FF != 0 {
		c.m.fail("wgmma descriptor %#x: base offset or reserved bits set", desc)
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
		c.m.fail("wgmma descriptor %#x: no swizzle (not simulated)", desc)
	}
	var a int
	if mnMajor {
		a = start + 2*(mn%(w/2)) + (mn/(w/2))*lbo + (k%8)*w + (k/8)*sbo
	} else {
		a = start + (mn%8)*w + (mn/8)*sbo + 2*k
	}
	a ^= (a >> 7 & (w/16 - 1)) << 4
	if a < 0 || a+2 > len(c.shared) {
		c.m.fail("wgmma read at %d beyond SharedBytes=%d", a, len(c.shared))
	}
	c.sched.checkLanded("wgmma read", uint64(a), 2)
	if p := c.proxy; p != nil {
		p.mu.Lock()
		who := p.marks[a] | p.marks[a+1]
		p.mu.Unlock()
		if who != 0 {
			c.m.fail("wgmma reads shared byte %d written by thread %d through the generic proxy without fence.proxy.async", a, who-1)
		}
	}
	return binary.LittleEndian.Uint16(c.shared[a:])
}
