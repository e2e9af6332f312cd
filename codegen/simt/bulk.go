package simt

// Asynchronous copies and their proxies:
//   - cp.async (sm_80): a lane's copies complete alternately at issue and
//     at the cp.async.wait_group that covers their group;
//   - cp.reduce.async.bulk .add.f32 (§9.7.9.25.4.2) reads a run of shared
//     memory and adds it to global memory asynchronously: the simulator
//     performs the read and the adds at the lane's
//     cp.async.bulk.wait_group(.read) 0, the latest moment the ISA allows
//     the read, so a staging area overwritten before its reduction was
//     waited for gives a wrong sum; the source must have been fenced for
//     the async proxy (fence.proxy.async) when the reduction is issued,
//     and a thread may not exit with reductions in flight;
//   - a tensor store reads its source at the same wait, failing when the
//     source changed since the issue (an overwrite before the wait).

import (
	"encoding/binary"
	"math"
)

type cpCopy struct {
	dst, src uint64
	n        int // bytes read from src; the rest of the 16 are zeroed
}

func (w *warp) doCopy(l int, cp cpCopy) {
	var buf [16]byte
	if cp.n > 0 {
		copy(buf[:cp.n], w.mem(1, cp.src, cp.n, l, false))
	}
	copy(w.mem(3, cp.dst, 16, l, true), buf[:])
}

// cpAsync issues lane l's cp.async.
func (w *warp) cpAsync(l int, cp cpCopy) {
	w.cpCount[l]++
	if w.cpCount[l]%2 == 0 {
		w.doCopy(l, cp)
	} else {
		w.cpOpen[l] = append(w.cpOpen[l], cp)
	}
}

func (w *warp) cpCommit(l int) {
	w.cpPending[l] = append(w.cpPending[l], w.cpOpen[l])
	w.cpOpen[l] = nil
}

func (w *warp) cpWait(l int, n int) {
	for len(w.cpPending[l]) > n {
		for _, cp := range w.cpPending[l][0] {
			w.doCopy(l, cp)
		}
		w.cpPending[l] = w.cpPending[l][1:]
	}
}

// bulkOp is one bulk reduction or tensor store in flight: n bytes of
// shared memory at src to be added to dst, a run of global memory, or
// stored through a tensor map.
type bulkOp struct {
	dst   []byte
	src   uint64
	n     int
	store *tensorStore
}

// tensorStore is a tensor store or reduction in flight: its map and
// coordinates, and its source as it was at the issue.
type tensorStore struct {
	tm     *tmap
	coords []int64
	seen   []byte
	add    bool // cp.reduce.async.bulk.tensor .add (f32)
}

// bulkReduce issues lane l's cp.reduce.async.bulk of n bytes from shared
// src to global dst.
func (w *warp) bulkReduce(l int, dst, src uint64, n int) {
	c := w.cta
	if n%16 != 0 || src%16 != 0 || dst%16 != 0 || src+uint64(n) > uint64(len(c.shared)) {
		fail("cp.reduce.async.bulk of %d bytes from shared %d to %#x: misaligned or beyond SharedBytes=%d", n, src, dst, len(c.shared))
	}
	c.checkFenced("cp.reduce.async.bulk", src, n)
	w.bulk[l] = append(w.bulk[l], bulkOp{dst: c.m.globalRun(dst, n), src: src, n: n})
}

// tmaStore issues lane l's cp.async.bulk.tensor store of the box at coords
// of the tensor map at tmAddr from shared src.
func (w *warp) tmaStore(l int, tmAddr uint64, coords []int64, src uint64) {
	w.tensorOut(l, "cp.async.bulk.tensor store", tmAddr, coords, src, false)
}

// tmaReduce issues lane l's cp.reduce.async.bulk.tensor .add of the box
// at shared src into the box at coords of the tensor map at tmAddr (f32).
func (w *warp) tmaReduce(l int, tmAddr uint64, coords []int64, src uint64) {
	w.tensorOut(l, "cp.reduce.async.bulk.tensor", tmAddr, coords, src, true)
}

// tensorOut issues a tensor store (add: a reduction) in lane l's bulk
// group.
func (w *warp) tensorOut(l int, what string, tmAddr uint64, coords []int64, src uint64, add bool) {
	c := w.cta
	tm, align := c.m.copyMap(what, tmAddr, coords)
	if add && tm.elem != 4 {
		fail("%s through %s of %d-byte elements (f32 only)", what, tm.name, tm.elem)
	}
	n := tm.boxBytes()
	if src%align != 0 || src+uint64(n) > uint64(len(c.shared)) {
		fail("%s source %#x (+%d bytes) not %d-aligned inside SharedBytes=%d", what, src, n, align, len(c.shared))
	}
	c.checkLanded(what, src, n)
	c.checkFenced(what, src, n)
	seen := append([]byte(nil), c.shared[src:src+uint64(n)]...)
	w.bulk[l] = append(w.bulk[l], bulkOp{src: src, n: n, store: &tensorStore{tm: tm, coords: coords, seen: seen, add: add}})
}

// bulkWait performs lane l's reductions and tensor stores in flight.
func (w *warp) bulkWait(l int) {
	c := w.cta
	for _, b := range w.bulk[l] {
		if b.store != nil {
			c.storeBox(b.store, b.src, b.n)
			continue
		}
		c.checkLanded("cp.reduce.async.bulk", b.src, b.n)
		src := c.shared[b.src : b.src+uint64(b.n)]
		for i := 0; i < b.n; i += 4 {
			old := math.Float32frombits(binary.LittleEndian.Uint32(b.dst[i:]))
			add := math.Float32frombits(binary.LittleEndian.Uint32(src[i:]))
			binary.LittleEndian.PutUint32(b.dst[i:], math.Float32bits(old+add))
		}
	}
	w.bulk[l] = w.bulk[l][:0]
}

// storeBox performs tensor store st of the box at shared src (n bytes):
// each element inside the map's extents goes to global memory.
func (c *cta) storeBox(st *tensorStore, src uint64, n int) {
	tm := st.tm
	box := c.shared[src : src+uint64(n)]
	for i := range box {
		if box[i] != st.seen[i] {
			fail("shared byte %d of a cp.async.bulk.tensor store's or reduction's source through %s changed before its cp.async.bulk.wait_group.read (an overwrite of a tile still being read)", src+uint64(i), tm.name)
		}
	}
	idx := make([]int, len(tm.box))
	for e := 0; e < n/tm.elem; e++ {
		dst, oob := tm.boxElem(st.coords, e, idx)
		if oob {
			continue
		}
		a := tm.place(uint64(e * tm.elem))
		g := c.m.globalRun(dst, tm.elem)
		if st.add {
			old := math.Float32frombits(binary.LittleEndian.Uint32(g))
			binary.LittleEndian.PutUint32(g, math.Float32bits(old+math.Float32frombits(binary.LittleEndian.Uint32(box[a:]))))
			continue
		}
		copy(g, box[a:a+uint64(tm.elem)])
	}
}

// markShared records lane l's generic-proxy write to shared memory.
func (w *warp) markShared(l int, addr uint64, n int) {
	c := w.cta
	if c.marks == nil {
		return
	}
	tid := int32(32*w.id + l + 1)
	for i := 0; i < n; i++ {
		c.marks[addr+uint64(i)] = tid
	}
	w.written[l] = append(w.written[l], [2]uint64{addr, uint64(n)})
}

// fenceProxy is lane l's fence.proxy.async: its marks clear.
func (w *warp) fenceProxy(l int) {
	c := w.cta
	if c.marks == nil {
		return
	}
	tid := int32(32*w.id + l + 1)
	for _, wr := range w.written[l] {
		for i := uint64(0); i < wr[1]; i++ {
			if c.marks[wr[0]+i] == tid {
				c.marks[wr[0]+i] = 0
			}
		}
	}
	w.written[l] = w.written[l][:0]
}

// checkFenced fails when an async-proxy read (what) of shared bytes [src,
// src+n) finds a byte a thread wrote through the generic proxy without
// fence.proxy.async since.
func (c *cta) checkFenced(what string, src uint64, n int) {
	if c.marks == nil {
		return
	}
	for a := src; a < src+uint64(n); a++ {
		if who := c.marks[a]; who != 0 {
			fail("%s reads shared byte %d written by thread %d through the generic proxy without fence.proxy.async", what, a, who-1)
		}
	}
}
