package flash

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fac-compiler/fac/blockmask"
)

// classes are a varlenRows direction's classes of sequence b, head h: nr
// rows of nc blocks.
func (r *varlenRows) classes(b, heads, h, nr, nc int) []blockmask.Class {
	out := make([]blockmask.Class, nr*nc)
	for i := range nr {
		row := int(r.rowStart[b*heads+h]) + i
		list := r.indices[r.listStart[row]:]
		for j, x := range list[:r.counts[row]+r.full[row]] {
			c := blockmask.Full
			if j < int(r.counts[row]) {
				c = blockmask.Partial
			}
			if out[i*nc+int(x)] != blockmask.Empty {
				panic(fmt.Sprintf("block %d listed twice in row %d", x, row))
			}
			out[i*nc+int(x)] = c
		}
	}
	return out
}

// TestVarlenBlockMaskAgreesPerSequence checks a varlen block mask, both
// directions, against each sequence's own block mask (blockmask.Build for
// its lengths, b and h): a block has the same class, except that a block
// at a sequence's end cut from the longest lengths' mask may stay partial
// where its own mask says full or empty (never the other way). Masks that
// read neither b nor the lengths (cut), the lengths (built per length),
// h, and b (all partial); empty sequences; blocks of 64 × 128.
func TestVarlenBlockMaskAgreesPerSequence(t *testing.T) {
	src := map[string]string{"m.fa": `
mask head_band(b, h, q_idx, kv_idx) { return q_idx >= kv_idx && q_idx - kv_idx < 90 * (h + 1) }
mask by_seq(b, h, q_idx, kv_idx) { return q_idx >= kv_idx + b }
`}
	rng := rand.New(rand.NewPCG(5, 5))
	lensQ, lensK := []int{0, 1, 64, 65, 500, 0, 300, 700, 129, 3}, []int{4, 0, 64, 200, 500, 0, 301, 700, 128, 3}
	for i := range 20 {
		n := rng.IntN(900)
		lensQ, lensK = append(lensQ, n), append(lensK, n+rng.IntN(3)*rng.IntN(100)-i%2*min(n, 37))
	}
	cum := func(l []int) []int32 {
		out := []int32{0}
		for _, n := range l {
			out = append(out, out[len(out)-1]+int32(n))
		}
		return out
	}
	doc := make([]int32, 1000)
	for i := range doc {
		doc[i] = int32(i / 77)
	}
	const heads, bq, bk = 3, 64, 128
	for _, mask := range []string{"causal", "sliding_window(100, 10)", "document", "causal_bottom_right", "head_band", "by_seq", "none"} {
		f, err := CompileForwardVarlen(Options{Mask: mask, Sources: src, Consts: map[string]string{"SPARSE_Q": "64"}}, 16)
		if err != nil {
			t.Fatal(err)
		}
		in := VarlenInputs{CuSeqlensQ: cum(lensQ), CuSeqlensK: cum(lensK)}
		if len(f.AuxTensors()) > 0 {
			in.Aux = map[string]any{"doc": doc}
		}
		m, err := f.BlockMask(in, heads)
		if err != nil {
			t.Fatal(err)
		}
		if m.blockQ != bq || m.blockK != bk {
			t.Fatalf("blocks %d×%d", m.blockQ, m.blockK)
		}
		nseq := len(lensQ)
		cut, loosened := 0, 0
		for b := range nseq {
			sq, sk := lensQ[b], lensK[b]
			nq, nk := cdiv(sq, bq), cdiv(sk, bk)
			var own *blockmask.BlockMask
			if sq > 0 && sk > 0 && f.f.res.Mask != nil {
				if own, _, err = blockmask.Build(f.f.res.Program, f.f.res.Mask, blockmask.Shape{B: nseq, H: heads, SeqQ: sq, SeqK: sk},
					blockmask.Options{BlockQ: bq, BlockK: bk}, in.modValues()); err != nil {
					t.Fatal(err)
				}
			}
			for h := range heads {
				kv := m.kv.classes(b, heads, h, nq, nk)
				q := m.q.classes(b, heads, h, nk, nq)
				for qb := range nq {
					for kb := range nk {
						got, tr := kv[qb*nk+kb], q[kb*nq+qb]
						if got != tr {
							t.Fatalf("%s seq %d h %d block (%d, %d): kv lists say %v, q lists %v", mask, b, h, qb, kb, got, tr)
						}
						want := blockmask.Full
						switch {
						case mask == "by_seq":
							want = blockmask.Partial // reads b: all partial
						case own != nil:
							want = own.Class(b%own.B, h%own.H, qb, kb)
						}
						edge := (qb == nq-1 && sq%bq != 0) || (kb == nk-1 && sk%bk != 0)
						switch {
						case got == want:
						case got == blockmask.Partial && edge:
							loosened++
						default:
							t.Fatalf("%s seq %d (%d×%d) h %d block (%d, %d): %v, its own block mask says %v", mask, b, sq, sk, h, qb, kb, got, want)
						}
						cut++
					}
				}
			}
		}
		if mask == "by_seq" && m.EvaluatedSequences() == 0 {
			t.Errorf("%s: no sequence evaluated", mask)
		}
		t.Logf("%s: %d blocks checked, %d edge blocks left partial", mask, cut, loosened)
	}
}
