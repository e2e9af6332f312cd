package attention_test

import (
	"strings"
	"testing"

	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// TestDecodeGrids checks the split-KV kernels' grids, workspace shapes and
// geometry checks.
func TestDecodeGrids(t *testing.T) {
	attrs := map[string]int64{"BLOCK_M": 16, "BLOCK_N": 128, "HEAD_DIM": 128, "SPARSE_Q": 128, "SPARSE_K": 128, "MAX_SPLITS": 64}
	p := launch.Problem{Shape: launch.Shape{Batch: 8, Heads: 32, KVHeads: 8, SeqQ: 1, SeqK: 8192, Dim: 128}, Attrs: attrs, NumSplits: 4, Pack: 4}
	if g := attention.FlashFwdSplitKV.Grid(p); g != [3]int{1, 64, 4} {
		t.Errorf("flash_fwd_splitkv grid %v, want [1 64 4]", g)
	}
	if g := attention.FlashFwdCombine.Grid(p); g != [3]int{256, 1, 1} {
		t.Errorf("flash_fwd_combine grid %v, want [256 1 1]", g)
	}
	if n, err := attention.FlashFwdSplitKV.Extent("o_partial", p, nil); err != nil || n != 4*8*32*128 {
		t.Errorf("o_partial extent %d, %v", n, err)
	}
	// One counter per q tile at most: B·H·Sq, whatever the packing.
	if n, err := attention.FlashFwdSplitKV.Extent("split_counters", p, nil); err != nil || n != 8*32*1 {
		t.Errorf("split_counters extent %d, %v", n, err)
	}
	p.Shape.SeqQ, p.Pack, p.NumSplits = 7, 0, 0 // no packing, no split: flash_fwd's grid
	if g := attention.FlashFwdSplitKV.Grid(p); g != [3]int{1, 256, 1} {
		t.Errorf("unpacked grid %v, want [1 256 1]", g)
	}
	for _, c := range []struct{ bm, pack, sq, want int }{
		{16, 4, 128, 4}, {16, 1, 128, 16}, {64, 4, 128, 16}, {16, 3, 128, 4}, {64, 6, 128, 8}, {16, 32, 128, 0}, {64, 1, 32, 32}, {16, 1, 8, 8},
	} {
		if got := attention.QPerTile(c.bm, c.pack, c.sq); got != c.want {
			t.Errorf("QPerTile(%d, %d, %d) = %d, want %d", c.bm, c.pack, c.sq, got, c.want)
		}
	}
	p.Pack = 3 // does not divide the group of 4
	if err := attention.FlashFwdSplitKV.Check(p); err == nil || !strings.Contains(err.Error(), "PackGQA") {
		t.Errorf("pack 3 of 4: %v", err)
	}
	p.Pack, p.NumSplits = 4, 65
	if err := attention.FlashFwdCombine.Check(p); err == nil || !strings.Contains(err.Error(), "MAX_SPLITS") {
		t.Errorf("65 splits: %v", err)
	}
	// Merged in place: the split kernel alone, without sinks.
	if got := attention.SplitKVFused.Names(attention.VariantOptions{}); len(got) != 1 || got[0] != "flash_fwd_splitkv" {
		t.Errorf("fused variant kernels %v, want flash_fwd_splitkv alone", got)
	}
	if _, err := attention.SplitKVFused.Kernels(attention.VariantOptions{Sinks: true}); err == nil || !strings.Contains(err.Error(), "sinks") {
		t.Errorf("fused variant with sinks: %v, want an error", err)
	}
}
