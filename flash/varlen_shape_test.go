package flash

import (
	"encoding/binary"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Issue 46 item 2: varlen panicked (makeslice: len out of range) or ran
// out of memory before it checked its lengths: cu_seqlens [0, -5, -9],
// heads -1, or [0, 2147483647]. VarlenShape is the check callers make
// before they allocate; it must refuse all of these and allocate nothing
// itself.

func TestVarlenShapeIssue46Item2(t *testing.T) {
	for _, c := range []struct {
		cuQ, cuK            []int32
		heads, kvHeads, dim int
		totalQ, totalK      int
		want                string
	}{
		{[]int32{0, -5, -9}, []int32{0, 5, 9}, 2, 2, 64, -9, 9, "cu_seqlens_q decreases at 1 (-5 after 0)"},
		{[]int32{0, 5, 9}, []int32{0, 5, 9}, -1, 0, 64, 9, 9, "heads must be positive, got -1"},
		{[]int32{0, 5, 9}, []int32{0, 5, 9}, 2, -2, 64, 9, 9, "kv heads must be positive, got -2"},
		{[]int32{0, 5, 9}, []int32{0, 5, 9}, 2, 2, 0, 9, 9, "head dim must be positive, got 0"},
		{[]int32{0, math.MaxInt32}, []int32{0, 5}, 2, 2, 64, math.MaxInt32, 5, "q has 2147483647×2×64 elements"},
		{[]int32{0, 5}, []int32{0, math.MaxInt32}, 8, 1, 64, 5, math.MaxInt32, "k has 2147483647×1×64 elements"},
		{[]int32{0, 5}, []int32{0, 5}, math.MaxInt, 1, math.MaxInt, 5, 5, "more than 32-bit offsets address"},
		{[]int32{0, 3}, []int32{0, 3}, 2, 2, 64, 4, 3, "cu_seqlens_q ends at 3, but there are 4 tokens"},
	} {
		_, err := VarlenShape(c.cuQ, c.cuK, c.totalQ, c.totalK, c.heads, c.kvHeads, c.dim)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("issue 46 item 2: VarlenShape(%v, %v, %d, %d, heads %d, kv %d, dim %d) = %v, want an error with %q",
				c.cuQ, c.cuK, c.totalQ, c.totalK, c.heads, c.kvHeads, c.dim, err, c.want)
		}
	}
	// The block mask checks the lengths before it allocates rows for them.
	v, err := CompileForwardVarlen(Options{Mask: "causal"}, 16)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []struct {
		cu    []int32
		heads int
	}{{[]int32{0, -5, -9}, 2}, {[]int32{0, 5, 9}, -1}, {[]int32{0, 5, 9}, math.MaxInt32}} {
		if _, err := v.BlockMask(VarlenInputs{CuSeqlensQ: in.cu, CuSeqlensK: in.cu}, in.heads); err == nil {
			t.Errorf("issue 46 item 2: BlockMask(cu %v, heads %d) accepted", in.cu, in.heads)
		}
	}
}

// FuzzVarlenShape: any cu_seqlens, heads, kv heads and dim give an error
// or a shape whose tensors fit 32-bit offsets, never a panic, and
// VarlenShape allocates nothing that grows with the lengths; a small accepted shape's block
// mask builds within memory proportional to its blocks.
func FuzzVarlenShape(f *testing.F) {
	enc := func(xs ...int32) []byte {
		b := make([]byte, 4*len(xs))
		for i, x := range xs {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
		}
		return b
	}
	f.Add(enc(0, 5, 9), enc(0, 5, 9), 2, 0, 64)
	f.Add(enc(0, -5, -9), enc(0, 5, 9), 2, 2, 64)
	f.Add(enc(0, 5, 9), enc(0, 5, 9), -1, 0, 64)
	f.Add(enc(0, math.MaxInt32), enc(0, 1), 1, 1, 1)
	f.Add(enc(0, 0, 0, 3), enc(0, 7, 7, 7), 4, 2, 16)
	var once sync.Once
	var v *ForwardVarlen
	f.Fuzz(func(t *testing.T, q, k []byte, heads, kvHeads, dim int) {
		dec := func(b []byte) []int32 {
			xs := make([]int32, len(b)/4)
			for i := range xs {
				xs[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
			}
			return xs
		}
		cuQ, cuK := dec(q), dec(k)
		last := func(cu []int32) int {
			if len(cu) == 0 {
				return 0
			}
			return int(cu[len(cu)-1])
		}
		totalQ, totalK := last(cuQ), last(cuK)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		sh, err := VarlenShape(cuQ, cuK, totalQ, totalK, heads, kvHeads, dim)
		runtime.ReadMemStats(&after)
		// TotalAlloc counts the whole process (the fuzzing coordinator's
		// traffic, an error's text): the bound is for allocations that
		// follow the lengths, which reach gigabytes for bad ones.
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Fatalf("VarlenShape allocated %d bytes", n)
		}
		if err != nil {
			return
		}
		kv := kvHeads
		if kv == 0 {
			kv = heads
		}
		for _, n := range []struct{ total, heads int }{{totalQ, heads}, {totalK, kv}} {
			if p, ok := productOK(n.total, n.heads, dim); !ok || p > math.MaxInt32 {
				t.Fatalf("accepted [%d, %d, %d], beyond 32-bit offsets", n.total, n.heads, dim)
			}
		}
		if sh.Batch != len(cuQ)-1 || sh.SeqQ < 1 || sh.SeqK < 1 || sh.Heads != heads || sh.KV() != kv || sh.Validate() != nil {
			t.Fatalf("shape %+v for cu_seqlens %v, %v, heads %d/%d, dim %d", sh, cuQ, cuK, heads, kvHeads, dim)
		}
		// A small accepted problem: the block mask builds, in memory
		// bounded by its rows and blocks.
		if sh.Batch*heads > 256 || sh.SeqQ > 4096 || sh.SeqK > 4096 || dim > 256 {
			return
		}
		once.Do(func() {
			var err error
			if v, err = CompileForwardVarlen(Options{Mask: "causal", Consts: map[string]string{"SPARSE_Q": "64", "SPARSE_K": "64", "BLOCK_M": "32", "BLOCK_N": "32"}}, 16); err != nil {
				t.Fatal(err)
			}
		})
		runtime.ReadMemStats(&before)
		bm, err := v.BlockMask(VarlenInputs{CuSeqlensQ: cuQ, CuSeqlensK: cuK}, heads)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("BlockMask of an accepted shape %+v: %v", sh, err)
		}
		blocks := (sh.SeqQ/64 + 1) * (sh.SeqK/64 + 1)
		if limit := uint64(1<<20 + 512*(sh.Batch*heads+1)*blocks); after.TotalAlloc-before.TotalAlloc > limit {
			t.Fatalf("BlockMask for %+v allocated %d bytes, more than %d", sh, after.TotalAlloc-before.TotalAlloc, limit)
		}
		_ = bm
	})
}

// productOK is launch.Product, restated so that the test does not trust
// the code under test.
func productOK(xs ...int) (int, bool) {
	p := 1
	for _, x := range xs {
		if x < 0 || x != 0 && p > math.MaxInt/x {
			return 0, false
		}
		p *= x
	}
	return p, true
}
