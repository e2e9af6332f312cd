package codegen

// The simulator's bulk reductions (PTX ISA §9.7.9.25.4.2,
// cp.reduce.async.bulk): a thread's cp.reduce.async.bulk .add.f32 reads a
// run of shared memory and adds it to global memory asynchronously. The
// simulator performs the read and the adds at the thread's
// cp.async.bulk.wait_group(.read) 0, the latest moment the ISA allows the
// read, so a staging area overwritten before its reduction was waited for
// gives a wrong sum; the source must have been fenced for the async proxy
// when the reduction is issued (fence.proxy.async), and a thread may not
// exit with reductions in flight.

import (
	"encoding/binary"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/llir/llvm/ir"
)

var bulkReduceRE = regexp.MustCompile(`cp\.reduce\.async\.bulk\.global\.shared::cta\.bulk_group\.add\.f32 \[\$0\], \[\$1\], (\d+);`)

// simBulk is one reduction in flight: n bytes of shared memory at src to
// be added to dst, a slice of global memory.
type simBulk struct {
	dst []byte
	src uint64
	n   int
	// store: a tensor store (sim_tma_test.go), dst unused.
	store *simTensorStore
}

// bulkAsm runs the bulk-reduction inline asm; false for other asm.
func (t *simThread) bulkAsm(in *ir.InstCall, s string, args []uint64) bool {
	m := t.cta.m
	switch {
	case strings.Contains(s, "cp.reduce.async.bulk"):
		sm := bulkReduceRE.FindStringSubmatch(s)
		if sm == nil || !strings.Contains(s, "@p cp.reduce") {
			m.fail("unparsed cp.reduce.async.bulk asm %q", s)
		}
		n, _ := strconv.Atoi(sm[1])
		if args[2] == 0 {
			return true
		}
		src := uint64(uint32(args[1]))
		if n%16 != 0 || src%16 != 0 || args[0]%16 != 0 || src+uint64(n) > uint64(len(t.cta.shared)) {
			m.fail("cp.reduce.async.bulk of %d bytes from shared %d to %#x: misaligned or beyond SharedBytes=%d", n, src, args[0], len(t.cta.shared))
		}
		t.cta.checkFenced("cp.reduce.async.bulk", src, n)
		t.bulk = append(t.bulk, simBulk{dst: t.globalRun(args[0], n), src: src, n: n})
	case s == "cp.async.bulk.commit_group;":
	case s == "cp.async.bulk.wait_group.read 0;", s == "cp.async.bulk.wait_group 0;":
		t.bulkWait()
	default:
		return false
	}
	return true
}

// globalRun is n bytes of global memory at addr.
func (t *simThread) globalRun(addr uint64, n int) []byte {
	t.cta.m.checkGlobal(addr, n)
	return t.cta.m.global[addr : addr+uint64(n)]
}

// bulkWait performs the thread's reductions and tensor stores in flight.
func (t *simThread) bulkWait() {
	m := t.cta.m
	for _, b := range t.bulk {
		if b.store != nil {
			t.storeBox(b.store, b.src, b.n)
			continue
		}
		t.cta.sched.checkLanded("cp.reduce.async.bulk", b.src, b.n)
		src := t.cta.shared[b.src : b.src+uint64(b.n)]
		m.mu.Lock()
		for i := 0; i < b.n; i += 4 {
			old := math.Float32frombits(binary.LittleEndian.Uint32(b.dst[i:]))
			add := math.Float32frombits(binary.LittleEndian.Uint32(src[i:]))
			binary.LittleEndian.PutUint32(b.dst[i:], math.Float32bits(old+add))
		}
		m.mu.Unlock()
	}
	t.bulk = t.bulk[:0]
}
