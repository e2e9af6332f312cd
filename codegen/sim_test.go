package codegen

// A small SIMT interpreter of the LLVM IR that codegen emits, used by the
// tests to check the lowering numerically against the CPU interpreter
// (runtime/cpu) on a machine without a GPU.
//
// Every thread of a CTA is a goroutine interpreting the kernel; bar.sync is
// a CTA barrier, shfl.sync and mma.sync are warp rendezvous. mma.sync is
// implemented from the fragment layouts in the PTX ISA manual
// (m16n8k16 .row.col, §9.7.14.5.8), independently of codegen's layouts, so
// a layout mistake shows up as a wrong result. Global memory is one byte
// array with bounds-checked allocations, so a masked lane that touches
// memory, or an out-of-bounds address, is an error; shared memory is
// bounds-checked against Result.SharedBytes.
//
// wgmma (sim_wgmma_test.go) is a warpgroup rendezvous reading its shared
// operands through the matrix descriptors as the PTX ISA defines them;
// its results stay placeholders until wgmma.wait_group, and it fails on
// shared memory written through the generic proxy without a following
// fence.proxy.async.
//
// TMA (sim_tma_test.go): tensor-map parameters, mbarriers and
// cp.async.bulk.tensor, whose copies land at the wait that sees their
// mbarrier's arrivals in. Every wait counts its thread as blocked, so a
// CTA whose live threads all wait fails instead of hanging.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"os"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/llir/llvm/asm"
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

var (
	barCountRE   = regexp.MustCompile(`^bar\.sync (\d+), (\d+);$`)
	barRegRE     = regexp.MustCompile(`^bar\.sync \$0, (\d+);$`) // the id in a register: pingpong's turns, a consumer group's barrier
	redVecRE     = regexp.MustCompile(`red\.relaxed\.gpu\.global\.add\.v(\d)\.f32`)
	setMaxNRegRE = regexp.MustCompile(`^setmaxnreg\.(inc|dec)\.sync\.aligned\.u32 (\d+);$`)
	bitTestRE    = regexp.MustCompile(`and\.b32 t, \$1, 0x([0-9a-f]+);\n\tsetp\.ne\.b32 \$0, t, 0;`) // core.bitTest
)

type simAlloc struct {
	base, size uint64
}

type simMachine struct {
	mu     sync.Mutex
	global []byte
	allocs []simAlloc
	errs   []string
	tmaps  map[uint64]*simTMap // tensor-map parameters by their (fake) address (sim_tma_test.go)
	grid   [3]int
}

// simSMs is %nsmid on the simulator: fewer than most cases' programs, so
// that a prefetch for the next wave's program lands inside the grid as
// well as past it.
const simSMs = 3

func (m *simMachine) fail(format string, args ...any) {
	m.mu.Lock()
	if len(m.errs) < 10 {
		m.errs = append(m.errs, fmt.Sprintf(format, args...))
	}
	m.mu.Unlock()
	panic(simAbort{})
}

type simAbort struct{}

func (m *simMachine) alloc(n int) uint64 {
	base := uint64(len(m.global))
	base = (base + 255) &^ 255
	if base < 4096 {
		base = 4096
	}
	need := int(base) + n
	for len(m.global) < need {
		m.global = append(m.global, make([]byte, need-len(m.global))...)
	}
	m.allocs = append(m.allocs, simAlloc{base, uint64(n)})
	return base
}

func (m *simMachine) checkGlobal(addr uint64, n int) {
	for _, a := range m.allocs {
		if addr >= a.base && addr+uint64(n) <= a.base+a.size {
			return
		}
	}
	m.fail("global access of %d bytes at 0x%x outside every buffer", n, addr)
}

type simCTA struct {
	m      *simMachine
	ctaid  [3]int
	shared []byte
	bar    *rendezvous
	warps  []*rendezvous
	wgs    []*rendezvous // warpgroups (wgmma)
	proxy  *proxyMarks   // nil unless the kernel uses wgmma
	sched  *simSched     // blocked threads, and the mbarriers (sim_tma_test.go)
	nmu    sync.Mutex
	named  map[int]*rendezvous // named barriers (bar.sync/bar.arrive id, count), made on first use
}

// namedBar is named barrier id for count threads.
func (c *simCTA) namedBar(id, count int) *rendezvous {
	c.nmu.Lock()
	defer c.nmu.Unlock()
	if c.named == nil {
		c.named = map[int]*rendezvous{}
	}
	r := c.named[id]
	if r == nil {
		r = newRendezvous(count)
		r.sched = c.sched
		c.named[id] = r
	}
	if r.n != count {
		c.m.fail("named barrier %d used with counts %d and %d", id, r.n, count)
	}
	return r
}

type rendezvous struct {
	mu    sync.Mutex
	cond  *sync.Cond
	n     int
	count int
	gen   int
	slots []any
	out   []any
	dead  bool
	// waiting counts the participants blocked in this generation; sched
	// (when set) counts them among the CTA's blocked threads, so that a
	// wait every live thread is stuck in fails rather than hangs.
	waiting int
	sched   *simSched
}

func newRendezvous(n int) *rendezvous {
	r := &rendezvous{n: n, slots: make([]any, n)}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// exchange deposits v as participant i and returns every participant's
// deposit once all have arrived.
func (r *rendezvous) exchange(i int, v any) ([]any, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead {
		return nil, false
	}
	gen := r.gen
	r.slots[i] = v
	if !r.count1() {
		r.waiting++
		if r.sched != nil {
			r.sched.block()
		}
		for gen == r.gen && !r.dead {
			r.cond.Wait()
		}
		if r.dead {
			return nil, false
		}
	}
	return r.out, true
}

// arrive counts one arrival without waiting (bar.arrive); false when dead.
func (r *rendezvous) arrive() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead {
		return false
	}
	r.count1()
	return true
}

// count1 counts one arrival (r.mu held); the last one of a generation
// publishes the deposits and wakes the waiters. It reports whether it was
// the last.
func (r *rendezvous) count1() bool {
	r.count++
	if r.count < r.n {
		return false
	}
	r.out, r.slots = r.slots, make([]any, r.n)
	r.count = 0
	if r.sched != nil {
		r.sched.unblock(r.waiting)
	}
	r.waiting = 0
	r.gen++
	r.cond.Broadcast()
	return true
}

func (r *rendezvous) kill() {
	r.mu.Lock()
	r.dead = true
	r.cond.Broadcast()
	r.mu.Unlock()
}

type simThread struct {
	cta  *simCTA
	tid  int
	vals map[value.Value]uint64
	aggs map[value.Value][]uint64
	// cp.async: copies of the open group, and committed groups not yet
	// waited for (they run at cp.async.wait_group, so a missing wait reads
	// stale shared memory).
	open    []simCopy
	pending [][]simCopy
	ncopies int
	wg      simWG     // wgmma state
	local   []byte    // alloca'd memory, at simLocal + offset
	bulk    []simBulk // bulk reductions and tensor stores in flight (sim_bulk_test.go)
}

// simLocal tags the generic addresses of a thread's allocas.
const simLocal = 1 << 48

func (t *simThread) doCopy(c simCopy) {
	var buf [16]byte
	if c.n > 0 {
		copy(buf[:c.n], t.mem(c.srcV, c.src, c.n))
	}
	copy(t.mem(c.dstV, c.dst, 16), buf[:])
	t.markShared(c.dstV, c.dst, 16)
}

type simCopy struct {
	dst, src uint64
	dstV     value.Value
	srcV     value.Value
	n        int // bytes read from src; the rest of the 16 are zeroed
}

// simulate runs the kernel in ll on a grid; args follow res.Params but for
// tensor maps (built from the others): *cpu.Buffer for pointers (read
// before, written back after), int/int32 for i32, float32/float64 for f32.
//
// misalign places every buffer one element past a 256-byte boundary, so
// vectorized accesses must take their scalar fallback.
func simulate(ll string, res *Result, grid [3]int, args []any, misalign bool) error {
	mod, err := asm.ParseString("kernel.ll", ll)
	if err != nil {
		return fmt.Errorf("parse LLVM IR: %v", err)
	}
	var fn *ir.Func
	for _, f := range mod.Funcs {
		if f.Name() == res.Name {
			fn = f
		}
	}
	if fn == nil {
		return fmt.Errorf("no function %s", res.Name)
	}
	m := &simMachine{grid: grid}
	usesWGMMA := strings.Contains(ll, "wgmma.mma_async")
	params := map[value.Value]uint64{}
	type outBuf struct {
		b    *cpu.Buffer
		addr uint64
	}
	var outs []outBuf
	// args follow the parameters other than tensor maps, which simulate
	// builds from those (sim_tma_test.go).
	named := map[string]any{}
	bufs := map[string]uint64{}
	ai := 0
	for i, p := range res.Params {
		if p.Kind == ParamTensorMap {
			continue
		}
		if ai >= len(args) {
			return fmt.Errorf("%d arguments for the %d parameters other than tensor maps", len(args), ai+1)
		}
		a := args[ai]
		ai++
		named[p.Name] = a
		switch p.Kind {
		case ParamU64:
			b := a.(*cpu.Buffer)
			sz := memBytes(b.Elem)
			var addr uint64
			if misalign {
				addr = m.alloc((len(b.Vals)+1)*sz) + uint64(sz)
				m.allocs[len(m.allocs)-1] = simAlloc{addr, uint64(len(b.Vals) * sz)}
			} else {
				addr = m.alloc(len(b.Vals) * sz)
			}
			for j, v := range b.Vals {
				putElem(m.global[addr+uint64(j*sz):], b.Elem, v)
			}
			params[fn.Params[i]] = addr
			bufs[p.Name] = addr
			outs = append(outs, outBuf{b, addr})
		case ParamI32:
			switch a := a.(type) {
			case int:
				params[fn.Params[i]] = uint64(uint32(int32(a)))
			case int32:
				params[fn.Params[i]] = uint64(uint32(a))
			case bool:
				if a {
					params[fn.Params[i]] = 1
				}
			}
		case ParamF32:
			var f float32
			switch a := a.(type) {
			case float32:
				f = a
			case float64:
				f = float32(a)
			}
			params[fn.Params[i]] = uint64(math.Float32bits(f))
		case ParamI64:
			params[fn.Params[i]] = uint64(a.(int64))
		}
	}
	if ai != len(args) {
		return fmt.Errorf("%d arguments for %d parameters other than tensor maps", len(args), ai)
	}
	for i, p := range res.Params {
		if p.Kind == ParamTensorMap {
			addr, err := m.tensorMap(p, res.Params, named, bufs, misalign)
			if err != nil {
				return fmt.Errorf("tensor map %s: %v", p.Name, err)
			}
			params[fn.Params[i]] = addr
		}
	}
	usesTMA := strings.Contains(ll, "cp.async.bulk.tensor")
	for z := 0; z < grid[2]; z++ {
		for y := 0; y < grid[1]; y++ {
			for x := 0; x < grid[0]; x++ {
				cta := &simCTA{m: m, ctaid: [3]int{x, y, z}, shared: make([]byte, res.SharedBytes),
					bar: newRendezvous(res.Threads)}
				for w := 0; w < res.Threads/32; w++ {
					cta.warps = append(cta.warps, newRendezvous(32))
				}
				for g := 0; g < res.Threads/128; g++ {
					cta.wgs = append(cta.wgs, newRendezvous(128))
				}
				if usesWGMMA || usesTMA {
					cta.proxy = newProxyMarks(res.SharedBytes)
				}
				cta.sched = newSimSched(m, res.Threads, res.SharedBytes, usesTMA)
				cta.bar.sched = cta.sched
				for _, r := range append(append([]*rendezvous(nil), cta.warps...), cta.wgs...) {
					r.sched = cta.sched
				}
				var wg sync.WaitGroup
				for t := 0; t < res.Threads; t++ {
					wg.Add(1)
					go func(t int) {
						defer wg.Done()
						defer func() {
							if r := recover(); r != nil {
								if _, ok := r.(simAbort); !ok {
									m.mu.Lock()
									m.errs = append(m.errs, fmt.Sprintf("thread %d: panic: %v%s", t, r, simStack()))
									m.mu.Unlock()
								}
								cta.bar.kill()
								for _, w := range cta.warps {
									w.kill()
								}
								for _, w := range cta.wgs {
									w.kill()
								}
								cta.nmu.Lock()
								for _, w := range cta.named {
									w.kill()
								}
								cta.nmu.Unlock()
								cta.sched.kill()
							}
						}()
						th := &simThread{cta: cta, tid: t, vals: map[value.Value]uint64{}, aggs: map[value.Value][]uint64{}}
						for k, v := range params {
							th.vals[k] = v
						}
						th.run(fn)
						cta.sched.exit()
					}(t)
				}
				wg.Wait()
				if len(m.errs) == 0 {
					cta.sched.finish()
				}
				if len(m.errs) > 0 {
					return fmt.Errorf("cta %v: %s", cta.ctaid, strings.Join(m.errs, "; "))
				}
			}
		}
	}
	for _, o := range outs {
		sz := memBytes(o.b.Elem)
		for j := range o.b.Vals {
			o.b.Vals[j] = getElem(m.global[o.addr+uint64(j*sz):], o.b.Elem)
		}
	}
	return nil
}

func memBytes(e tir.Elem) int { return e.Bytes() }

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

// ---- interpretation ----

func bitsOf(t types.Type) int {
	switch t := t.(type) {
	case *types.IntType:
		return int(t.BitSize)
	case *types.FloatType:
		switch t.Kind {
		case types.FloatKindHalf:
			return 16
		case types.FloatKindFloat:
			return 32
		case types.FloatKindDouble:
			return 64
		}
	case *types.PointerType:
		return 64
	case *types.VectorType:
		return int(t.Len) * bitsOf(t.ElemType)
	}
	panic(fmt.Sprintf("bits of %s", t))
}

func mask(x uint64, bits int) uint64 {
	if bits >= 64 {
		return x
	}
	return x & (1<<bits - 1)
}

func sext(x uint64, bits int) int64 {
	if bits >= 64 {
		return int64(x)
	}
	s := 64 - bits
	return int64(x<<s) >> s
}

func f32(x uint64) float32  { return math.Float32frombits(uint32(x)) }
func uf32(f float32) uint64 { return uint64(math.Float32bits(f)) }

func (t *simThread) get(v value.Value) uint64 {
	switch c := v.(type) {
	case *constant.Int:
		bits := int(c.Typ.BitSize)
		var x big.Int
		x.Set(c.X)
		if x.Sign() < 0 {
			return mask(uint64(x.Int64()), bits)
		}
		return mask(x.Uint64(), bits)
	case *constant.Float:
		if c.NaN {
			return uf32(float32(math.NaN()))
		}
		f, _ := c.X.Float32()
		if c.Typ.Kind == types.FloatKindHalf {
			return uint64(half.F32ToF16(f))
		}
		return uf32(f)
	case *ir.Global:
		return 0 // @smem: shared address 0
	}
	x, ok := t.vals[v]
	if !ok {
		t.cta.m.fail("value %s used before definition", v.Ident())
	}
	return x
}

func (t *simThread) run(fn *ir.Func) {
	b := fn.Blocks[0]
	var prev *ir.Block
	for {
		// phis read their incoming values simultaneously
		var phiVals []uint64
		var phis []*ir.InstPhi
		for _, inst := range b.Insts {
			p, ok := inst.(*ir.InstPhi)
			if !ok {
				break
			}
			found := false
			for _, inc := range p.Incs {
				if inc.Pred.(*ir.Block) == prev {
					phiVals = append(phiVals, t.get(inc.X))
					found = true
					break
				}
			}
			if !found {
				t.cta.m.fail("phi without incoming from %s", prev.Ident())
			}
			phis = append(phis, p)
		}
		for i, p := range phis {
			t.vals[p] = phiVals[i]
		}
		for _, inst := range b.Insts[len(phis):] {
			t.exec(inst)
		}
		prev = b
		switch term := b.Term.(type) {
		case *ir.TermRet:
			if len(t.bulk) > 0 {
				t.cta.m.fail("thread %d exits with %d bulk reductions or tensor stores in flight (no cp.async.bulk.wait_group)", t.tid, len(t.bulk))
			}
			return
		case *ir.TermBr:
			b = term.Target.(*ir.Block)
		case *ir.TermCondBr:
			if t.get(term.Cond) != 0 {
				b = term.TargetTrue.(*ir.Block)
			} else {
				b = term.TargetFalse.(*ir.Block)
			}
		default:
			t.cta.m.fail("terminator %T", term)
		}
	}
}

func (t *simThread) exec(inst ir.Instruction) {
	m := t.cta.m
	set := func(v value.Value, x uint64) { t.vals[v] = mask(x, bitsOf(v.Type())) }
	switch in := inst.(type) {
	case *ir.InstAdd:
		set(in, t.get(in.X)+t.get(in.Y))
	case *ir.InstSub:
		set(in, t.get(in.X)-t.get(in.Y))
	case *ir.InstMul:
		set(in, t.get(in.X)*t.get(in.Y))
	case *ir.InstSDiv, *ir.InstSRem:
		var x, y value.Value
		if d, ok := in.(*ir.InstSDiv); ok {
			x, y = d.X, d.Y
		} else {
			r := in.(*ir.InstSRem)
			x, y = r.X, r.Y
		}
		bits := bitsOf(x.Type())
		a, b := sext(t.get(x), bits), sext(t.get(y), bits)
		if b == 0 {
			m.fail("division by zero")
		}
		if _, ok := in.(*ir.InstSDiv); ok {
			set(inst.(value.Value), uint64(a/b))
		} else {
			set(inst.(value.Value), uint64(a%b))
		}
	case *ir.InstShl:
		set(in, t.get(in.X)<<t.get(in.Y))
	case *ir.InstLShr:
		set(in, t.get(in.X)>>t.get(in.Y))
	case *ir.InstAShr:
		set(in, uint64(sext(t.get(in.X), bitsOf(in.X.Type()))>>t.get(in.Y)))
	case *ir.InstAnd:
		set(in, t.get(in.X)&t.get(in.Y))
	case *ir.InstOr:
		set(in, t.get(in.X)|t.get(in.Y))
	case *ir.InstXor:
		set(in, t.get(in.X)^t.get(in.Y))
	case *ir.InstFAdd:
		set(in, uf32(f32(t.get(in.X))+f32(t.get(in.Y))))
	case *ir.InstFSub:
		set(in, uf32(f32(t.get(in.X))-f32(t.get(in.Y))))
	case *ir.InstFMul:
		set(in, uf32(f32(t.get(in.X))*f32(t.get(in.Y))))
	case *ir.InstFDiv:
		set(in, uf32(f32(t.get(in.X))/f32(t.get(in.Y))))
	case *ir.InstFRem:
		set(in, uf32(float32(math.Mod(float64(f32(t.get(in.X))), float64(f32(t.get(in.Y)))))))
	case *ir.InstFNeg:
		set(in, uf32(-f32(t.get(in.X))))
	case *ir.InstICmp:
		bits := bitsOf(in.X.Type())
		a, b := t.get(in.X), t.get(in.Y)
		sa, sb := sext(a, bits), sext(b, bits)
		var r bool
		switch in.Pred {
		case enum.IPredEQ:
			r = a == b
		case enum.IPredNE:
			r = a != b
		case enum.IPredSLT:
			r = sa < sb
		case enum.IPredSLE:
			r = sa <= sb
		case enum.IPredSGT:
			r = sa > sb
		case enum.IPredSGE:
			r = sa >= sb
		case enum.IPredULT:
			r = a < b
		case enum.IPredULE:
			r = a <= b
		case enum.IPredUGT:
			r = a > b
		case enum.IPredUGE:
			r = a >= b
		}
		set(in, b2u(r))
	case *ir.InstFCmp:
		a, b := f32(t.get(in.X)), f32(t.get(in.Y))
		nan := a != a || b != b
		var r bool
		switch in.Pred {
		case enum.FPredOEQ:
			r = a == b
		case enum.FPredUNE:
			r = a != b || nan
		case enum.FPredOLT:
			r = a < b
		case enum.FPredOLE:
			r = a <= b
		case enum.FPredOGT:
			r = a > b
		case enum.FPredOGE:
			r = a >= b
		default:
			m.fail("fcmp %s", in.Pred)
		}
		set(in, b2u(r))
	case *ir.InstSelect:
		if t.get(in.Cond) != 0 {
			set(in, t.get(in.ValueTrue))
		} else {
			set(in, t.get(in.ValueFalse))
		}
	case *ir.InstZExt:
		set(in, t.get(in.From))
	case *ir.InstSExt:
		set(in, uint64(sext(t.get(in.From), bitsOf(in.From.Type()))))
	case *ir.InstTrunc:
		set(in, t.get(in.From))
	case *ir.InstFPExt:
		set(in, uf32(half.F16ToF32(uint16(t.get(in.From)))))
	case *ir.InstFPTrunc:
		set(in, uint64(half.F32ToF16(f32(t.get(in.From)))))
	case *ir.InstSIToFP:
		set(in, uf32(float32(sext(t.get(in.From), bitsOf(in.From.Type())))))
	case *ir.InstUIToFP:
		set(in, uf32(float32(t.get(in.From))))
	case *ir.InstBitCast:
		set(in, t.get(in.From))
	case *ir.InstPtrToInt:
		set(in, t.get(in.From))
	case *ir.InstIntToPtr:
		set(in, t.get(in.From))
	case *ir.InstGetElementPtr:
		if len(in.Indices) != 1 {
			m.fail("gep with %d indices", len(in.Indices))
		}
		idx := sext(t.get(in.Indices[0]), bitsOf(in.Indices[0].Type()))
		sz := int64(bitsOf(in.ElemType) / 8)
		set(in, uint64(int64(t.get(in.Src))+idx*sz))
	case *ir.InstLoad:
		if vt, ok := in.ElemType.(*types.VectorType); ok {
			w := bitsOf(vt.ElemType) / 8
			p := t.get(in.Src)
			b := t.mem(in.Src, p, w*int(vt.Len))
			out := make([]uint64, vt.Len)
			for i := range out {
				var buf [8]byte
				copy(buf[:], b[i*w:(i+1)*w])
				out[i] = binary.LittleEndian.Uint64(buf[:])
			}
			t.aggs[in] = out
			break
		}
		set(in, t.load(in.Src, bitsOf(in.ElemType)/8))
	case *ir.InstStore:
		if vt, ok := in.Src.Type().(*types.VectorType); ok {
			w := bitsOf(vt.ElemType) / 8
			b := t.mem(in.Dst, t.get(in.Dst), w*int(vt.Len))
			for i, x := range t.vector(in.Src) {
				var buf [8]byte
				binary.LittleEndian.PutUint64(buf[:], x)
				copy(b[i*w:(i+1)*w], buf[:w])
			}
			t.markShared(in.Dst, t.get(in.Dst), w*int(vt.Len))
			break
		}
		t.store(in.Dst, bitsOf(in.Src.Type())/8, t.get(in.Src))
	case *ir.InstInsertElement:
		v := append([]uint64(nil), t.vector(in.X)...)
		v[t.get(in.Index)] = mask(t.get(in.Elem), bitsOf(in.Elem.Type()))
		t.aggs[in] = v
	case *ir.InstExtractElement:
		i := t.get(in.Index)
		if v, ok := t.aggs[in.X]; ok {
			set(in, v[i])
		} else {
			w := bitsOf(in.Type())
			set(in, t.get(in.X)>>(uint64(w)*i))
		}
	case *ir.InstExtractValue:
		set(in, t.aggs[in.X][in.Indices[0]])
	case *ir.InstAlloca:
		n := bitsOf(in.ElemType) / 8
		if in.NElems != nil {
			n *= int(t.get(in.NElems))
		}
		off := (len(t.local) + 15) &^ 15
		t.local = append(t.local, make([]byte, off+n-len(t.local))...)
		set(in, simLocal+uint64(off))
	case *ir.InstCall:
		t.call(in)
	default:
		m.fail("unsupported instruction %T: %s", inst, inst.LLString())
	}
}

// vector returns the elements of a vector value (undef is all zeros).
func (t *simThread) vector(v value.Value) []uint64 {
	if u, ok := v.(*constant.Undef); ok {
		return make([]uint64, u.Typ.(*types.VectorType).Len)
	}
	x, ok := t.aggs[v]
	if !ok {
		t.cta.m.fail("vector %s not defined", v.Ident())
	}
	return x
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func (t *simThread) mem(ptr value.Value, addr uint64, n int) []byte {
	pt := ptr.Type().(*types.PointerType)
	if addr%uint64(n) != 0 && n > 1 && n&(n-1) == 0 {
		t.cta.m.fail("misaligned %d-byte access at 0x%x", n, addr)
	}
	switch pt.AddrSpace {
	case 1:
		t.cta.m.checkGlobal(addr, n)
		return t.cta.m.global[addr : addr+uint64(n)]
	case 0:
		if addr >= simLocal && addr+uint64(n) <= simLocal+uint64(len(t.local)) {
			return t.local[addr-simLocal : addr-simLocal+uint64(n)]
		}
		t.cta.m.fail("generic access of %d bytes at 0x%x outside the thread's allocas", n, addr)
	case 3:
		if addr+uint64(n) > uint64(len(t.cta.shared)) {
			t.cta.m.fail("shared access at %d+%d beyond SharedBytes=%d", addr, n, len(t.cta.shared))
		}
		t.cta.sched.checkLanded("shared access", addr, n)
		return t.cta.shared[addr : addr+uint64(n)]
	}
	t.cta.m.fail("access through address space %d", pt.AddrSpace)
	return nil
}

func (t *simThread) load(ptr value.Value, n int) uint64 {
	b := t.mem(ptr, t.get(ptr), n)
	var buf [8]byte
	copy(buf[:], b)
	return binary.LittleEndian.Uint64(buf[:])
}

func (t *simThread) store(ptr value.Value, n int, x uint64) {
	b := t.mem(ptr, t.get(ptr), n)
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], x)
	copy(b, buf[:n])
	t.markShared(ptr, t.get(ptr), n)
}

func (t *simThread) call(in *ir.InstCall) {
	m := t.cta.m
	args := make([]uint64, len(in.Args))
	for i, a := range in.Args {
		args[i] = t.get(a)
	}
	set := func(x uint64) { t.vals[in] = mask(x, bitsOf(in.Type())) }
	if ia, ok := in.Callee.(*ir.InlineAsm); ok {
		s := ia.Asm
		switch {
		case t.tmaAsm(in, s, args): // first: its strings hold ".global", "cp.async", "fence"
		case strings.Contains(s, "ld.global"):
			n, w := vecOf(s, "ld.global.")
			switch {
			case n > 1:
				out := make([]uint64, n)
				if args[1] != 0 {
					b := t.mem(in.Args[0], args[0], n*w)
					for i := range out {
						var buf [8]byte
						copy(buf[:], b[i*w:(i+1)*w])
						out[i] = binary.LittleEndian.Uint64(buf[:])
					}
				} else {
					copy(out, args[2:])
				}
				t.aggs[in] = out
			case args[1] != 0:
				set(t.load(in.Args[0], w))
			default:
				set(args[2])
			}
		case strings.Contains(s, "prefetch.global.L2"):
			// A hint, but only for addresses inside a buffer: a prefetch
			// the kernel should have masked fails here. The predicate is
			// $1 when there is one.
			if len(args) < 2 || args[1] != 0 {
				t.mem(in.Args[0], args[0], 1)
			}
		case strings.Contains(s, "st.global"):
			n, w := vecOf(s, "st.global.")
			switch {
			case n > 1:
				if args[1] != 0 {
					b := t.mem(in.Args[0], args[0], n*w)
					for i := 0; i < n; i++ {
						var buf [8]byte
						binary.LittleEndian.PutUint64(buf[:], args[2+i])
						copy(b[i*w:(i+1)*w], buf[:w])
					}
				}
			case args[2] != 0:
				t.store(in.Args[0], w, args[1])
			}
		case redVecRE.MatchString(s): // red.relaxed.gpu.global.add.vN.f32 [p], {v0, …}; @p from $N+1
			n, _ := strconv.Atoi(redVecRE.FindStringSubmatch(s)[1])
			if len(args) < n+2 || args[n+1] != 0 { // unmasked adds have no predicate
				b := t.mem(in.Args[0], args[0], 4*n) // checks the vector's alignment
				m.mu.Lock()
				for i := 0; i < n; i++ {
					old := binary.LittleEndian.Uint32(b[4*i:])
					binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(math.Float32frombits(old)+f32(args[1+i])))
				}
				m.mu.Unlock()
			}
		case strings.Contains(s, "red.relaxed.gpu.global.add.f32"):
			// Threads of every CTA run concurrently: the read-modify-write
			// holds the machine's lock, as the hardware's atomics are whole.
			// The predicate is $2 when there is one (masked adds).
			if len(args) < 3 || args[2] != 0 {
				b := t.mem(in.Args[0], args[0], 4) // checked before locking: a failure locks too
				m.mu.Lock()
				old := binary.LittleEndian.Uint32(b)
				binary.LittleEndian.PutUint32(b, math.Float32bits(math.Float32frombits(old)+f32(args[1])))
				m.mu.Unlock()
			}
		case strings.HasPrefix(s, "cvt.rn.bf16.f32"):
			set(uint64(half.F32ToBF16(f32(args[0]))))
		case strings.HasPrefix(s, "cvt.rn.bf16x2.f32"): // d = {a: upper, b: lower}
			set(uint64(half.F32ToBF16(f32(args[0])))<<16 | uint64(half.F32ToBF16(f32(args[1]))))
		case strings.HasPrefix(s, "cvt.rn.f16x2.f32"):
			set(uint64(half.F32ToF16(f32(args[0])))<<16 | uint64(half.F32ToF16(f32(args[1]))))
		case strings.HasPrefix(s, "tanh.approx.f32"):
			set(uf32(float32(math.Tanh(float64(f32(args[0]))))))
		case s == "mov.pred $0, $1;": // a mask select's condition (core.maskSelect)
			set(args[0] & 1)
		case bitTestRE.MatchString(s): // a bit of a mask's word (core.bitTest)
			k, _ := strconv.ParseUint(bitTestRE.FindStringSubmatch(s)[1], 16, 32)
			if uint32(args[0])&uint32(k) != 0 {
				set(1)
			} else {
				set(0)
			}
		case barCountRE.MatchString(s): // the consumers' CTA barrier beside a producer warpgroup
			sm := barCountRE.FindStringSubmatch(s)
			id, _ := strconv.Atoi(sm[1])
			n, _ := strconv.Atoi(sm[2])
			if _, ok := t.cta.namedBar(id, n).exchange(t.tid%n, nil); !ok {
				panic(simAbort{})
			}
		case setMaxNRegRE.MatchString(s):
			// A warpgroup-wide instruction: every thread of the warpgroup
			// executes it, converged.
			if _, ok := t.cta.wgs[t.tid/128].exchange(t.tid%128, nil); !ok {
				panic(simAbort{})
			}
		case barRegRE.MatchString(s):
			n, _ := strconv.Atoi(barRegRE.FindStringSubmatch(s)[1])
			if _, ok := t.cta.namedBar(int(args[0]), n).exchange(t.tid%n, nil); !ok {
				panic(simAbort{})
			}
		case s == "bar.arrive $0, 256;":
			if !t.cta.namedBar(int(args[0]), 256).arrive() {
				panic(simAbort{})
			}
		case strings.Contains(s, "@p bar.arrive 1, 256;"): // pingpong's first turn
			if args[0] == 1 && !t.cta.namedBar(1, 256).arrive() {
				panic(simAbort{})
			}
		case t.bulkAsm(in, s, args):
		case t.wgmmaAsm(in, ia, args):
		default:
			m.fail("unknown inline asm %q", s)
		}
		return
	}
	callee, ok := in.Callee.(*ir.Func)
	if !ok {
		m.fail("indirect call")
	}
	name := callee.Name()
	f := func(i int) float64 { return float64(f32(args[i])) }
	switch {
	case name == "llvm.nvvm.read.ptx.sreg.tid.x":
		set(uint64(t.tid))
	case strings.HasPrefix(name, "llvm.nvvm.read.ptx.sreg.ctaid."):
		set(uint64(t.cta.ctaid[name[len(name)-1]-'x']))
	case strings.HasPrefix(name, "llvm.nvvm.read.ptx.sreg.nctaid."):
		set(uint64(m.grid[name[len(name)-1]-'x']))
	case name == "llvm.nvvm.read.ptx.sreg.nsmid":
		set(simSMs)
	case name == "llvm.nvvm.cp.async.cg.shared.global.16.s":
		c := simCopy{dst: args[0], src: args[1], dstV: in.Args[0], srcV: in.Args[1], n: int(args[2])}
		// The hardware may complete a copy any time between issue and
		// wait: do half of them right away (a missing barrier before the
		// issue shows), the rest at the wait (a missing wait shows).
		t.ncopies++
		if t.ncopies%2 == 0 {
			t.doCopy(c)
		} else {
			t.open = append(t.open, c)
		}
	case name == "llvm.nvvm.cp.async.commit.group":
		t.pending = append(t.pending, t.open)
		t.open = nil
	case name == "llvm.nvvm.cp.async.wait.group":
		for len(t.pending) > int(args[0]) {
			for _, c := range t.pending[0] {
				t.doCopy(c)
			}
			t.pending = t.pending[1:]
		}
	case name == "llvm.nvvm.barrier0":
		if _, ok := t.cta.bar.exchange(t.tid, nil); !ok {
			panic(simAbort{})
		}
	case strings.HasPrefix(name, "llvm.nvvm.shfl.sync.bfly."):
		lane := t.tid % 32
		all, ok := t.cta.warps[t.tid/32].exchange(lane, args[1])
		if !ok {
			panic(simAbort{})
		}
		set(all[lane^int(args[2])].(uint64))
	case name == "llvm.nvvm.vote.any.sync":
		lane := t.tid % 32
		all, ok := t.cta.warps[t.tid/32].exchange(lane, args[1])
		if !ok {
			panic(simAbort{})
		}
		var any uint64
		for _, v := range all {
			any |= v.(uint64) & 1
		}
		set(any)
	case strings.HasPrefix(name, "llvm.nvvm.mma.m16n8k16.row.col."):
		t.mma(in, name, args)
	case strings.HasPrefix(name, "llvm.nvvm.ldmatrix.sync.aligned.m8n8."):
		t.ldmatrix(in, name, args[0])
	case name == "llvm.nvvm.ex2.approx.ftz.f":
		set(uf32(ftz(float32(math.Exp2(f(0))))))
	case name == "llvm.nvvm.lg2.approx.f":
		set(uf32(float32(math.Log2(f(0)))))
	case name == "llvm.maximum.f32":
		set(uf32(float32(max(f(0), f(1)))))
	case name == "llvm.minimum.f32":
		set(uf32(float32(min(f(0), f(1)))))
	case name == "llvm.fabs.f32":
		set(uf32(float32(math.Abs(f(0)))))
	case name == "llvm.sqrt.f32":
		set(uf32(float32(math.Sqrt(f(0)))))
	case name == "llvm.fma.f32":
		set(uf32(float32(math.FMA(f(0), f(1), f(2)))))
	case strings.HasPrefix(name, "llvm.fptosi.sat."):
		v := f(0)
		bits := bitsOf(in.Type())
		lo, hi := -math.Ldexp(1, bits-1), math.Ldexp(1, bits-1)-1
		switch {
		case v != v:
			v = 0
		case v < lo:
			v = lo
		case v > hi:
			v = hi
		}
		set(uint64(int64(math.Trunc(v))))
	default:
		m.fail("unknown function %s", name)
	}
}

func ftz(f float32) float32 {
	if f != 0 && math.Abs(float64(f)) < math.SmallestNonzeroFloat32*(1<<23) {
		return 0
	}
	return f
}

// vecOf parses the vector count and element bytes after prefix, e.g.
// "v4.b16" -> 4, 2 and "b32" -> 1, 4.
func vecOf(s, prefix string) (int, int) {
	i := strings.Index(s, prefix)
	rest := s[i+len(prefix):]
	n := 1
	if strings.HasPrefix(rest, "v") {
		n = int(rest[1] - '0')
		rest = rest[3:]
	}
	return n, widthOf(rest, "")
}

func widthOf(s, prefix string) int {
	i := strings.Index(s, prefix)
	rest := s[i+len(prefix):]
	switch {
	case strings.HasPrefix(rest, "u8"):
		return 1
	case strings.HasPrefix(rest, "b16"):
		return 2
	case strings.HasPrefix(rest, "b32"):
		return 4
	case strings.HasPrefix(rest, "b64"):
		return 8
	}
	panic("width of " + s)
}

// ldmatrix implements ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.b16
// from the PTX ISA: threads 8j..8j+7 give the addresses of rows 0..7 of
// matrix j (8 contiguous b16 each); thread l receives, per matrix, the
// pair at row l/4, cols 2(l%4), 2(l%4)+1 (low half first), or with .trans
// the pair at rows 2(l%4), 2(l%4)+1 of col l/4.
func (t *simThread) ldmatrix(in *ir.InstCall, name string, addr uint64) {
	lane := t.tid % 32
	all, ok := t.cta.warps[t.tid/32].exchange(lane, addr)
	if !ok {
		panic(simAbort{})
	}
	n := 1
	switch {
	case strings.Contains(name, ".x2"):
		n = 2
	case strings.Contains(name, ".x4"):
		n = 4
	}
	trans := strings.Contains(name, ".trans")
	read := func(a uint64) uint64 {
		if a+2 > uint64(len(t.cta.shared)) {
			t.cta.m.fail("ldmatrix read at %d beyond SharedBytes=%d", a, len(t.cta.shared))
		}
		t.cta.sched.checkLanded("ldmatrix read", a, 2)
		return uint64(binary.LittleEndian.Uint16(t.cta.shared[a:]))
	}
	g, tt := lane/4, lane%4
	out := make([]uint64, n)
	for j := 0; j < n; j++ {
		var lo, hi uint64
		if trans {
			lo = read(all[8*j+2*tt].(uint64) + uint64(2*g))
			hi = read(all[8*j+2*tt+1].(uint64) + uint64(2*g))
		} else {
			lo = read(all[8*j+g].(uint64) + uint64(4*tt))
			hi = read(all[8*j+g].(uint64) + uint64(4*tt+2))
		}
		out[j] = lo | hi<<16
	}
	for i := 0; i < 8*n; i++ {
		if a := all[i].(uint64); a%16 != 0 {
			t.cta.m.fail("ldmatrix row address 0x%x not 16-byte aligned", a)
		}
	}
	t.aggs[in] = out
}

// mma implements mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16} from
// the PTX ISA fragment layouts: with g = lane>>2 and t = lane%4,
// A element i of the 8 a thread holds (two per .b32, low half first) is at
// row g + 8*((i>>1)&1), col 2t + (i&1) + 8*(i>>2); B element i of 4 at row
// 2t + (i&1) + 8*(i>>1), col g; C/D element i of 4 at row g + 8*(i>>1),
// col 2t + (i&1).
func (t *simThread) mma(in *ir.InstCall, name string, args []uint64) {
	lane := t.tid % 32
	all, ok := t.cta.warps[t.tid/32].exchange(lane, args)
	if !ok {
		panic(simAbort{})
	}
	bf := strings.HasSuffix(name, ".bf16")
	elem := func(word uint64, hi int) float64 {
		h := uint16(word >> (16 * hi))
		if bf {
			return float64(half.BF16ToF32(h))
		}
		return float64(half.F16ToF32(h))
	}
	var A [16][16]float64
	var B [16][8]float64
	for l, x := range all {
		a := x.([]uint64)
		g, tt := l>>2, l%4
		for i := 0; i < 8; i++ {
			A[g+8*((i>>1)&1)][2*tt+(i&1)+8*(i>>2)] = elem(a[i/2], i&1)
		}
		for i := 0; i < 4; i++ {
			B[2*tt+(i&1)+8*(i>>1)][g] = elem(a[4+i/2], i&1)
		}
	}
	g, tt := lane>>2, lane%4
	out := make([]uint64, 4)
	for i := 0; i < 4; i++ {
		r, c := g+8*(i>>1), 2*tt+(i&1)
		s := float64(f32(args[6+i]))
		for k := 0; k < 16; k++ {
			s += A[r][k] * B[k][c]
		}
		out[i] = uf32(float32(s))
	}
	t.aggs[in] = out
}

// simStack is the panicking goroutine's stack with FAC_SIM_STACK=1 (a
// simulator bug, rather than the kernel's, shows where it is).
func simStack() string {
	if os.Getenv("FAC_SIM_STACK") != "1" {
		return ""
	}
	return "\n" + string(debug.Stack())
}
