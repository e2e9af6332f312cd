// Package simt is a SIMT simulator of the LLVM IR that fac's code
// generator emits for NVPTX. Tests use it to check the lowering
// numerically against the CPU device (runtime/cpu) on machines without a
// GPU.
//
// A kernel's function is compiled once (Compile) into closures over a
// register file of 64-bit slots, one per SSA value and lane; a warp runs
// its 32 lanes in lock-step, with divergent lanes split into groups that
// merge again when they reach the same instruction. The warps of a CTA
// run on one goroutine under a deterministic scheduler that switches
// warps after a seeded, random number of blocks, and when a warp blocks
// (a barrier, an mbarrier wait, a warpgroup rendezvous); CTAs run one
// after another.
//
// What it checks, besides computing:
//   - global accesses inside the buffers passed in, shared accesses inside
//     the kernel's SharedBytes, alignment of every power-of-two access;
//   - warp-synchronous instructions (shfl.sync, vote, mma.sync, ldmatrix,
//     bar.sync, wgmma, setmaxnreg) executed by the whole warp, converged;
//   - mma.sync and ldmatrix from the fragment layouts of the PTX ISA
//     (m16n8k16 .row.col, §9.7.14.5.8), independently of codegen's
//     layouts, so that a layout mistake shows up as a wrong result;
//   - cp.async copies complete at issue or at the wait (alternately), so
//     that both a missing barrier before the issue and a missing wait show;
//   - wgmma.mma_async (§9.7.15) as a warpgroup rendezvous that reads its
//     shared operands through the matrix descriptors; its results are
//     NaN placeholders until wgmma.wait_group (or a later wgmma
//     accumulating into them), and a wait whose count leaves their group
//     in flight fails;
//   - shared bytes written through the generic proxy are marked until the
//     writer executes fence.proxy.async; wgmma, TMA stores and bulk
//     reductions reading a marked byte fail;
//   - TMA (§9.7.9.25) and mbarriers (§9.7.13.15): copies land when a
//     waiter finds their mbarrier's arrivals all in, and a generic access,
//     ldmatrix or wgmma touching bytes still in flight fails; tensor stores
//     and bulk reductions read shared memory at their wait, and fail when
//     their source changed since the issue; a CTA that exits with copies
//     in flight fails;
//   - a CTA whose live warps all wait fails (naming an mbarrier wait when
//     there is one) rather than hang.
package simt

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime/debug"
	"strings"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/tir"
)

// ParamKind says what one kernel argument is.
type ParamKind int

const (
	Ptr       ParamKind = iota // a device pointer: the argument is a *Buffer of Elem
	I32                        // int, int32 or bool
	I64                        // int64
	F32                        // float32 or float64
	TensorMap                  // a CUtensorMap, built from TMA and the other arguments
)

// Param is one kernel parameter, in order.
type Param struct {
	Name string
	Kind ParamKind
	Elem tir.Elem      // Ptr: the element type
	TMA  *artifact.TMA // TensorMap: what it maps (TMA.Tensor names a Ptr parameter)
}

// Buffer is a pointer argument: global memory holding Vals as Elem, read
// before the launch and written back after it. Vals may be the slice of a
// CPU-device buffer, which then receives the results.
type Buffer struct {
	Elem tir.Elem
	Vals []float64
}

// Kernel is what a launch needs to know of a kernel besides its code.
type Kernel struct {
	Name        string // the function
	Threads     int    // threads per CTA, a multiple of 32
	SharedBytes int    // dynamic shared memory
	Params      []Param
}

// Options tune one run.
type Options struct {
	// Misalign places every buffer one element past a 256-byte boundary,
	// so that vectorized accesses must take their scalar fallback.
	Misalign bool
	// SMs is %nsmid; 0 means 3, fewer than most grids' programs, so that
	// a prefetch for the next wave's program lands inside the grid as well
	// as past it.
	SMs int
	// Seed picks the scheduler's interleaving of warps.
	Seed int64
	// MaxBlocks bounds the basic blocks one CTA may execute (all warps
	// together); 0 means 2^31. A kernel past it fails as a hang.
	MaxBlocks int64
}

// Run compiles ll and runs kernel k on grid. args follow k.Params but
// for tensor maps (built from the others): *Buffer for pointers (read
// before the launch, written back after it), int, int32 or bool for i32,
// int64 for i64, float32 or float64 for f32.
func Run(ll string, k *Kernel, grid [3]int, args []any, opt Options) error {
	p, err := Compile(ll, k)
	if err != nil {
		return err
	}
	return p.Run(grid, args, opt)
}

// simError is a failure the simulator reports (a kernel bug or a bad
// launch); fail panics with it and Run recovers it.
type simError struct{ msg string }

func fail(format string, args ...any) {
	panic(simError{fmt.Sprintf(format, args...)})
}

// alloc is one buffer of global memory.
type alloc struct {
	base, size uint64
}

// machine is the device: global memory and the tensor maps.
type machine struct {
	global []byte
	allocs []alloc
	last   int // the alloc the last access hit
	tmaps  map[uint64]*tmap
	grid   [3]int
	sms    int
}

func (m *machine) alloc(n int) uint64 {
	base := uint64(len(m.global))
	base = (base + 255) &^ 255
	if base < 4096 {
		base = 4096
	}
	need := int(base) + n
	if need > len(m.global) {
		m.global = append(m.global, make([]byte, need-len(m.global))...)
	}
	m.allocs = append(m.allocs, alloc{base, uint64(n)})
	return base
}

// inside reports whether [addr, addr+n) lies in one buffer.
func (m *machine) inside(addr uint64, n int) bool {
	if m.last < len(m.allocs) {
		if a := m.allocs[m.last]; addr >= a.base && addr+uint64(n) <= a.base+a.size {
			return true
		}
	}
	for i, a := range m.allocs {
		if addr >= a.base && addr+uint64(n) <= a.base+a.size {
			m.last = i
			return true
		}
	}
	return false
}

// overlaps reports whether [addr, addr+n) overlaps a buffer.
func (m *machine) overlaps(addr uint64, n int) bool {
	for _, a := range m.allocs {
		if addr < a.base+a.size && a.base < addr+uint64(n) {
			return true
		}
	}
	return false
}

// globalRun is n bytes of global memory at addr, which must lie in one
// buffer.
func (m *machine) globalRun(addr uint64, n int) []byte {
	if !m.inside(addr, n) {
		fail("global access of %d bytes at 0x%x outside every buffer", n, addr)
	}
	return m.global[addr : addr+uint64(n)]
}

// Run runs the program on grid (see the package function Run).
func (p *Program) Run(grid [3]int, args []any, opt Options) (err error) {
	m := &machine{grid: grid, sms: opt.SMs}
	if m.sms == 0 {
		m.sms = 3
	}
	var cur *cta
	defer func() {
		if r := recover(); r != nil {
			at := ""
			if cur != nil {
				at = fmt.Sprintf("cta %v: ", cur.id)
				if cur.cur != nil {
					at += cur.cur.where() + " "
				}
			}
			if e, ok := r.(simError); ok {
				err = fmt.Errorf("%s%s", at, e.msg)
				return
			}
			err = fmt.Errorf("%ssimulator panic: %v\n%s", at, r, debug.Stack())
		}
	}()
	params, outs, err := p.bind(m, args, opt.Misalign)
	if err != nil {
		return err
	}
	maxBlocks := opt.MaxBlocks
	if maxBlocks <= 0 {
		maxBlocks = 1 << 31
	}
	seed := uint64(opt.Seed)*0x9E3779B97F4A7C15 + 1
	var files [][]uint64
	for z := 0; z < grid[2]; z++ {
		for y := 0; y < grid[1]; y++ {
			for x := 0; x < grid[0]; x++ {
				c := newCTA(p, m, [3]int{x, y, z}, params, seed, &files)
				cur = c
				if err := c.run(maxBlocks); err != nil {
					return fmt.Errorf("cta %v: %v", c.id, err)
				}
				seed = c.rng
			}
		}
	}
	for _, o := range outs {
		sz := o.b.Elem.Bytes()
		for j := range o.b.Vals {
			o.b.Vals[j] = getElem(m.global[o.addr+uint64(j*sz):], o.b.Elem)
		}
	}
	return nil
}

type outBuf struct {
	b    *Buffer
	addr uint64
}

// bind places the arguments: buffers in global memory, scalars as their
// bits, tensor maps from the others. It returns each parameter's value.
func (p *Program) bind(m *machine, args []any, misalign bool) ([]uint64, []outBuf, error) {
	k := p.kernel
	vals := make([]uint64, len(k.Params))
	named := map[string]any{}
	bufs := map[string]uint64{}
	var outs []outBuf
	ai := 0
	for i, par := range k.Params {
		if par.Kind == TensorMap {
			continue
		}
		if ai >= len(args) {
			return nil, nil, fmt.Errorf("%d arguments for the %d parameters other than tensor maps", len(args), ai+1)
		}
		a := args[ai]
		ai++
		named[par.Name] = a
		switch par.Kind {
		case Ptr:
			b, ok := a.(*Buffer)
			if !ok {
				return nil, nil, fmt.Errorf("parameter %s: want a *simt.Buffer, got %T", par.Name, a)
			}
			sz := b.Elem.Bytes()
			var addr uint64
			if misalign {
				addr = m.alloc((len(b.Vals)+1)*sz) + uint64(sz)
				m.allocs[len(m.allocs)-1] = alloc{addr, uint64(len(b.Vals) * sz)}
			} else {
				addr = m.alloc(len(b.Vals) * sz)
			}
			for j, v := range b.Vals {
				putElem(m.global[addr+uint64(j*sz):], b.Elem, v)
			}
			vals[i] = addr
			bufs[par.Name] = addr
			outs = append(outs, outBuf{b, addr})
		case I32:
			v, ok := argInt(a)
			if !ok {
				return nil, nil, fmt.Errorf("parameter %s: want an integer, got %T", par.Name, a)
			}
			vals[i] = uint64(uint32(int32(v)))
		case I64:
			v, ok := argInt(a)
			if !ok {
				return nil, nil, fmt.Errorf("parameter %s: want an integer, got %T", par.Name, a)
			}
			vals[i] = uint64(v)
		case F32:
			var f float32
			switch a := a.(type) {
			case float32:
				f = a
			case float64:
				f = float32(a)
			default:
				return nil, nil, fmt.Errorf("parameter %s: want a float, got %T", par.Name, a)
			}
			vals[i] = uint64(math.Float32bits(f))
		}
	}
	if ai != len(args) {
		return nil, nil, fmt.Errorf("%d arguments for %d parameters other than tensor maps", len(args), ai)
	}
	for i, par := range k.Params {
		if par.Kind == TensorMap {
			addr, err := m.tensorMap(par, k.Params, named, bufs, misalign)
			if err != nil {
				return nil, nil, fmt.Errorf("tensor map %s: %v", par.Name, err)
			}
			vals[i] = addr
		}
	}
	return vals, outs, nil
}

// argInt is an integer argument's value.
func argInt(a any) (int64, bool) {
	switch a := a.(type) {
	case int:
		return int64(a), true
	case int32:
		return int64(a), true
	case int64:
		return a, true
	case bool:
		if a {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func putElem(b []byte, e tir.Elem, v float64) {
	switch e {
	case tir.F32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case tir.BF16:
		binary.LittleEndian.PutUint16(b, half.F32ToBF16(float32(v)))
	case tir.F16:
		binary.LittleEndian.PutUint16(b, half.F32ToF16(float32(v)))
	case tir.I32:
		binary.LittleEndian.PutUint32(b, uint32(int32(v)))
	case tir.I64:
		binary.LittleEndian.PutUint64(b, uint64(int64(v)))
	case tir.I1:
		b[0] = 0
		if v != 0 {
			b[0] = 1
		}
	}
}

func getElem(b []byte, e tir.Elem) float64 {
	switch e {
	case tir.F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case tir.BF16:
		return float64(half.BF16ToF32(binary.LittleEndian.Uint16(b)))
	case tir.F16:
		return float64(half.F16ToF32(binary.LittleEndian.Uint16(b)))
	case tir.I32:
		return float64(int32(binary.LittleEndian.Uint32(b)))
	case tir.I64:
		return float64(int64(binary.LittleEndian.Uint64(b)))
	case tir.I1:
		return float64(b[0])
	}
	return 0
}

// quote shortens an inline asm string for a message.
func quote(s string) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return fmt.Sprintf("%q", s)
}
