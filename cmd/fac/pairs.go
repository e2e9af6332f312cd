package main

import (
	"strings"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/lang"
)

// keptPairs counts the (q, kv) pairs the mask keeps for one head at SeqQ =
// SeqK = s, for TFLOPS. The stdlib's masks are counted a row at a time
// from the run of keys each row keeps, and document from how often each
// id occurs: O(s), so `fac bench --seqlen 32768` does not spend seconds
// (1e9 pairs a mask) on the CPU. Other masks are counted through their
// block mask (fac.Forward.CountPairs: full blocks by area, partial blocks
// row by row, or by evaluating them where the mask reads aux tensors):
// O(blocks), not O(s²).
func keptPairs(fwd *fac.Forward, s int, aux map[string]any) (int64, error) {
	doc, _ := aux["doc"].([]int32)
	if n, ok := keptPairsFast(fwd.Mask(), s, doc); ok {
		return n, nil
	}
	return fwd.CountPairs(fac.Shape{Batch: 1, Heads: 1, KVHeads: 1, SeqQ: s, SeqK: s, Dim: 1}, aux)
}

// keptPairsFast counts in O(s) where the mask is one of the stdlib's; ok
// is false for any other mask, or arguments whose i32 arithmetic in the
// mask could wrap (the formulas are exact integers).
func keptPairsFast(m *lang.ModInst, s int, doc []int32) (n int64, ok bool) {
	if m == nil {
		return int64(s) * int64(s), true
	}
	if !strings.HasPrefix(m.Decl.Pos.Filename, "stdlib/") {
		return 0, false
	}
	var args []int64
	for _, a := range m.Args {
		if a.Kind != lang.CInt || a.I < -1<<30 || a.I > 1<<30 {
			return 0, false
		}
		args = append(args, a.I)
	}
	S := int64(s)
	// rows sums, over the query rows i, the keys [lo, hi] that row keeps,
	// clipped to the sequence.
	rows := func(span func(i int64) (lo, hi int64)) int64 {
		var n int64
		for i := range S {
			lo, hi := span(i)
			lo, hi = max(lo, 0), min(hi, S-1)
			if hi >= lo {
				n += hi - lo + 1
			}
		}
		return n
	}
	switch {
	case m.Name() == "none":
		return S * S, true
	case m.Name() == "causal", m.Name() == "causal_bottom_right": // the same when SeqQ = SeqK
		return rows(func(i int64) (int64, int64) { return 0, i }), true
	case m.Name() == "sliding_window" && len(args) == 2:
		l, r := args[0], args[1]
		return rows(func(i int64) (int64, int64) { return i - l, i + r }), true
	case m.Name() == "prefix_lm" && len(args) == 1:
		p := args[0]
		// kv < p, or kv <= i: the keys [0, max(p-1, i)].
		return rows(func(i int64) (int64, int64) { return 0, max(p-1, i) }), true
	case m.Name() == "chunked" && len(args) == 1 && args[0] > 0:
		c := args[0]
		// kv/c <= i/c: the keys before the end of i's chunk.
		return rows(func(i int64) (int64, int64) { return 0, (i/c+1)*c - 1 }), true
	case m.Name() == "document" && len(doc) >= s:
		// Each row keeps the keys with its id, wherever they are.
		count := map[int32]int64{}
		for _, d := range doc[:s] {
			count[d]++
		}
		var n int64
		for _, c := range count {
			n += c * c
		}
		return n, true
	}
	return 0, false
}
