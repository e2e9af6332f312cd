package core

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// A mask's index compares (indexCmp) keep, in each row a thread holds, a
// prefix or a suffix of the thread's columns: its offsets along the index's
// dimension are o0 + P·(k / G) + k % G for k < n (the wgmma and mma.sync
// accumulators: pairs of columns every 8). Such a compare is lowered as a
// word per row and 32 columns, bit k set where column k is kept: a handful
// of integer instructions a row, then one bit test per element, which
// ptxas turns into R2P (seven predicates an instruction; FlashAttention's
// mask_r2p does the same from CuTe). The conjunction of a window's two
// bounds (and the sequence end) then costs one AND a word, not one a
// column, and its select takes one predicate (maskSelect).

// bitTile is an i1 tile held as bits: register r is bit bit[r] of word[r].
type bitTile struct {
	word []value.Value
	bit  []int
}

// offsetRun is the pattern of a thread's distinct offsets along one
// dimension: o0 + p·(k / g) + k % g for k < n.
type offsetRun struct {
	o0, g, p, n int
	k           map[int]int // offset → k
}

// threadRun finds the run of lout's register offsets along d, or reports
// that they follow no such pattern (or are too few to be worth words).
func threadRun(lout *Linear, d int) (offsetRun, bool) {
	var offs []int
	for r := range lout.NumRegs() {
		offs = append(offs, lout.RegOffset(r)[d])
	}
	slices.Sort(offs)
	offs = slices.Compact(offs)
	n := len(offs)
	if n < 8 {
		return offsetRun{}, false
	}
	g := 1
	for g < n && offs[g] == offs[0]+g {
		g++
	}
	p := g
	if g < n {
		p = offs[g] - offs[0]
	}
	if n%g != 0 || p < g || bits.OnesCount(uint(p)) != 1 {
		return offsetRun{}, false
	}
	run := offsetRun{o0: offs[0], g: g, p: p, n: n, k: map[int]int{}}
	for k, o := range offs {
		if o != offs[0]+p*(k/g)+k%g {
			return offsetRun{}, false
		}
		run.k[o] = k
	}
	return run, true
}

// thresholdOf writes an integer compare of an index j with a value x as
// j < x + delta or its negation: cmp(j, x) when indexSide is 0, cmp(x, j)
// when 1. ok is false for eq and ne.
func thresholdOf(pred string, indexSide int) (delta int64, negate, ok bool) {
	if indexSide == 1 { // cmp(x, j) is cmp'(j, x) with the mirrored predicate
		pred = map[string]string{"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}[pred]
	}
	switch pred {
	case "lt":
		return 0, false, true
	case "le":
		return 1, false, true
	case "gt":
		return 1, true, true
	case "ge":
		return 0, true, true
	}
	return 0, false, false
}

// bitCmp lowers indexCmp's compare as words (see above): ts are x - base
// per register, start the index's arange start, d its dimension. It
// returns nil when the thread's offsets have no run or the predicate is
// not an order.
func (em *Emitter) bitCmp(op *tir.Op, lout *Linear, d int, start int64, indexSide int, ts []value.Value) []value.Value {
	run, ok := threadRun(lout, d)
	delta, negate, ok2 := thresholdOf(op.IdentAttr("pred"), indexSide)
	if !ok || !ok2 || start < -1<<20 || start > 1<<20 {
		return nil
	}
	b := em.b
	nw := (run.n + 31) / 32
	// t clamped to where the count saturates, so that nothing below wraps.
	first := start + int64(run.o0)
	last := first + int64(run.p*(run.n/run.g-1)+run.g-1)
	words := map[value.Value][]value.Value{}
	wordsOf := func(t value.Value) []value.Value {
		if ws, ok := words[t]; ok {
			return ws
		}
		tc := em.imin(em.imax(t, ConstI32(first-2)), ConstI32(last+2))
		// u: kept offsets are those below first + u; count how many.
		u := em.imax(b.NewAdd(tc, ConstI32(delta-first)), ConstI32(0))
		q := b.NewLShr(u, ConstI32(int64(bits.TrailingZeros(uint(run.p)))))
		rem := b.NewAnd(u, ConstI32(int64(run.p-1)))
		var count value.Value = b.NewAdd(b.NewMul(q, ConstI32(int64(run.g))), em.imin(rem, ConstI32(int64(run.g))))
		count = em.imin(count, ConstI32(int64(run.n)))
		ws := make([]value.Value, nw)
		for w := range ws {
			c := count
			if w > 0 {
				c = em.imax(b.NewSub(count, ConstI32(int64(32*w))), ConstI32(0))
			}
			ws[w] = em.lowBits(c)
			if negate {
				ws[w] = b.NewXor(ws[w], ConstI32(-1))
			}
		}
		words[t] = ws
		return ws
	}
	bt := &bitTile{word: make([]value.Value, len(ts)), bit: make([]int, len(ts))}
	for r, t := range ts {
		k := run.k[lout.RegOffset(r)[d]]
		bt.word[r], bt.bit[r] = wordsOf(t)[k/32], k%32
	}
	return em.keepBits(op.Result(), lout, bt)
}

// lowBits is a word with its c lowest bits set, c in [0, 32] (a shift by
// 32 is poison in LLVM).
func (em *Emitter) lowBits(c value.Value) value.Value {
	b := em.b
	part := b.NewSub(b.NewShl(ConstI32(1), b.NewAnd(c, ConstI32(31))), ConstI32(1))
	return b.NewSelect(b.NewICmp(enum.IPredUGE, c, ConstI32(32)), ConstI32(-1), part)
}

// keepBits records bt as v's words in lout and returns v's registers: one
// bit test each.
func (em *Emitter) keepBits(v *tir.Value, lout *Linear, bt *bitTile) []value.Value {
	if em.bitTiles == nil {
		em.bitTiles = map[*tir.Value]map[string]*bitTile{}
	}
	if em.bitTiles[v] == nil {
		em.bitTiles[v] = map[string]*bitTile{}
	}
	em.bitTiles[v][lout.key()] = bt
	out := make([]value.Value, len(bt.word))
	for r := range out {
		out[r] = em.bitTest(bt.word[r], bt.bit[r])
	}
	return out
}

// bitTest is bit k of word w as a predicate. In inline asm: LLVM would
// turn the AND with 1 << k into a shift, an AND with 1 and a compare
// (three instructions an element), where ptxas makes one predicate
// instruction of an AND with a constant (or R2P of several).
func (em *Emitter) bitTest(w value.Value, k int) value.Value {
	return em.pure(types.I1, fmt.Sprintf(bitTestAsm, uint32(1)<<k), "=b,r", w)
}

// bitTestAsm is bitTest's text; the simulator reads the mask from it.
const bitTestAsm = "{\n\t.reg .b32 t;\n\tand.b32 t, $1, %#x;\n\tsetp.ne.b32 $0, t, 0;\n\t}"

// bitLogic lowers and, or, xor and not of i1 tiles whose operands are
// held as bits in lout with the same bit of each register: on the words.
// It returns nil otherwise.
func (em *Emitter) bitLogic(op *tir.Op, lout *Linear, wants []Layout) []value.Value {
	k := op.Kind
	if op.Result().Type.Elem != tir.I1 || op.Result().Type.IsScalar() ||
		(k != tir.OpAnd && k != tir.OpOr && k != tir.OpXor && k != tir.OpNot) {
		return nil
	}
	args := make([]*bitTile, len(op.Args))
	for i, a := range op.Args {
		if !em.Lin(wants[i], a.Type.Shape).equal(lout) {
			return nil
		}
		args[i] = em.bitTiles[a][lout.key()]
		if args[i] == nil || (i > 0 && !slices.Equal(args[i].bit, args[0].bit)) {
			return nil
		}
	}
	b := em.b
	type pair struct{ x, y value.Value }
	done := map[pair]value.Value{}
	bt := &bitTile{word: make([]value.Value, len(args[0].word)), bit: args[0].bit}
	for r := range bt.word {
		x := args[0].word[r]
		var y value.Value
		if len(args) > 1 {
			y = args[1].word[r]
		}
		w, ok := done[pair{x, y}]
		if !ok {
			switch k {
			case tir.OpAnd:
				w = b.NewAnd(x, y)
			case tir.OpOr:
				w = b.NewOr(x, y)
			case tir.OpXor:
				w = b.NewXor(x, y)
			default:
				w = b.NewXor(x, ConstI32(-1))
			}
			done[pair{x, y}] = w
		}
		bt.word[r] = w
	}
	return em.keepBits(op.Result(), lout, bt)
}

// imin and imax are i32 min and max (as tir's).
func (em *Emitter) imin(x, y value.Value) value.Value { return em.binary(tir.OpMin, tir.I32, x, y) }
func (em *Emitter) imax(x, y value.Value) value.Value { return em.binary(tir.OpMax, tir.I32, x, y) }
