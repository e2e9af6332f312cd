package blockmask

// Aux tensors in the analytic builder: when their data is given, a load
// of an aux tensor at an interval of indices is bounded by the data's
// smallest and largest value there (a range-minimum table), so a document
// mask doc[q_idx] == doc[kv_idx] classifies a rectangle at once wherever
// its query and key documents are apart (empty) or one and the same
// (full), and is exact at single positions like every other bound.

import (
	"fmt"
	"math/bits"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/tir"
)

// auxChunk is how many elements a range table's first level summarizes.
const auxChunk = 64

// auxTable is an aux tensor's data with a sparse table of its ranges:
// lv[k][i] is the hull of chunks i .. i+2^k-1 of auxChunk elements, so the
// range of any interval is two table reads and at most two partial chunks.
type auxTable struct {
	name   string
	vals   []int64
	lv     [][]ival
	errOOB error
}

func newAuxTable(name string, vals []int64) *auxTable {
	t := &auxTable{name: name, vals: vals,
		errOOB: notAnalyzable("it may read aux tensor %s (%d elements) out of bounds", name, len(vals))}
	n := (len(vals) + auxChunk - 1) / auxChunk
	if n == 0 {
		return t
	}
	first := make([]ival, n)
	for i := range first {
		first[i] = scan(vals[i*auxChunk : min((i+1)*auxChunk, len(vals))])
	}
	t.lv = append(t.lv, first)
	for k := 1; 1<<k <= n; k++ {
		prev, w := t.lv[k-1], 1<<(k-1)
		cur := make([]ival, n-(1<<k)+1)
		for i := range cur {
			a, b := prev[i], prev[i+w]
			cur[i] = ival{min(a.lo, b.lo), max(a.hi, b.hi)}
		}
		t.lv = append(t.lv, cur)
	}
	return t
}

func scan(xs []int64) ival {
	v := ival{xs[0], xs[0]}
	for _, x := range xs[1:] {
		v.lo, v.hi = min(v.lo, x), max(v.hi, x)
	}
	return v
}

// hull is the range of the data over [lo, hi], 0 <= lo <= hi < len.
func (t *auxTable) hull(lo, hi int64) ival {
	c0, c1 := lo/auxChunk, hi/auxChunk
	if c1-c0 <= 1 {
		return scan(t.vals[lo : hi+1])
	}
	v := scan(t.vals[lo : (c0+1)*auxChunk])
	w := scan(t.vals[c1*auxChunk : hi+1])
	v = ival{min(v.lo, w.lo), max(v.hi, w.hi)}
	// Whole chunks c0+1 .. c1-1: two overlapping spans of 2^k chunks.
	a, b := c0+1, c1-1
	k := bits.Len64(uint64(b-a+1)) - 1
	x, y := t.lv[k][a], t.lv[k][b-(1<<k)+1]
	return ival{min(v.lo, x.lo, y.lo), max(v.hi, x.hi, y.hi)}
}

// auxData makes the tables of the aux tensors inst reads, from vals (by
// name, as EvaluateCPU takes them, checked against their declared shapes
// for sh). Only i32 and bool data are bounded; other element types decline.
func auxData(inst *lang.ModInst, sh Shape, vals map[string]any) ([]*auxTable, error) {
	var out []*auxTable
	sz := lang.Sizes{Batch: sh.B, Heads: sh.H, SeqQ: sh.SeqQ, SeqK: sh.SeqK}
	for _, p := range inst.AuxParams() {
		if p.Elem != tir.I32 && p.Elem != tir.I1 {
			return nil, notAnalyzable("mask %s reads aux tensor %s of %s: only i32 and bool data are bounded", inst, p.Name, p.Elem)
		}
		v, ok := lookup(vals, p.Name)
		if !ok {
			return nil, fmt.Errorf("blockmask: mask %s reads aux tensor %s (%s): pass it in aux[%q] (e.g. a []int32)", inst, p.Name, p.Type(), p.Name)
		}
		buf, shape, err := toBuffer(p.Name, p.Elem, v)
		if err == nil {
			err = p.CheckShape(shape, len(buf.Vals), sz)
		}
		if err != nil {
			return nil, fmt.Errorf("blockmask: mask %s: %w", inst, err)
		}
		xs := make([]int64, len(buf.Vals))
		for i, x := range buf.Vals {
			xs[i] = int64(x)
		}
		out = append(out, newAuxTable(p.Name, xs))
	}
	return out, nil
}
