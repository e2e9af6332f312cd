package codegen

// The simulator's TMA: tensor maps, mbarriers and cp.async.bulk.tensor,
// written from the PTX ISA (§9.7.9.25 cp.async.bulk.tensor, §9.7.13.15
// mbarrier), independently of codegen/sm90:
//
//   - a tensor-map parameter (Kind ParamTensorMap, declared
//     `[128 x i8]* byval([128 x i8]) align 64`) gets a fake global address
//     that stands for the Go simTMap built from its artifact.TMA and the
//     other arguments, as the runtime would encode it; its base and strides
//     must be multiples of 16 bytes, as cuTensorMapEncodeTiled requires;
//   - an mbarrier is a count of pending arrivals, a transaction count
//     (bytes) and a phase number, kept per CTA by shared address (8 bytes,
//     8-aligned, mbarrier.init before use). A phase completes when its
//     arrivals are all in and its transaction count is 0; then the arrivals
//     reset and the phase number increments. try_wait.parity P returns once
//     the phase of parity P has completed: the current phase's parity
//     differs from P;
//   - cp.async.bulk.tensor.Nd copies a box of the tensor into shared memory
//     row-major (dim 0 fastest; out-of-bounds elements read as zeros),
//     swizzled in 16-byte chunks (a ^ ((a>>7)&(S/16-1))<<4 for a swizzle
//     span S), and completes its bytes on an mbarrier. The copy lands late:
//     when a thread waiting on that mbarrier finds its arrivals all in.
//     Until then its bytes are in flight, and a generic access, ldmatrix or
//     wgmma touching them fails (a missing wait, or an overwrite of a tile
//     still being read). Landed bytes are async-proxy writes: they clear the
//     generic-proxy marks of wgmma's check;
//   - cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group stores a box
//     from shared memory (laid out as a load's, swizzled) through a tensor
//     map, writing no element outside the map's extents, in the issuing
//     thread's bulk group: its source must be fenced for the async proxy
//     (fence.proxy.async) and hold no copy in flight when it is issued;
//     the simulator reads it and writes global memory at the thread's
//     cp.async.bulk.wait_group(.read) 0 (sim_bulk_test.go), failing when
//     the source changed since the issue (an overwrite before the wait);
//   - a thread blocked at a bar.sync, a warp/warpgroup rendezvous or an
//     mbarrier wait counts as blocked; when every live thread of the CTA
//     is, the wait fails (naming an mbarrier wait when there is one)
//     rather than hang. So does a CTA that exits with copies in flight.

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// The inline asm sm_90a emits for TMA (operands as the comments say; all
// void, constraints "r,...,~{memory}").
const (
	// $0: the mbarrier's i32 shared address.
	asmMbarInit = "mbarrier.init.shared::cta.b64 [$0], 1;"
	// no operands: orders the inits before the async proxy uses them.
	asmMbarInitFence = "fence.mbarrier_init.release.cluster;"
	// $0: the mbarrier, $1: the bytes the phase's copies will complete.
	asmMbarArriveTx = "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;"
	// $0: the mbarrier, $1: the parity (0/1) of the phase to wait for.
	asmMbarWait = "{\n.reg .pred P1;\nLAB_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P1, [$0], $1;\n@!P1 bra LAB_WAIT;\n}"
)

// asmTMALoad is the n-d tensor copy: $0 the shared destination, $1 the
// tensor map's generic address (i64), $2..$n+1 the coordinates (innermost
// first), $n+2 the mbarrier.
func asmTMALoad(n int) string {
	cs := make([]string, n)
	for i := range cs {
		cs[i] = fmt.Sprintf("$%d", i+2)
	}
	return fmt.Sprintf("cp.async.bulk.tensor.%dd.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {%s}], [$%d];",
		n, strings.Join(cs, ", "), n+2)
}

var (
	mbarInitRE   = regexp.MustCompile(`mbarrier\.init(?:\.shared(?:::cta)?)?\.b64 \[(\$\d+)\], (\$\d+|\d+);`)
	mbarArriveRE = regexp.MustCompile(`mbarrier\.arrive(\.expect_tx)?(?:\.release\.cta)?(?:\.shared(?:::cta)?)?\.b64 _, \[(\$\d+)\](?:, (\$\d+|\d+))?;`)
	mbarWaitRE   = regexp.MustCompile(`mbarrier\.try_wait\.parity(?:\.acquire\.cta)?(?:\.shared(?:::cta)?)?\.b64 (\w+), \[(\$\d+)\], (\$\d+|\d+);`)
	tmaStoreRE   = regexp.MustCompile(`cp\.async\.bulk\.tensor\.(\d)d\.global\.shared::cta(?:\.tile)?\.bulk_group \[(\$\d+), \{([^}]*)\}\], \[(\$\d+)\];`)
	tmaLoadRE    = regexp.MustCompile(`cp\.async\.bulk\.tensor\.(\d)d\.shared::cluster\.global(?:\.tile)?\.mbarrier::complete_tx::bytes \[(\$\d+)\], \[(\$\d+), \{([^}]*)\}\], \[(\$\d+)\];`)
)

// simTMap is a tensor map as the simulator encodes it.
type simTMap struct {
	name    string
	base    uint64
	elem    int      // bytes
	dims    []int64  // extents, innermost first
	strides []uint64 // bytes (strides[0] = elem)
	box     []int
	swizzle int // bytes: 0 (none), 32, 64, 128
}

func (tm *simTMap) boxBytes() int {
	n := tm.elem
	for _, b := range tm.box {
		n *= b
	}
	return n
}

// copyMap is the tensor map a bulk tensor copy (what) names at tmAddr
// with coords, and the alignment its shared side needs (128 bytes, or
// the swizzle pattern's 8 rows).
func (m *simMachine) copyMap(what string, tmAddr uint64, coords []int64) (*simTMap, uint64) {
	tm := m.tmaps[tmAddr]
	if tm == nil {
		m.fail("%s: %#x is not a tensor-map parameter's address", what, tmAddr)
	}
	if len(coords) != len(tm.dims) {
		m.fail("%s with %d coordinates through the %d-d tensor map %s", what, len(coords), len(tm.dims), tm.name)
	}
	if tm.swizzle > 0 {
		return tm, uint64(8 * tm.swizzle)
	}
	return tm, 128
}

// boxElem is the global address of element e of the box at coords (dim 0
// fastest), its index within the box left in idx, and whether it lies
// outside the tensor's extents (not read by a load, not written by a
// store).
func (tm *simTMap) boxElem(coords []int64, e int, idx []int) (addr uint64, oob bool) {
	addr = tm.base
	for i := range tm.box {
		idx[i] = e % tm.box[i]
		e /= tm.box[i]
		x := coords[i] + int64(idx[i])
		if x < 0 || x >= tm.dims[i] {
			oob = true
		}
		addr += uint64(x) * tm.strides[i]
	}
	return addr, oob
}

// checkFenced fails when a bulk copy (what) reads shared bytes [src, src +
// n) that a thread wrote through the generic proxy without
// fence.proxy.async since.
func (c *simCTA) checkFenced(what string, src uint64, n int) {
	p := c.proxy
	if p == nil {
		return
	}
	p.mu.Lock()
	for a := src; a < src+uint64(n); a++ {
		if who := p.marks[a]; who != 0 {
			p.mu.Unlock()
			c.m.fail("%s reads shared byte %d written by thread %d through the generic proxy without fence.proxy.async", what, a, who-1)
		}
	}
	p.mu.Unlock()
}

// simArgInt is an i32 argument's value.
func simArgInt(a any) (int64, bool) {
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

// tensorMap builds tensor-map parameter p from the other arguments (by
// parameter name; bufs: the buffers' sim addresses) and returns its fake
// address.
func (m *simMachine) tensorMap(p Param, all []Param, named map[string]any, bufs map[string]uint64, misalign bool) (uint64, error) {
	d := p.TMA
	if d == nil {
		return 0, fmt.Errorf("no TMA description")
	}
	var tp *Param
	for i := range all {
		if all[i].Name == d.Tensor {
			tp = &all[i]
		}
	}
	base, ok := bufs[d.Tensor]
	if tp == nil || !ok || tp.Kind != ParamU64 {
		return 0, fmt.Errorf("maps %q, which is not a pointer parameter", d.Tensor)
	}
	n := len(d.Dims)
	if n < 1 || n > 5 || len(d.Box) != n {
		return 0, fmt.Errorf("%d dims with %d box sizes (want 1..5 of each)", n, len(d.Box))
	}
	tm := &simTMap{name: p.Name, base: base, elem: tp.Type.Elem.Bytes(), box: append([]int(nil), d.Box...), swizzle: d.Swizzle}
	if tm.elem < 1 {
		return 0, fmt.Errorf("tensor %q has element type %v", d.Tensor, tp.Type.Elem)
	}
	for i, b := range d.Box {
		if b < 1 || b > 256 {
			return 0, fmt.Errorf("box size %d of dim %d (want 1..256)", b, i)
		}
	}
	switch d.Swizzle {
	case 0:
	case 32, 64, 128:
		if d.Box[0]*tm.elem != d.Swizzle {
			return 0, fmt.Errorf("inner box of %d bytes with a %d-byte swizzle (want equal)", d.Box[0]*tm.elem, d.Swizzle)
		}
	default:
		return 0, fmt.Errorf("swizzle %d", d.Swizzle)
	}
	argInt := func(name string) (int64, error) {
		v, ok := simArgInt(named[name])
		if !ok {
			return 0, fmt.Errorf("no i32 argument %q (have %T)", name, named[name])
		}
		return v, nil
	}
	for i, dim := range d.Dims {
		if i == 0 {
			if dim.Extent < 1 || dim.Stride != "" {
				return 0, fmt.Errorf("dim 0 must be contiguous with a constant extent, got %+v", dim)
			}
			tm.dims = append(tm.dims, int64(dim.Extent))
			tm.strides = append(tm.strides, uint64(tm.elem))
			continue
		}
		s, err := argInt(dim.Stride)
		if err != nil {
			return 0, fmt.Errorf("dim %d stride: %v", i, err)
		}
		ext := int64(1) << 30
		if dim.Bound != "" {
			if ext, err = argInt(dim.Bound); err != nil {
				return 0, fmt.Errorf("dim %d bound: %v", i, err)
			}
		}
		if s <= 0 || ext < 0 {
			return 0, fmt.Errorf("dim %d: stride %d, extent %d", i, s, ext)
		}
		tm.dims = append(tm.dims, ext)
		tm.strides = append(tm.strides, uint64(s)*uint64(tm.elem))
	}
	// What cuTensorMapEncodeTiled checks (a misaligned run fails here, as
	// the runtime's encode would).
	if base%16 != 0 {
		return 0, fmt.Errorf("base address %#x of %q is not 16-byte aligned (misaligned=%v): cuTensorMapEncodeTiled fails", base, d.Tensor, misalign)
	}
	for i, s := range tm.strides[1:] {
		if s%16 != 0 {
			return 0, fmt.Errorf("stride of dim %d is %d bytes, not a multiple of 16: cuTensorMapEncodeTiled fails", i+1, s)
		}
	}
	addr := m.alloc(128)
	if m.tmaps == nil {
		m.tmaps = map[uint64]*simTMap{}
	}
	m.tmaps[addr] = tm
	return addr, nil
}

// simSched counts a CTA's live and blocked threads and holds its
// mbarriers.
type simSched struct {
	m       *simMachine
	live    atomic.Int64
	blocked atomic.Int64 // threads waiting at a rendezvous or an mbarrier, not yet released

	mu        sync.Mutex // guards the rest
	cond      *sync.Cond // mbarrier waiters
	dead      bool
	bars      map[uint64]*simMbar
	waits     map[int]simMbarWait // blocked mbarrier waits by thread
	mbBlocked int64               // mbarrier waiters counted in blocked
	// inflight: per shared byte, 1 + the address of the mbarrier of a
	// copy to it that has not landed (atomic; nil unless the kernel uses
	// TMA).
	inflight []int32
}

type simMbarWait struct {
	addr   uint64
	parity int
}

type simMbar struct {
	count   int // arrivals per phase
	pending int // arrivals the current phase still expects
	tx      int // transaction bytes expected and not landed
	phase   int // phases completed
	copies  []*simBulkCopy
}

type simBulkCopy struct {
	tm     *simTMap
	dst    uint64
	coords []int64
}

func newSimSched(m *simMachine, threads, sharedBytes int, tma bool) *simSched {
	s := &simSched{m: m, bars: map[uint64]*simMbar{}, waits: map[int]simMbarWait{}}
	s.cond = sync.NewCond(&s.mu)
	s.live.Store(int64(threads))
	if tma {
		s.inflight = make([]int32, sharedBytes)
	}
	return s
}

// block counts a thread blocking at a rendezvous (its lock held); it
// fails when every live thread is then blocked.
func (s *simSched) block() {
	if s.blocked.Add(1) == s.live.Load() {
		s.mu.Lock()
		msg := s.deadlock()
		s.mu.Unlock()
		s.m.fail("%s", msg)
	}
}

// unblock counts n threads a rendezvous releases (by the releasing
// thread, so that they never count as blocked once released).
func (s *simSched) unblock(n int) {
	if n > 0 {
		s.blocked.Add(-int64(n))
	}
}

// exit counts a thread that returned.
func (s *simSched) exit() {
	if l := s.live.Add(-1); l > 0 && s.blocked.Load() == l {
		s.mu.Lock()
		msg := s.deadlock()
		s.mu.Unlock()
		s.m.fail("%s", msg)
	}
}

// deadlock describes the CTA where every live thread is blocked (s.mu
// held).
func (s *simSched) deadlock() string {
	live := s.live.Load()
	if len(s.waits) == 0 {
		return fmt.Sprintf("deadlock: all %d live threads wait at barriers that never complete", live)
	}
	tids := make([]int, 0, len(s.waits))
	for t := range s.waits {
		tids = append(tids, t)
	}
	sort.Ints(tids)
	w := s.waits[tids[0]]
	b := s.bars[w.addr]
	return fmt.Sprintf("mbarrier at %#x: wait for parity %d never completes (thread %d; phase %d with %d of %d arrivals and %d transaction bytes outstanding; %d live threads: %d wait on mbarriers, %d at other barriers)",
		w.addr, w.parity, tids[0], b.phase, b.pending, b.count, b.tx, live, len(s.waits), live-int64(len(s.waits)))
}

// kill wakes every mbarrier waiter to abort.
func (s *simSched) kill() {
	s.mu.Lock()
	s.dead = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

// wake releases the mbarrier waiters to look again (s.mu held).
func (s *simSched) wake() {
	if s.mbBlocked > 0 {
		s.blocked.Add(-s.mbBlocked)
		s.mbBlocked = 0
		s.cond.Broadcast()
	}
}

// finish checks a CTA that ran to the end.
func (s *simSched) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	addrs := make([]uint64, 0, len(s.bars))
	for a := range s.bars {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i] < addrs[j] })
	for _, a := range addrs {
		if b := s.bars[a]; len(b.copies) > 0 {
			s.m.mu.Lock()
			s.m.errs = append(s.m.errs, fmt.Sprintf("the CTA exits with %d cp.async.bulk.tensor copies on the mbarrier at %#x in flight (no wait saw them land)", len(b.copies), a))
			s.m.mu.Unlock()
			return
		}
	}
}

// checkLanded fails when a generic access (what) touches bytes of a
// copy that has not landed.
func (s *simSched) checkLanded(what string, addr uint64, n int) {
	if s == nil || s.inflight == nil {
		return
	}
	for i := uint64(0); i < uint64(n); i++ {
		if b := atomic.LoadInt32(&s.inflight[addr+i]); b != 0 {
			s.m.fail("%s at %d+%d touches byte %d of a cp.async.bulk.tensor on the mbarrier at %#x that no wait has seen land (a missing mbarrier wait, or a tile overwritten while read)",
				what, addr, n, addr+i, b-1)
		}
	}
}

// bar is the mbarrier at addr (s.mu held; every holder unlocks it in a
// deferred call, so that a failure, which panics, releases it).
func (s *simSched) bar(addr uint64, what string) *simMbar {
	b := s.bars[addr]
	if b == nil {
		s.m.fail("%s: mbarrier at %#x used before mbarrier.init", what, addr)
	}
	return b
}

// tmaAsm runs TMA and mbarrier inline asm; false for other asm.
func (t *simThread) tmaAsm(in *ir.InstCall, s string, args []uint64) bool {
	m := t.cta.m
	switch {
	case strings.Contains(s, "cp.async.bulk.tensor"),
		strings.Contains(s, "mbarrier.try_wait.parity"),
		strings.Contains(s, "mbarrier.arrive"),
		strings.Contains(s, "mbarrier.init"),
		strings.Contains(s, "fence.mbarrier_init"):
	case strings.HasPrefix(s, "prefetch.tensormap"):
		return true // a cache hint
	case s == asmCounterInit || s == asmRelease:
		// sm90's release counters (tma.go): a shared u32 zeroed, then
		// incremented modulo a limit by an acquire-release atomic.
		t.counterAsm(in, s, args)
		return true
	default:
		return false
	}
	if !types.Equal(in.Type(), types.Void) {
		m.fail("TMA/mbarrier asm with a result: %q", s)
	}
	op := func(ref string) uint64 {
		if !strings.HasPrefix(ref, "$") {
			v, err := strconv.ParseUint(ref, 10, 64)
			if err != nil {
				m.fail("bad immediate %q in %q", ref, s)
			}
			return v
		}
		k, err := strconv.Atoi(ref[1:])
		if err != nil || k >= len(args) {
			m.fail("operand %s of %q is not an input", ref, s)
		}
		return args[k]
	}
	// coords are the values of a tensor copy's coordinate operands (list,
	// comma-separated), dims of them ("2d" and so on).
	coords := func(dims, list string) []int64 {
		n := int(dims[0] - '0')
		refs := strings.Split(list, ",")
		if len(refs) != n {
			m.fail("cp.async.bulk.tensor.%dd with %d coordinates", n, len(refs))
		}
		c := make([]int64, n)
		for i, r := range refs {
			c[i] = int64(int32(uint32(op(strings.TrimSpace(r)))))
		}
		return c
	}
	switch {
	case strings.Contains(s, "cp.async.bulk.tensor") && strings.Contains(s, ".bulk_group"):
		sm := tmaStoreRE.FindStringSubmatch(s)
		if sm == nil {
			m.fail("unparsed cp.async.bulk.tensor store asm %q", s)
		}
		t.tmaStore(op(sm[2]), coords(sm[1], sm[3]), uint64(uint32(op(sm[4]))))
	case strings.Contains(s, "cp.async.bulk.tensor"):
		sm := tmaLoadRE.FindStringSubmatch(s)
		if sm == nil {
			m.fail("unparsed cp.async.bulk.tensor asm %q", s)
		}
		t.tmaLoad(uint64(uint32(op(sm[2]))), op(sm[3]), coords(sm[1], sm[4]), uint64(uint32(op(sm[5]))))
	case strings.Contains(s, "mbarrier.try_wait.parity"):
		sm := mbarWaitRE.FindStringSubmatch(s)
		if sm == nil || !strings.Contains(s, "@!"+sm[1]+" bra ") {
			m.fail("unparsed mbarrier wait asm %q (want a try_wait.parity loop)", s)
		}
		lab := regexp.MustCompile(`@!` + sm[1] + ` bra (\w+);`).FindStringSubmatch(s)
		if lab == nil || !strings.Contains(s[:strings.Index(s, "mbarrier.try_wait")], lab[1]+":") {
			m.fail("mbarrier wait asm %q does not loop back over its try_wait", s)
		}
		par := op(sm[3])
		if par > 1 {
			m.fail("mbarrier wait for parity %d", par)
		}
		t.mbarWait(uint64(uint32(op(sm[2]))), int(par))
	case strings.Contains(s, "mbarrier.arrive"):
		sm := mbarArriveRE.FindStringSubmatch(s)
		if sm == nil || (sm[1] != "") != (sm[3] != "") {
			m.fail("unparsed mbarrier.arrive asm %q", s)
		}
		tx := 0
		if sm[3] != "" {
			tx = int(int32(uint32(op(sm[3]))))
		}
		t.mbarArrive(uint64(uint32(op(sm[2]))), tx)
	case strings.Contains(s, "mbarrier.init"):
		sm := mbarInitRE.FindStringSubmatch(s)
		if sm == nil {
			m.fail("unparsed mbarrier.init asm %q", s)
		}
		t.mbarInit(uint64(uint32(op(sm[1]))), int(op(sm[2])))
	case strings.Contains(s, "fence.mbarrier_init"):
		// The sim's inits are visible at once (a bar.sync follows).
	default:
		m.fail("unknown mbarrier asm %q", s)
	}
	return true
}

func (t *simThread) mbarCheckAddr(addr uint64, what string) {
	if addr%8 != 0 || addr+8 > uint64(len(t.cta.shared)) {
		t.cta.m.fail("%s: mbarrier address %#x not 8-byte aligned inside SharedBytes=%d", what, addr, len(t.cta.shared))
	}
}

func (t *simThread) mbarInit(addr uint64, count int) {
	t.mbarCheckAddr(addr, "mbarrier.init")
	if count < 1 {
		t.cta.m.fail("mbarrier.init at %#x with count %d", addr, count)
	}
	s := t.cta.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.bars[addr]; b != nil && len(b.copies) > 0 {
		t.cta.m.fail("mbarrier.init at %#x with %d copies in flight on it", addr, len(b.copies))
	}
	s.bars[addr] = &simMbar{count: count, pending: count}
}

// mbarArrive is one arrival on the mbarrier at addr, expecting tx more
// transaction bytes.
func (t *simThread) mbarArrive(addr uint64, tx int) {
	s := t.cta.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bar(addr, "mbarrier.arrive")
	if b.pending == 0 {
		t.cta.m.fail("mbarrier at %#x: more than its %d arrivals in phase %d", addr, b.count, b.phase)
	}
	b.pending--
	b.tx += tx
	if b.pending == 0 && b.tx == 0 && len(b.copies) == 0 {
		b.phase++
		b.pending = b.count
	}
	s.wake()
}

// tmaLoad issues a cp.async.bulk.tensor of the box at coords of the tensor
// map at tmAddr to shared dst, completing on the mbarrier at bar. Its bytes
// are in flight until a wait on bar lands it.
func (t *simThread) tmaLoad(dst, tmAddr uint64, coords []int64, bar uint64) {
	m := t.cta.m
	tm, align := m.copyMap("cp.async.bulk.tensor", tmAddr, coords)
	n := uint64(tm.boxBytes())
	if dst%align != 0 || dst+n > uint64(len(t.cta.shared)) {
		m.fail("cp.async.bulk.tensor destination %#x (+%d bytes) not %d-aligned inside SharedBytes=%d", dst, n, align, len(t.cta.shared))
	}
	t.mbarCheckAddr(bar, "cp.async.bulk.tensor")
	s := t.cta.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bar(bar, "cp.async.bulk.tensor")
	for a := range s.bars {
		if a+8 > dst && a < dst+n {
			m.fail("cp.async.bulk.tensor destination [%#x, %#x) overlaps the mbarrier at %#x", dst, dst+n, a)
		}
	}
	for i := dst; i < dst+n; i++ {
		if o := atomic.LoadInt32(&s.inflight[i]); o != 0 {
			m.fail("cp.async.bulk.tensor destination byte %d is already the destination of a copy in flight on the mbarrier at %#x", i, o-1)
		}
	}
	for i := dst; i < dst+n; i++ {
		atomic.StoreInt32(&s.inflight[i], int32(bar)+1)
	}
	b.copies = append(b.copies, &simBulkCopy{tm: tm, dst: dst, coords: coords})
	s.wake()
}

// tmaStore issues a cp.async.bulk.tensor store of the box at coords of
// the tensor map at tmAddr from shared src into the thread's bulk group
// (performed at its wait: bulkWait).
func (t *simThread) tmaStore(tmAddr uint64, coords []int64, src uint64) {
	m := t.cta.m
	tm, align := m.copyMap("cp.async.bulk.tensor store", tmAddr, coords)
	n := tm.boxBytes()
	if src%align != 0 || src+uint64(n) > uint64(len(t.cta.shared)) {
		m.fail("cp.async.bulk.tensor store source %#x (+%d bytes) not %d-aligned inside SharedBytes=%d", src, n, align, len(t.cta.shared))
	}
	t.cta.sched.checkLanded("cp.async.bulk.tensor store", src, n)
	t.cta.checkFenced("cp.async.bulk.tensor store", src, n)
	seen := append([]byte(nil), t.cta.shared[src:src+uint64(n)]...)
	t.bulk = append(t.bulk, simBulk{src: src, n: n, store: &simTensorStore{tm: tm, coords: coords, seen: seen}})
}

// simTensorStore is a tensor store in flight: its map and coordinates, and
// its source as it was at the issue.
type simTensorStore struct {
	tm     *simTMap
	coords []int64
	seen   []byte
}

// storeBox performs tensor store st of the box at shared src (n bytes):
// each element inside the map's extents goes to global memory.
func (t *simThread) storeBox(st *simTensorStore, src uint64, n int) {
	m := t.cta.m
	tm := st.tm
	box := t.cta.shared[src : src+uint64(n)]
	for i := range box {
		if box[i] != st.seen[i] {
			m.fail("shared byte %d of a cp.async.bulk.tensor store's source through %s changed before the store's cp.async.bulk.wait_group.read (an overwrite of a tile still being read)", src+uint64(i), tm.name)
		}
	}
	idx := make([]int, len(tm.box))
	type elem struct{ dst, a uint64 }
	var out []elem
	for e := 0; e < n/tm.elem; e++ {
		dst, oob := tm.boxElem(st.coords, e, idx)
		if oob {
			continue
		}
		a := uint64(e * tm.elem)
		if tm.swizzle > 0 {
			a ^= (a >> 7 & uint64(tm.swizzle/16-1)) << 4
		}
		m.checkGlobal(dst, tm.elem)
		out = append(out, elem{dst, a})
	}
	m.mu.Lock()
	for _, o := range out {
		copy(m.global[o.dst:o.dst+uint64(tm.elem)], box[o.a:o.a+uint64(tm.elem)])
	}
	m.mu.Unlock()
}

// mbarWait blocks until the phase of the given parity of the mbarrier at
// addr has completed. A waiter that finds the current phase's arrivals all
// in lands its copies.
func (t *simThread) mbarWait(addr uint64, parity int) {
	s := t.cta.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.dead {
			panic(simAbort{})
		}
		b := s.bar(addr, "mbarrier.try_wait")
		if b.phase&1 != parity {
			delete(s.waits, t.tid)
			return
		}
		if b.pending == 0 {
			for _, c := range b.copies {
				t.cta.land(c)
				b.tx -= c.tm.boxBytes()
			}
			b.copies = nil
			if b.tx < 0 {
				t.cta.m.fail("mbarrier at %#x: its copies complete %d bytes more than the phase's expect_tx", addr, -b.tx)
			}
			if b.tx == 0 {
				b.phase++
				b.pending = b.count
				s.wake()
				continue
			}
		}
		s.waits[t.tid] = simMbarWait{addr, parity}
		s.mbBlocked++
		if s.blocked.Add(1) == s.live.Load() {
			msg := s.deadlock()
			t.cta.m.fail("%s", msg)
		}
		s.cond.Wait()
	}
}

// land performs copy c (the caller holds sched.mu): it writes the box into
// shared memory through the async proxy and clears the bytes' in-flight
// and generic-proxy marks.
func (c *simCTA) land(cp *simBulkCopy) {
	tm := cp.tm
	m := c.m
	total := tm.boxBytes() / tm.elem
	idx := make([]int, len(tm.box))
	var zero [8]byte
	for e := 0; e < total; e++ {
		src, oob := tm.boxElem(cp.coords, e, idx)
		a := cp.dst + uint64(e*tm.elem)
		if tm.swizzle > 0 {
			a ^= (a >> 7 & uint64(tm.swizzle/16-1)) << 4
		}
		v := zero[:tm.elem]
		if !oob {
			ok := false
			for _, al := range m.allocs {
				if src >= al.base && src+uint64(tm.elem) <= al.base+al.size {
					ok = true
				}
			}
			if !ok {
				m.fail("cp.async.bulk.tensor through %s at coordinates %v reads element %v at %#x, outside every buffer", tm.name, cp.coords, idx, src)
			}
			v = m.global[src : src+uint64(tm.elem)]
		}
		copy(c.shared[a:a+uint64(tm.elem)], v)
	}
	nb := uint64(tm.boxBytes())
	for i := cp.dst; i < cp.dst+nb; i++ {
		atomic.StoreInt32(&c.sched.inflight[i], 0)
	}
	if p := c.proxy; p != nil {
		p.mu.Lock()
		for i := cp.dst; i < cp.dst+nb; i++ {
			p.marks[i] = 0
		}
		p.mu.Unlock()
	}
}

// ---- tests ----

// llQuote is s as an LLVM IR string literal.
func llQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '"' || ch == '\\' || ch < 0x20 || ch >= 0x7f:
			fmt.Fprintf(&b, "\\%02X", ch)
		default:
			b.WriteByte(ch)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tmaTestKernel is a 64-thread kernel: thread 0 initialises the mbarrier
// at shared 1024, and (with arrive) expects the box's 1024 bytes on it,
// (with copy) loads the [64 x 8] bf16 box at (0, row0) of the tensor map
// %tm into shared 0; then (with wait) every thread waits for phase 0 and
// copies its 16 bytes of the shared box (as laid out, swizzled) to out.
func tmaTestKernel(arrive, copyBox, wait bool) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p(`target triple = "nvptx64-nvidia-cuda"`)
	p(`@smem = external addrspace(3) global [0 x i8], align 1024`)
	p(`define ptx_kernel void @tma_test(i16 addrspace(1)* %%src, i16 addrspace(1)* %%out, i32 %%rows, i32 %%stride, i32 %%row0, [128 x i8]* byval([128 x i8]) align 64 %%tm) {`)
	p(`entry:`)
	p(`	%%tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()`)
	p(`	%%sp0 = bitcast [0 x i8] addrspace(3)* @smem to i8 addrspace(3)*`)
	p(`	%%s0 = ptrtoint i8 addrspace(3)* %%sp0 to i32`)
	p(`	%%bar = add i32 %%s0, 1024`)
	p(`	%%tmi = ptrtoint [128 x i8]* %%tm to i64`)
	p(`	%%is0 = icmp eq i32 %%tid, 0`)
	p(`	br i1 %%is0, label %%init, label %%sync`)
	p(`init:`)
	p(`	call void asm sideeffect %s, "r,~{memory}"(i32 %%bar)`, llQuote(asmMbarInit))
	p(`	call void asm sideeffect %s, "~{memory}"()`, llQuote(asmMbarInitFence))
	p(`	br label %%sync`)
	p(`sync:`)
	p(`	call void @llvm.nvvm.barrier0()`)
	p(`	br i1 %%is0, label %%issue, label %%wait`)
	p(`issue:`)
	if arrive {
		p(`	call void asm sideeffect %s, "r,r,~{memory}"(i32 %%bar, i32 1024)`, llQuote(asmMbarArriveTx))
	}
	if copyBox {
		p(`	call void asm sideeffect %s, "r,l,r,r,r,~{memory}"(i32 %%s0, i64 %%tmi, i32 0, i32 %%row0, i32 %%bar)`, llQuote(asmTMALoad(2)))
	}
	p(`	br label %%wait`)
	p(`wait:`)
	if wait {
		p(`	call void asm sideeffect %s, "r,r,~{memory}"(i32 %%bar, i32 0)`, llQuote(asmMbarWait))
	}
	p(`	%%off = mul i32 %%tid, 16`)
	p(`	%%sa = add i32 %%s0, %%off`)
	p(`	%%sp = inttoptr i32 %%sa to <8 x i16> addrspace(3)*`)
	p(`	%%v = load <8 x i16>, <8 x i16> addrspace(3)* %%sp, align 16`)
	p(`	%%ei = mul i32 %%tid, 8`)
	p(`	%%gp = getelementptr i16, i16 addrspace(1)* %%out, i32 %%ei`)
	p(`	%%gv = bitcast i16 addrspace(1)* %%gp to <8 x i16> addrspace(1)*`)
	p(`	store <8 x i16> %%v, <8 x i16> addrspace(1)* %%gv, align 16`)
	p(`	ret void`)
	p(`}`)
	p(`declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()`)
	p(`declare void @llvm.nvvm.barrier0()`)
	return b.String()
}

// tmaTestResult describes tmaTestKernel's parameters: src is a [rows x
// stride] bf16 tensor of 64 columns, mapped with a [64 x 8] box.
func tmaTestResult() *Result {
	bf := tir.Type{Elem: tir.BF16, Ptr: true}
	i32 := tir.Type{Elem: tir.I32}
	return &Result{Name: "tma_test", Threads: 64, SharedBytes: 1024 + 8, Params: []Param{
		{Name: "src", Type: bf, Kind: ParamU64},
		{Name: "out", Type: bf, Kind: ParamU64},
		{Name: "rows", Type: i32, Kind: ParamI32},
		{Name: "stride", Type: i32, Kind: ParamI32},
		{Name: "row0", Type: i32, Kind: ParamI32},
		{Name: "tm", Kind: ParamTensorMap, TMA: &artifact.TMA{
			Tensor:  "src",
			Dims:    []artifact.TMADim{{Extent: 64}, {Stride: "stride", Bound: "rows"}},
			Box:     []int{64, 8},
			Swizzle: 128,
		}},
	}}
}

const tmaTestRows, tmaTestStride = 10, 72

// tmaTestArgs are tmaTestKernel's arguments: distinct bf16 values.
func tmaTestArgs(row0 int) []any {
	src := make([]float64, tmaTestRows*tmaTestStride)
	for i := range src {
		src[i] = float64(half.BF16ToF32(uint16(0x3f80 + i)))
	}
	return []any{
		&cpu.Buffer{Name: "src", Elem: tir.BF16, Vals: src},
		&cpu.Buffer{Name: "out", Elem: tir.BF16, Vals: make([]float64, 512)},
		tmaTestRows, tmaTestStride, row0,
	}
}

// simulateWithin runs simulate, failing the test when it takes longer
// than d (a hang).
func simulateWithin(t *testing.T, d time.Duration, ll string, res *Result, args []any, misalign bool) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- simulate(ll, res, [3]int{1, 1, 1}, args, misalign) }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("simulate still running after %v: a hang", d)
	}
	return nil
}

// TestSimTMA loads a [64 x 8] bf16 box with a 128-byte swizzle through a
// tensor map of a [10 x 64] (row stride 72) tensor, with rows out of
// bounds on either side, and checks every byte of shared memory the
// threads copy out: the swizzled placement, and zeros past the bounds.
func TestSimTMA(t *testing.T) {
	for _, row0 := range []int{5, -3, 0} {
		t.Run(fmt.Sprintf("row0=%d", row0), func(t *testing.T) {
			args := tmaTestArgs(row0)
			if err := simulateWithin(t, time.Minute, tmaTestKernel(true, true, true), tmaTestResult(), args, false); err != nil {
				t.Fatal(err)
			}
			src, out := args[0].(*cpu.Buffer).Vals, args[1].(*cpu.Buffer).Vals
			zeros := 0
			for k, got := range out {
				// out holds shared bytes 2k, 2k+1: the element whose
				// unswizzled offset is o below.
				o := 2 * k
				o ^= (o >> 7 & 7) << 4
				r, c := o/128, o%128/2
				want := 0.0
				if y := row0 + r; y >= 0 && y < tmaTestRows {
					want = src[y*tmaTestStride+c]
				} else {
					zeros++
				}
				if got != want {
					t.Fatalf("shared element %d (box row %d, col %d): got %v, want %v", k, r, c, got, want)
				}
			}
			wantZeros := 0
			for r := 0; r < 8; r++ {
				if y := row0 + r; y < 0 || y >= tmaTestRows {
					wantZeros += 64
				}
			}
			if zeros != wantZeros {
				t.Fatalf("%d out-of-bounds elements, want %d", zeros, wantZeros)
			}
		})
	}
}

// TestSimTMAErrors checks that the simulator rejects broken uses rather
// than compute (or hang).
func TestSimTMAErrors(t *testing.T) {
	for _, c := range []struct {
		name               string
		arrive, copy, wait bool
		misalign           bool
		stride, rows       int                 // argument overrides
		edit               func(string) string // of the LLVM IR
		want               string
	}{
		{name: "no wait", arrive: true, copy: true, want: "no wait has seen land"},
		{name: "no arrive", copy: true, wait: true, want: "wait for parity 0 never completes"},
		{name: "no copy", arrive: true, wait: true, want: "wait for parity 0 never completes"},
		{name: "misaligned", arrive: true, copy: true, wait: true, misalign: true, want: "not 16-byte aligned"},
		{name: "odd stride", arrive: true, copy: true, wait: true, stride: 68, want: "not a multiple of 16"},
		// A bound past the buffer: global memory's bounds catch the read.
		{name: "past the buffer", arrive: true, copy: true, wait: true, rows: 20, want: "outside every buffer"},
		{name: "no init", arrive: true, copy: true, wait: true, edit: func(ll string) string {
			return strings.Replace(ll, llQuote(asmMbarInit), llQuote(""), 1)
		}, want: "used before mbarrier.init"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := tmaTestArgs(5)
			if c.stride != 0 {
				args[3] = c.stride
			}
			if c.rows != 0 {
				args[2] = c.rows
			}
			ll := tmaTestKernel(c.arrive, c.copy, c.wait)
			if c.edit != nil {
				ll = c.edit(ll)
			}
			err := simulateWithin(t, time.Minute, ll, tmaTestResult(), args, c.misalign)
			t.Logf("%v", err)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestSimTMAPrecedingParity checks that a wait for the parity of the
// phase before the current one (1 before the first completes) returns at
// once: every thread waits for it (between two bar.syncs) before thread 0
// arrives. (Without the second bar.sync, a thread could wait for parity 1
// after the first phase completed: a wait for the second phase, which
// never completes, on the hardware as here.)
func TestSimTMAPrecedingParity(t *testing.T) {
	ll := tmaTestKernel(true, true, true)
	ll = strings.Replace(ll, "\tbr i1 %is0, label %issue, label %wait\n",
		"\tcall void asm sideeffect "+llQuote(asmMbarWait)+", \"r,r,~{memory}\"(i32 %bar, i32 1)\n"+
			"\tcall void @llvm.nvvm.barrier0()\n"+
			"\tbr i1 %is0, label %issue, label %wait\n", 1)
	args := tmaTestArgs(0)
	if err := simulateWithin(t, time.Minute, ll, tmaTestResult(), args, false); err != nil {
		t.Fatal(err)
	}
}

// TestSimTMALand3D checks land's placement of a 3-d box against the PTX
// ISA's layout written out per coordinate, and that it clears the
// generic-proxy marks of the bytes it writes.
func TestSimTMALand3D(t *testing.T) {
	m := &simMachine{}
	const d0, d1, d2 = 32, 5, 3 // f32: 32 x 4 bytes = one 128-byte row
	base := m.alloc(d0 * d1 * d2 * 4)
	for i := 0; i < d0*d1*d2; i++ {
		binary.LittleEndian.PutUint32(m.global[base+uint64(4*i):], uint32(i+1))
	}
	tm := &simTMap{name: "t", base: base, elem: 4, dims: []int64{d0, d1, d2},
		strides: []uint64{4, d0 * 4, d0 * d1 * 4}, box: []int{32, 4, 2}, swizzle: 128}
	c := &simCTA{m: m, shared: make([]byte, 2048), proxy: newProxyMarks(2048)}
	c.sched = newSimSched(m, 1, 2048, true)
	for i := range c.proxy.marks {
		c.proxy.marks[i] = 7
	}
	coords := []int64{0, 3, 1}
	c.sched.mu.Lock()
	c.land(&simBulkCopy{tm: tm, dst: 1024, coords: coords})
	c.sched.mu.Unlock()
	for c2 := 0; c2 < 2; c2++ {
		for c1 := 0; c1 < 4; c1++ {
			for c0 := 0; c0 < 32; c0++ {
				a := (c2*4+c1)*128 + c0*4
				a ^= (a >> 7 & 7) << 4
				x1, x2 := 3+c1, 1+c2
				want := uint32(0)
				if x1 < d1 && x2 < d2 {
					want = uint32(x2*d0*d1+x1*d0+c0) + 1
				}
				if got := binary.LittleEndian.Uint32(c.shared[1024+a:]); got != want {
					t.Fatalf("box (%d, %d, %d) at byte %d: got %d, want %d", c0, c1, c2, a, got, want)
				}
			}
		}
	}
	for i, mk := range c.proxy.marks {
		if (i >= 1024) == (mk != 0) {
			t.Fatalf("proxy mark of byte %d is %d after the copy", i, mk)
		}
	}
}

// tmaStoreTestKernel is a 64-thread kernel: every thread copies 16 bytes
// of src (512 bf16) to shared memory at tid·16, (with fence) fences them
// for the async proxy, and after a barrier thread 0 stores the [64 x 8]
// box of shared 0 (as laid out, swizzled) at (0, row0) of the tensor map
// %tm over dst, commits the bulk group, (with overwrite) writes shared
// byte 0 and (with wait) waits for the store's read.
func tmaStoreTestKernel(fence, overwrite, wait bool) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p(`target triple = "nvptx64-nvidia-cuda"`)
	p(`@smem = external addrspace(3) global [0 x i8], align 1024`)
	p(`define ptx_kernel void @tma_store_test(i16 addrspace(1)* %%src, i16 addrspace(1)* %%dst, i32 %%rows, i32 %%stride, i32 %%row0, [128 x i8]* byval([128 x i8]) align 64 %%tm) {`)
	p(`entry:`)
	p(`	%%tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()`)
	p(`	%%sp0 = bitcast [0 x i8] addrspace(3)* @smem to i8 addrspace(3)*`)
	p(`	%%s0 = ptrtoint i8 addrspace(3)* %%sp0 to i32`)
	p(`	%%tmi = ptrtoint [128 x i8]* %%tm to i64`)
	p(`	%%ei = mul i32 %%tid, 8`)
	p(`	%%gp = getelementptr i16, i16 addrspace(1)* %%src, i32 %%ei`)
	p(`	%%gv = bitcast i16 addrspace(1)* %%gp to <8 x i16> addrspace(1)*`)
	p(`	%%v = load <8 x i16>, <8 x i16> addrspace(1)* %%gv, align 16`)
	p(`	%%off = mul i32 %%tid, 16`)
	p(`	%%sa = add i32 %%s0, %%off`)
	p(`	%%sp = inttoptr i32 %%sa to <8 x i16> addrspace(3)*`)
	p(`	store <8 x i16> %%v, <8 x i16> addrspace(3)* %%sp, align 16`)
	if fence {
		p(`	call void asm sideeffect "fence.proxy.async.shared::cta;", "~{memory}"()`)
	}
	p(`	call void @llvm.nvvm.barrier0()`)
	p(`	%%is0 = icmp eq i32 %%tid, 0`)
	p(`	br i1 %%is0, label %%issue, label %%done`)
	p(`issue:`)
	p(`	call void asm sideeffect %s, "l,r,r,r,~{memory}"(i64 %%tmi, i32 0, i32 %%row0, i32 %%s0)`,
		llQuote("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];"))
	p(`	call void asm sideeffect "cp.async.bulk.commit_group;", "~{memory}"()`)
	if overwrite {
		p(`	%%h0 = bitcast i8 addrspace(3)* %%sp0 to i16 addrspace(3)*`)
		p(`	store i16 7, i16 addrspace(3)* %%h0, align 2`)
	}
	if wait {
		p(`	call void asm sideeffect "cp.async.bulk.wait_group.read 0;", "~{memory}"()`)
	}
	p(`	br label %%done`)
	p(`done:`)
	p(`	ret void`)
	p(`}`)
	p(`declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()`)
	p(`declare void @llvm.nvvm.barrier0()`)
	return b.String()
}

// tmaStoreTestResult describes tmaStoreTestKernel's parameters: dst is a
// [rows x stride] bf16 tensor of 64 columns, mapped with a [64 x 8] box.
func tmaStoreTestResult() *Result {
	r := tmaTestResult()
	r.Name = "tma_store_test"
	r.SharedBytes = 1024
	r.Params[0].Name, r.Params[1].Name = "src", "dst"
	r.Params[5].TMA.Tensor = "dst"
	return r
}

// tmaStoreTestArgs are tmaStoreTestKernel's arguments: 512 distinct bf16
// values, and dst filled with 0.5.
func tmaStoreTestArgs(row0 int) []any {
	src := make([]float64, 512)
	for i := range src {
		src[i] = float64(half.BF16ToF32(uint16(0x3f80 + i)))
	}
	dst := make([]float64, tmaTestRows*tmaTestStride)
	for i := range dst {
		dst[i] = 0.5
	}
	return []any{
		&cpu.Buffer{Name: "src", Elem: tir.BF16, Vals: src},
		&cpu.Buffer{Name: "dst", Elem: tir.BF16, Vals: dst},
		tmaTestRows, tmaTestStride, row0,
	}
}

// TestSimTMAStoreBox stores a [64 x 8] bf16 box with a 128-byte swizzle
// through a tensor map of a [10 x 64] (row stride 72) tensor, with rows out
// of bounds on either side, and checks every element of the tensor: the
// box's rows inside the bounds unswizzled, nothing else written.
func TestSimTMAStoreBox(t *testing.T) {
	for _, row0 := range []int{5, -3, 0} {
		t.Run(fmt.Sprintf("row0=%d", row0), func(t *testing.T) {
			args := tmaStoreTestArgs(row0)
			if err := simulateWithin(t, time.Minute, tmaStoreTestKernel(true, false, true), tmaStoreTestResult(), args, false); err != nil {
				t.Fatal(err)
			}
			src, dst := args[0].(*cpu.Buffer).Vals, args[1].(*cpu.Buffer).Vals
			written := 0
			for y := 0; y < tmaTestRows; y++ {
				for c := 0; c < tmaTestStride; c++ {
					want := 0.5
					if r := y - row0; r >= 0 && r < 8 && c < 64 {
						o := r*128 + 2*c
						o ^= (o >> 7 & 7) << 4
						want = src[o/2]
						written++
					}
					if got := dst[y*tmaTestStride+c]; got != want {
						t.Fatalf("dst row %d col %d: got %v, want %v", y, c, got, want)
					}
				}
			}
			wantRows := 0
			for r := 0; r < 8; r++ {
				if y := row0 + r; y >= 0 && y < tmaTestRows {
					wantRows++
				}
			}
			if written != 64*wantRows {
				t.Fatalf("%d elements written, want %d", written, 64*wantRows)
			}
		})
	}
}

// TestSimTMAStoreErrors checks that the simulator rejects a store whose
// source was not fenced, one not waited for, and one whose source is
// written before the wait.
func TestSimTMAStoreErrors(t *testing.T) {
	for _, c := range []struct {
		name                   string
		fence, overwrite, wait bool
		want                   string
	}{
		{name: "no fence", wait: true, want: "without fence.proxy.async"},
		{name: "no wait", fence: true, want: "in flight"},
		{name: "overwrite", fence: true, overwrite: true, wait: true, want: "changed before the store's cp.async.bulk.wait_group.read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := simulateWithin(t, time.Minute, tmaStoreTestKernel(c.fence, c.overwrite, c.wait), tmaStoreTestResult(), tmaStoreTestArgs(5), false)
			t.Logf("%v", err)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// The release counters' forms (codegen/sm90/tma.go).
const (
	asmCounterInit = "st.shared.u32 [$0], 0;"
	asmRelease     = "atom.acq_rel.cta.shared::cta.inc.u32 $0, [$1], $2;"
)

// counterAsm runs a release counter's zeroing or its atom.inc: old value
// returned, the counter set to old >= limit ? 0 : old + 1, under the
// CTA's scheduler lock (atomic against the other threads).
func (t *simThread) counterAsm(in *ir.InstCall, s string, args []uint64) {
	addr := uint64(uint32(args[0])) // inputs: address (and limit)
	sh := t.cta.shared
	if addr%4 != 0 || addr+4 > uint64(len(sh)) {
		t.cta.m.fail("%q: address %#x outside shared memory", s, addr)
	}
	sched := t.cta.sched
	sched.mu.Lock()
	defer sched.mu.Unlock()
	w := sh[addr : addr+4]
	if s == asmCounterInit {
		binary.LittleEndian.PutUint32(w, 0)
		return
	}
	old := binary.LittleEndian.Uint32(w)
	next := old + 1
	if old >= uint32(args[1]) {
		next = 0
	}
	binary.LittleEndian.PutUint32(w, next)
	t.vals[in] = uint64(old)
}
