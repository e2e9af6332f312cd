package simt

// TMA: tensor maps, mbarriers and cp.async.bulk.tensor, from the PTX ISA
// (§9.7.9.25 cp.async.bulk.tensor, §9.7.13.15 mbarrier), independently of
// codegen/sm90:
//
//   - a tensor-map parameter gets a fake global address that stands for
//     the tmap built from its TMA description and the other arguments, as
//     the runtime would encode it; its base and strides must be multiples
//     of 16 bytes, as cuTensorMapEncodeTiled requires;
//   - an mbarrier is a count of pending arrivals, a transaction count
//     (bytes) and a phase number, kept per CTA by shared address (8 bytes,
//     8-aligned, mbarrier.init before use). A phase completes when its
//     arrivals are all in and its transaction count is 0; then the
//     arrivals reset and the phase number increments. try_wait.parity P
//     returns once the phase of parity P has completed: the current
//     phase's parity differs from P;
//   - cp.async.bulk.tensor.Nd copies a box of the tensor into shared
//     memory row-major (dim 0 fastest; out-of-bounds elements read as
//     zeros), swizzled in 16-byte chunks (a ^ ((a>>7)&(S/16-1))<<4 for a
//     swizzle span S), and completes its bytes on an mbarrier. The copy
//     lands late: when a lane waiting on that mbarrier finds its arrivals
//     all in. Until then its bytes are in flight. Landed bytes are
//     async-proxy writes: they clear the generic-proxy marks;
//   - cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group stores a box
//     from shared memory (laid out as a load's, swizzled) through a tensor
//     map, writing no element outside the map's extents, in the issuing
//     lane's bulk group (bulk.go).

import (
	"fmt"
)

// tmap is a tensor map as the simulator encodes it.
type tmap struct {
	name    string
	base    uint64
	elem    int      // bytes
	dims    []int64  // extents, innermost first
	strides []uint64 // bytes (strides[0] = elem)
	box     []int
	swizzle int // bytes: 0 (none), 32, 64, 128
}

func (tm *tmap) boxBytes() int {
	n := tm.elem
	for _, b := range tm.box {
		n *= b
	}
	return n
}

// swizzle is byte offset a of a box placed with tm's swizzle.
func (tm *tmap) place(a uint64) uint64 {
	if tm.swizzle > 0 {
		a ^= (a >> 7 & uint64(tm.swizzle/16-1)) << 4
	}
	return a
}

// copyMap is the tensor map a bulk tensor copy (what) names at tmAddr with
// coords, and the alignment its shared side needs (128 bytes, or the
// swizzle pattern's 8 rows).
func (m *machine) copyMap(what string, tmAddr uint64, coords []int64) (*tmap, uint64) {
	tm := m.tmaps[tmAddr]
	if tm == nil {
		fail("%s: %#x is not a tensor-map parameter's address", what, tmAddr)
	}
	if len(coords) != len(tm.dims) {
		fail("%s with %d coordinates through the %d-d tensor map %s", what, len(coords), len(tm.dims), tm.name)
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
func (tm *tmap) boxElem(coords []int64, e int, idx []int) (addr uint64, oob bool) {
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

// tensorMap builds tensor-map parameter p from the other arguments (by
// parameter name; bufs: the buffers' addresses) and returns its fake
// address.
func (m *machine) tensorMap(p Param, all []Param, named map[string]any, bufs map[string]uint64, misalign bool) (uint64, error) {
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
	if tp == nil || !ok || tp.Kind != Ptr {
		return 0, fmt.Errorf("maps %q, which is not a pointer parameter", d.Tensor)
	}
	n := len(d.Dims)
	if n < 1 || n > 5 || len(d.Box) != n {
		return 0, fmt.Errorf("%d dims with %d box sizes (want 1..5 of each)", n, len(d.Box))
	}
	tm := &tmap{name: p.Name, base: base, elem: tp.Elem.Bytes(), box: append([]int(nil), d.Box...), swizzle: d.Swizzle}
	if tm.elem < 1 {
		return 0, fmt.Errorf("tensor %q has element type %v", d.Tensor, tp.Elem)
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
	argI := func(name string) (int64, error) {
		v, ok := argInt(named[name])
		if !ok {
			return 0, fmt.Errorf("no i32 argument %q (have %T)", name, named[name])
		}
		return v, nil
	}
	for i, dim := range d.Dims {
		if i == 0 {
			// Contiguous, with a constant extent or a bound parameter.
			ext := int64(dim.Extent)
			if dim.Bound != "" {
				b, err := argI(dim.Bound)
				if err != nil {
					return 0, fmt.Errorf("dim 0 bound: %v", err)
				}
				ext = b
			}
			if dim.Stride != "" || (dim.Extent < 1) == (dim.Bound == "") || ext < 0 {
				return 0, fmt.Errorf("dim 0 must be contiguous with a constant extent or a bound, got %+v", dim)
			}
			tm.dims = append(tm.dims, ext)
			tm.strides = append(tm.strides, uint64(tm.elem))
			continue
		}
		s, err := argI(dim.Stride)
		if err != nil {
			return 0, fmt.Errorf("dim %d stride: %v", i, err)
		}
		ext := int64(1) << 30
		if dim.Bound != "" {
			if ext, err = argI(dim.Bound); err != nil {
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
		m.tmaps = map[uint64]*tmap{}
	}
	m.tmaps[addr] = tm
	return addr, nil
}

// mbar is one mbarrier.
type mbar struct {
	count   int // arrivals per phase
	pending int // arrivals the current phase still expects
	tx      int // transaction bytes expected and not landed
	phase   int // phases completed
	copies  []*bulkCopy
}

// bulkCopy is a copy in flight: a tensor map's box at coords, or (tm nil)
// n contiguous bytes from global address src.
type bulkCopy struct {
	tm     *tmap
	dst    uint64
	coords []int64
	src    uint64
	n      int
}

// bytes is what the copy completes on its mbarrier.
func (cp *bulkCopy) bytes() int {
	if cp.tm == nil {
		return cp.n
	}
	return cp.tm.boxBytes()
}

// bulkLoad is a contiguous cp.async.bulk of n bytes from global src to
// shared dst on the mbarrier at bar. Both addresses and n are multiples
// of 16; the source's 16-byte chunks need only overlap a buffer (the
// hardware reads whole chunks, and a chunk never spans pages), the bytes
// outside one reading as zero.
func (c *cta) bulkLoad(dst, src uint64, n int, bar uint64) {
	if dst%16 != 0 || src%16 != 0 || n <= 0 || n%16 != 0 || dst+uint64(n) > uint64(len(c.shared)) {
		fail("cp.async.bulk of %d bytes from %#x to shared %#x: not 16-byte aligned multiples inside SharedBytes=%d", n, src, dst, len(c.shared))
	}
	for k := 0; k < n; k += 16 {
		if !c.m.overlaps(src+uint64(k), 16) {
			fail("cp.async.bulk reads the chunk at %#x, which no buffer overlaps", src+uint64(k))
		}
	}
	c.startCopy(&bulkCopy{dst: dst, src: src, n: n}, bar, "cp.async.bulk")
}

// startCopy puts cp in flight on the mbarrier at bar.
func (c *cta) startCopy(cp *bulkCopy, bar uint64, what string) {
	dst, n := cp.dst, uint64(cp.bytes())
	c.mbarCheckAddr(bar, what)
	b := c.mbar(bar, what)
	for a := range c.mbars {
		if a+8 > dst && a < dst+n {
			fail("%s destination [%#x, %#x) overlaps the mbarrier at %#x", what, dst, dst+n, a)
		}
	}
	for i := dst; i < dst+n; i++ {
		if o := c.inflight[i]; o != 0 {
			fail("%s destination byte %d is already the destination of a copy in flight on the mbarrier at %#x", what, i, o-1)
		}
	}
	for i := dst; i < dst+n; i++ {
		c.inflight[i] = int32(bar) + 1
	}
	b.copies = append(b.copies, cp)
	c.epoch++
}

// checkLanded fails when a generic access (what) touches bytes of a copy
// that has not landed.
func (c *cta) checkLanded(what string, addr uint64, n int) {
	if c.inflight == nil {
		return
	}
	for i := uint64(0); i < uint64(n); i++ {
		if b := c.inflight[addr+i]; b != 0 {
			fail("%s at %d+%d touches byte %d of a cp.async.bulk.tensor on the mbarrier at %#x that no wait has seen land (a missing mbarrier wait, or a tile overwritten while read)",
				what, addr, n, addr+i, b-1)
		}
	}
}

func (c *cta) mbarCheckAddr(addr uint64, what string) {
	if addr%8 != 0 || addr+8 > uint64(len(c.shared)) {
		fail("%s: mbarrier address %#x not 8-byte aligned inside SharedBytes=%d", what, addr, len(c.shared))
	}
}

// mbar is the mbarrier at addr.
func (c *cta) mbar(addr uint64, what string) *mbar {
	b := c.mbars[addr]
	if b == nil {
		fail("%s: mbarrier at %#x used before mbarrier.init", what, addr)
	}
	return b
}

func (c *cta) mbarInit(addr uint64, count int) {
	c.mbarCheckAddr(addr, "mbarrier.init")
	if count < 1 {
		fail("mbarrier.init at %#x with count %d", addr, count)
	}
	if b := c.mbars[addr]; b != nil && len(b.copies) > 0 {
		fail("mbarrier.init at %#x with %d copies in flight on it", addr, len(b.copies))
	}
	c.mbars[addr] = &mbar{count: count, pending: count}
	c.epoch++
}

// mbarArrive is one arrival on the mbarrier at addr, expecting tx more
// transaction bytes.
func (c *cta) mbarArrive(addr uint64, tx int) {
	b := c.mbar(addr, "mbarrier.arrive")
	if b.pending == 0 {
		fail("mbarrier at %#x: more than its %d arrivals in phase %d", addr, b.count, b.phase)
	}
	b.pending--
	b.tx += tx
	if b.pending == 0 && b.tx == 0 && len(b.copies) == 0 {
		b.phase++
		b.pending = b.count
	}
	c.epoch++
}

// tmaLoad issues a cp.async.bulk.tensor of the box at coords of the tensor
// map at tmAddr to shared dst, completing on the mbarrier at bar. Its
// bytes are in flight until a wait on bar lands it.
func (c *cta) tmaLoad(dst, tmAddr uint64, coords []int64, bar uint64) {
	tm, align := c.m.copyMap("cp.async.bulk.tensor", tmAddr, coords)
	n := uint64(tm.boxBytes())
	if dst%align != 0 || dst+n > uint64(len(c.shared)) {
		fail("cp.async.bulk.tensor destination %#x (+%d bytes) not %d-aligned inside SharedBytes=%d", dst, n, align, len(c.shared))
	}
	c.startCopy(&bulkCopy{tm: tm, dst: dst, coords: coords}, bar, "cp.async.bulk.tensor")
}

// mbarReady reports whether the phase of the given parity of the
// mbarrier at addr has completed; a waiter that finds the current phase's
// arrivals all in lands its copies.
func (c *cta) mbarReady(addr uint64, parity int) bool {
	for {
		b := c.mbar(addr, "mbarrier.try_wait")
		if b.phase&1 != parity {
			return true
		}
		if b.pending != 0 {
			return false
		}
		for _, cp := range b.copies {
			c.land(cp)
			b.tx -= cp.bytes()
		}
		b.copies = nil
		if b.tx < 0 {
			fail("mbarrier at %#x: its copies complete %d bytes more than the phase's expect_tx", addr, -b.tx)
		}
		if b.tx != 0 {
			return false
		}
		b.phase++
		b.pending = b.count
		c.epoch++
	}
}

// land performs copy cp: it writes the box into shared memory through the
// async proxy and clears the bytes' in-flight and generic-proxy marks.
func (c *cta) land(cp *bulkCopy) {
	if cp.tm == nil {
		c.landRun(cp)
		return
	}
	tm := cp.tm
	m := c.m
	total := tm.boxBytes() / tm.elem
	idx := make([]int, len(tm.box))
	var zero [8]byte
	for e := 0; e < total; e++ {
		src, oob := tm.boxElem(cp.coords, e, idx)
		a := tm.place(cp.dst + uint64(e*tm.elem))
		v := zero[:tm.elem]
		if !oob {
			if !m.inside(src, tm.elem) {
				fail("cp.async.bulk.tensor through %s at coordinates %v reads element %v at %#x, outside every buffer", tm.name, cp.coords, idx, src)
			}
			v = m.global[src : src+uint64(tm.elem)]
		}
		copy(c.shared[a:a+uint64(tm.elem)], v)
	}
	c.clearInflight(cp.dst, tm.boxBytes())
}

// clearInflight clears the in-flight and generic-proxy marks of the n
// bytes a copy landed at dst.
func (c *cta) clearInflight(dst uint64, n int) {
	for i := dst; i < dst+uint64(n); i++ {
		c.inflight[i] = 0
	}
	if c.marks != nil {
		for i := dst; i < dst+uint64(n); i++ {
			c.marks[i] = 0
		}
	}
}

// landRun performs a contiguous copy (bulkLoad): the bytes inside a
// buffer as they are, the others zero.
func (c *cta) landRun(cp *bulkCopy) {
	for i := 0; i < cp.n; i++ {
		var v byte
		if a := cp.src + uint64(i); c.m.inside(a, 1) {
			v = c.m.global[a]
		}
		c.shared[cp.dst+uint64(i)] = v
	}
	c.clearInflight(cp.dst, cp.n)
}

// mbarWait is a warp's mbarrier.try_wait.parity loop: addrs and parities
// per lane (m).
func (w *warp) mbarWait(m uint32, addr, parity func(l int) uint64) bool {
	c := w.cta
	for mm := m; mm != 0; mm &= mm - 1 {
		l := lane(mm)
		a, p := addr(l), parity(l)
		if p > 1 {
			fail("mbarrier wait for parity %d", p)
		}
		if !c.mbarReady(a, int(p)) {
			w.wait = waitState{active: true, what: fmt.Sprintf("mbarrier wait at %#x", a), mbar: &mbarWait{addr: a, parity: int(p), lane: l}}
			return false
		}
	}
	w.wait = waitState{}
	return true
}
