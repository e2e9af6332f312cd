package flash

import (
	"errors"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/runtime/gpu"
)

// classIn is the class of block (qb, kb) of row (b, h) in bm's kv lists.
func classIn(bm *blockmask.BlockMask, b, h, qb, kb int) blockmask.Class {
	counts, idx, fullCounts, fullIdx := bm.Lists(false)
	row := (b*bm.H+h)*bm.NumQ + qb
	w, fw := len(idx)/len(counts), len(fullIdx)/len(fullCounts)
	for i := 0; i < int(fullCounts[row]); i++ {
		if int(fullIdx[row*fw+i]) == kb {
			return blockmask.Full
		}
	}
	for i := 0; i < int(counts[row]); i++ {
		if int(idx[row*w+i]) == kb {
			return blockmask.Partial
		}
	}
	return blockmask.Empty
}

// TestPackBlockMaskUnion checks PackGQA's block mask against the mask
// itself, pair by pair: a kv head's block is full exactly when every
// query head of its group keeps every in-bounds pair of it, empty exactly
// when none keeps any.
func TestPackBlockMaskUnion(t *testing.T) {
	const B, H, Hkv, Sq, Sk, blk = 2, 8, 2, 150, 333, 32
	keep := func(b, h, q, kv int) bool {
		// A window per head, shifted by batch; head 3 keeps everything.
		return h == 3 || (kv <= q+b && q-kv < 8+13*h)
	}
	bm, err := blockmask.BruteForceFunc(blockmask.Shape{B: B, H: H, SeqQ: Sq, SeqK: Sk}, blockmask.Options{BlockQ: blk, BlockK: blk}, keep)
	if err != nil {
		t.Fatal(err)
	}
	if bm.H != H {
		t.Fatalf("block mask has %d heads, want %d", bm.H, H)
	}
	group := H / Hkv
	pm, err := packBlockMask(bm, group, Hkv)
	if err != nil {
		t.Fatal(err)
	}
	if pm.B != B || pm.H != Hkv || pm.NumQ != bm.NumQ || pm.NumK != bm.NumK {
		t.Fatalf("packed block mask %d×%d×%d×%d", pm.B, pm.H, pm.NumQ, pm.NumK)
	}
	seen := map[blockmask.Class]int{}
	for b := range B {
		for hk := range Hkv {
			for qb := range bm.NumQ {
				for kb := range bm.NumK {
					all, any := true, false
					for h := hk * group; h < (hk+1)*group; h++ {
						for q := qb * blk; q < min(Sq, (qb+1)*blk); q++ {
							for kv := kb * blk; kv < min(Sk, (kb+1)*blk); kv++ {
								k := keep(b, h, q, kv)
								all = all && k
								any = any || k
							}
						}
					}
					want := blockmask.Partial
					switch {
					case all:
						want = blockmask.Full
					case !any:
						want = blockmask.Empty
					}
					if got := classIn(pm, b, hk, qb, kb); got != want {
						t.Fatalf("b=%d hk=%d block (%d, %d): %v, want %v", b, hk, qb, kb, got, want)
					}
					seen[want]++
				}
			}
		}
	}
	if len(seen) != 3 {
		t.Errorf("classes seen: %v, want all three", seen)
	}
	// Shared over heads, or nothing packed: the block mask itself.
	for _, c := range []struct{ pack, hkv int }{{1, H}, {4, 2}} {
		in := bm
		if c.pack > 1 {
			if in, err = blockmask.BruteForceFunc(blockmask.Shape{B: B, H: 1, SeqQ: Sq, SeqK: Sk}, blockmask.Options{BlockQ: blk, BlockK: blk},
				func(b, h, q, kv int) bool { return kv <= q }); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := packBlockMask(in, c.pack, c.hkv); err != nil || out != in {
			t.Errorf("pack %d: got a new block mask (%v)", c.pack, err)
		}
	}
	if _, err := packBlockMask(bm, 3, 2); err == nil {
		t.Error("8 heads packed 3 by 2 kv heads: no error")
	}
}

// TestPlanFallback: a split-KV plan whose kernels the device cannot have
// (a bundle built with --num-splits 1, no llc) falls back to flash_fwd
// alone and says why; asked to split, the call fails saying what to add;
// any other error, and a device that has the kernels, leave the plan.
func TestPlanFallback(t *testing.T) {
	sh := Shape{Batch: 1, Heads: 8, KVHeads: 2, SeqQ: 1, SeqK: 8192, Dim: 64}
	missing := func(r *compiler.Result) error {
		return &gpu.UnavailableError{Kernel: r.Kernel, Err: errors.New("no llc")}
	}
	for _, tc := range []struct {
		name   string
		splits int
		have   func(*compiler.Result) error
		want   string // "" the plan as it was, "alone" flash_fwd alone, else an error
	}{
		{"have", 0, func(*compiler.Result) error { return nil }, ""},
		{"missing", 0, missing, "alone"},
		{"forced", 4, missing, "bundle the split-KV kernels"},
		{"other", 0, func(*compiler.Result) error { return errors.New("out of memory") }, "out of memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := CompileForward(Options{Mask: "causal_bottom_right", DType: "bf16", NumSplits: tc.splits}, 64)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := f.Plan(sh, 132)
			if err != nil || !plan.SplitKV {
				t.Fatalf("plan %v, %v: want split-KV", plan, err)
			}
			got, err := f.withFallback(plan, tc.have)
			switch tc.want {
			case "":
				if err != nil || got != plan {
					t.Errorf("got %v, %v; want the plan unchanged", got, err)
				}
			case "alone":
				if err != nil || got.SplitKV || got.NumSplits != 1 || !strings.Contains(got.Fallback, "flash_fwd_splitkv") ||
					!strings.Contains(got.String(), "no split-KV") {
					t.Errorf("got %v (%q), %v; want flash_fwd alone naming the missing kernel", got, got.Fallback, err)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err %v, want one containing %q", err, tc.want)
				}
			}
		})
	}
}
