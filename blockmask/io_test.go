package blockmask

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/internal/npy"
)

// sample builds a small mask with B=1, H=3 (per-head windows), partial and
// full blocks, and sequence ends inside blocks.
func sample(t *testing.T) *BlockMask {
	t.Helper()
	bm, err := BruteForceFunc(Shape{B: 1, H: 3, SeqQ: 70, SeqK: 45}, Options{BlockQ: 16, BlockK: 8}, func(b, h, q, kv int) bool {
		return kv <= q && q-kv < 20*(h+1)
	})
	if err != nil {
		t.Fatal(err)
	}
	return bm
}

// sampleFull is sample with FlexAttention's full-width index rows.
func sampleFull(t *testing.T) *BlockMask {
	t.Helper()
	bm, err := sample(t).WithWidths(6, 5)
	if err != nil {
		t.Fatal(err)
	}
	return bm
}

func TestSaveLoadRoundTrip(t *testing.T) {
	bm := sample(t)
	if err := bm.Validate(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bm")
	if err := bm.Save(dir); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(bm) {
		t.Fatalf("Load(Save(x)) != x: %s", Diff(got, bm))
	}
	// Matching sequence lengths may be given too; different ones are
	// refused. Block sizes are the json's: the arguments are for sets
	// without one.
	if got, err := Load(dir, 70, 45, 128, 128); err != nil || got.BlockQ != 16 || got.BlockK != 8 {
		t.Fatal(err)
	}
	if _, err := Load(dir, 71, 0, 0, 0); err == nil || !strings.Contains(err.Error(), "sequence length q is 70, but 71 was asked for") {
		t.Errorf("conflicting size: %v", err)
	}
	// Without the json (as from PyTorch) the sizes come from the arguments.
	os.Remove(filepath.Join(dir, fileMeta))
	if _, err := Load(dir, 0, 0, 0, 0); err == nil || !strings.Contains(err.Error(), "give the sequence lengths") {
		t.Errorf("no json, no sizes: %v", err)
	}
	got, err = Load(dir, 70, 45, 16, 8)
	if err != nil || !got.Equal(bm) {
		t.Fatalf("no json: %v %s", err, Diff(got, bm))
	}
	// Only the kv lists (create_block_mask's): the q lists are computed.
	for _, f := range []string{fileQNum, fileQIdx, fileFullQNum, fileFullQIdx} {
		os.Remove(filepath.Join(dir, f))
	}
	got, err = Load(dir, 70, 45, 16, 8)
	if err != nil || !got.Equal(bm) {
		t.Fatalf("kv lists only: %v %s", err, Diff(got, bm))
	}
}

// TestLoadHandMade loads a hand-written kv set without full blocks and
// with junk in the slots past the counts.
func TestLoadHandMade(t *testing.T) {
	dir := t.TempDir()
	// SeqQ = SeqK = 3 blocks of 4 -> 3×3 blocks; causal, all partial.
	writeI32(t, dir, fileKVNum, []int{1, 1, 3}, []int32{1, 2, 3})
	writeI32(t, dir, fileKVIdx, []int{1, 1, 3, 3}, []int32{0, -1, -1, 1, 0, 7, 2, 0, 1})
	bm, err := Load(dir, 12, 12, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := NewGridMust(t, 1, 1, 12, 12, 4, 4)
	for q := range 3 {
		for k := 0; k <= q; k++ {
			want.Set(0, 0, q, k, Partial)
		}
	}
	wbm, _ := FromClasses(want)
	if !bm.Equal(wbm) {
		t.Fatalf("hand-made: %s", Diff(bm, wbm))
	}
	if bm.KVIndices[3] != 0 || bm.KVIndices[4] != 1 || bm.KVIndices[5] != 2 {
		t.Errorf("row not rewritten in FlexAttention's layout: %v", bm.KVIndices[3:6])
	}
}

func NewGridMust(t *testing.T, b, h, sq, sk, bq, bk int) *Grid {
	g, err := NewGrid(b, h, sq, sk, bq, bk)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func writeI32(t *testing.T, dir, name string, shape []int, vals []int32) {
	t.Helper()
	b, err := npy.EncodeI32(shape, vals)
	if err != nil {
		t.Fatal(err)
	}
	if err := npy.WriteFile(filepath.Join(dir, name), b); err != nil {
		t.Fatal(err)
	}
}

// TestLoadRejects corrupts one file of a saved set per case and checks the
// error names the file and the offending value.
func TestLoadRejects(t *testing.T) {
	bm := sampleFull(t) // B=1 H=3, NumQ=5, NumK=6, full-width rows
	cases := []struct {
		name    string
		corrupt func(dir string)
		want    string
	}{
		{"wrong shape", func(dir string) {
			writeI32(t, dir, fileKVIdx, []int{1, 3, 5, 7}, make([]int32, 105))
		}, "kv_indices.npy: shape [1 3 5 7], want [1 3 5 W] with W from 1 to 6"},
		{"full lists of another width", func(dir string) {
			writeI32(t, dir, fileFullKVIdx, []int{1, 3, 5, 5}, make([]int32, 75))
		}, "full_kv_indices.npy: shape [1 3 5 5], want [1 3 5 6] (as kv_indices.npy)"},
		{"row too short for its count", func(dir string) {
			// Rows of 1 cannot hold the lists of 2 partial blocks.
			idx := make([]int32, 15)
			for r := range 15 {
				idx[r] = bm.KVIndices[r*6]
			}
			writeI32(t, dir, fileKVIdx, []int{1, 3, 5, 1}, idx)
			for _, f := range []string{fileFullKVNum, fileFullKVIdx, fileQNum, fileQIdx, fileFullQNum, fileFullQIdx} {
				os.Remove(filepath.Join(dir, f))
			}
		}, "is out of range [0, 1] (its index rows hold 1 of the 6 blocks)"},
		{"wrong count dims", func(dir string) {
			writeI32(t, dir, fileKVNum, []int{1, 3, 4}, make([]int32, 12))
		}, "kv_num_blocks.npy: shape [1 3 4], want [B, H, 5]"},
		{"index out of range", func(dir string) {
			idx := append([]int32(nil), bm.KVIndices...)
			idx[(0*5+2)*6+0] = 99 // h=0, q block 2, slot 0 (valid: count > 0)
			writeI32(t, dir, fileKVIdx, []int{1, 3, 5, 6}, idx)
		}, "kv_indices.npy[0,0,2,0] = 99 is out of range [0, 6)"},
		{"negative count", func(dir string) {
			num := append([]int32(nil), bm.KVNumBlocks...)
			num[1*5+3] = -1
			writeI32(t, dir, fileKVNum, []int{1, 3, 5}, num)
		}, "kv_num_blocks.npy[0,1,3] = -1 is out of range [0, 6]"},
		{"count too large", func(dir string) {
			num := append([]int32(nil), bm.FullQNumBlocks...)
			num[2] = 6
			writeI32(t, dir, fileFullQNum, []int{1, 3, 6}, num)
		}, "full_q_num_blocks.npy[0,0,2] = 6 is out of range [0, 5]"},
		{"repeat", func(dir string) {
			num := append([]int32(nil), bm.KVNumBlocks...)
			idx := append([]int32(nil), bm.KVIndices...)
			r := 2*5 + 4 // h=2, q block 4
			num[r] = 2
			idx[r*6], idx[r*6+1] = 1, 1
			writeI32(t, dir, fileKVNum, []int{1, 3, 5}, num)
			writeI32(t, dir, fileKVIdx, []int{1, 3, 5, 6}, idx)
		}, "kv_indices.npy[0,2,4,1] = 1 repeats kv_indices.npy[0,2,4,0]"},
		{"partial and full overlap", func(dir string) {
			// q block 0 of h=0: kv block 0 is partial; list it as full too.
			num := append([]int32(nil), bm.FullKVNumBlocks...)
			idx := append([]int32(nil), bm.FullKVIndices...)
			num[0], idx[0] = 1, 0
			writeI32(t, dir, fileFullKVNum, []int{1, 3, 5}, num)
			writeI32(t, dir, fileFullKVIdx, []int{1, 3, 5, 6}, idx)
		}, "full_kv_indices.npy[0,0,0,0] = 0 is also listed in kv_indices.npy"},
		{"q lists disagree", func(dir string) {
			num := append([]int32(nil), bm.QNumBlocks...)
			num[0]--
			writeI32(t, dir, fileQNum, []int{1, 3, 6}, num)
		}, "q_indices.npy is not the transpose of kv_indices.npy"},
		{"pair half missing", func(dir string) {
			os.Remove(filepath.Join(dir, fileFullKVIdx))
		}, "full_kv_num_blocks.npy is present but full_kv_indices.npy is missing"},
		{"float dtype", func(dir string) {
			b, _ := npy.EncodeF32([]int{1, 3, 5}, make([]float32, 15))
			npy.WriteFile(filepath.Join(dir, fileKVNum), b)
		}, "kv_num_blocks.npy: dtype <f4, want an integer type"},
		{"not npy", func(dir string) {
			os.WriteFile(filepath.Join(dir, fileKVIdx), []byte("hello"), 0o644)
		}, "kv_indices.npy: "},
		{"bad json", func(dir string) {
			os.WriteFile(filepath.Join(dir, fileMeta), []byte(`{"seq_lengths": [70, 45], "block_size": [0, 8]}`), 0o644)
		}, "block_mask.json: block size q is 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := bm.Save(dir); err != nil {
				t.Fatal(err)
			}
			c.corrupt(dir)
			got, err := Load(dir, 0, 0, 0, 0)
			if err == nil {
				t.Fatalf("loaded a corrupt set: %+v", got)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q\n does not contain %q", err, c.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	bm := sampleFull(t)
	cases := []struct {
		name   string
		break_ func(b *BlockMask)
		want   string
	}{
		{"filler out of range", func(b *BlockMask) { b.KVIndices[len(b.KVIndices)-1] = 6 }, "kv_indices[0,2,4,5] = 6 is out of range [0, 6) (a filler slot"},
		{"short tensor", func(b *BlockMask) { b.QIndices = b.QIndices[1:] }, "q_indices has 89 elements, want B*H*6*5 = 90"},
		{"bad NumQ", func(b *BlockMask) { b.NumQ = 4 }, "NumQ=4 NumK=6, but SeqQ=70 SeqK=45"},
		{"no width", func(b *BlockMask) { b.KVWidth = 0 }, "KVWidth=0 QWidth=5, want 1 to NumK=6"},
		{"width past NumQ", func(b *BlockMask) { b.QWidth = 6 }, "KVWidth=6 QWidth=6, want 1 to NumK=6 and 1 to NumQ=5"},
		{"count past the width", func(b *BlockMask) {
			c, err := b.WithWidths(0, 0)
			if err != nil {
				t.Fatal(err)
			}
			*b = *c
			b.KVNumBlocks[0] = int32(b.KVWidth + 1)
		}, "kv_num_blocks[0,0,0] = 6 is out of range [0, 5] (its index rows hold 5 of the 6 blocks)"},
		{"transpose", func(b *BlockMask) {
			for i, n := range b.FullQNumBlocks {
				if n > 0 {
					b.FullQNumBlocks[i]--
					return
				}
			}
		}, "full_q_indices is not the transpose of full_kv_indices"},
	}
	for _, c := range cases {
		b := cloneBM(bm)
		c.break_(b)
		if err := b.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := bm.Save(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	b := cloneBM(bm)
	b.KVNumBlocks[0] = 9
	if err := b.Save(t.TempDir()); err == nil {
		t.Errorf("saved an invalid mask")
	}
}

func cloneBM(b *BlockMask) *BlockMask {
	c := *b
	for _, s := range []*[]int32{&c.KVNumBlocks, &c.FullKVNumBlocks, &c.KVIndices, &c.FullKVIndices, &c.QNumBlocks, &c.FullQNumBlocks, &c.QIndices, &c.FullQIndices} {
		*s = append([]int32(nil), *s...)
	}
	return &c
}

// TestLayout checks FlexAttention's row layout and the dense helpers.
func TestLayout(t *testing.T) {
	g := NewGridMust(t, 1, 1, 10, 10, 2, 2) // 5×5
	row := []Class{Full, Partial, Empty, Partial, Full}
	for k, c := range row {
		g.Set(0, 0, 0, k, c)
	}
	bm, err := FromClasses(g)
	if err != nil {
		t.Fatal(err)
	}
	eq := func(got []int32, want ...int32) {
		t.Helper()
		if string(fmtInts(got)) != string(fmtInts(want)) {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	// Rows as long as the longest list: 2 kv blocks, 1 q block.
	if bm.KVWidth != 2 || bm.QWidth != 1 {
		t.Errorf("widths %d, %d, want 2, 1", bm.KVWidth, bm.QWidth)
	}
	eq(bm.KVIndices[:4], 1, 3, 0, 1) // q block 0's partial blocks; q block 1 lists none: the first blocks
	eq(bm.FullKVIndices[:4], 0, 4, 0, 1)
	eq(bm.QIndices[:3], 0, 0, 0)
	for k, c := range row {
		if bm.Class(0, 0, 0, k) != c {
			t.Errorf("compact: Class(0,0,0,%d) = %s, want %s", k, bm.Class(0, 0, 0, k), c)
		}
	}
	if d := bm.Density(); d != 4.0/25 {
		t.Errorf("compact: density %v", d)
	}
	// FlexAttention's full rows: the same lists, every index in each row.
	compact := bm
	if bm, err = bm.WithWidths(5, 5); err != nil {
		t.Fatal(err)
	}
	if back, err := bm.WithWidths(0, 0); err != nil || !back.Equal(compact) {
		t.Errorf("full width and back: %v %s", err, Diff(back, compact))
	}
	eq(bm.KVNumBlocks[:1], 2)
	eq(bm.KVIndices[:5], 1, 3, 0, 2, 4)
	eq(bm.FullKVNumBlocks[:1], 2)
	eq(bm.FullKVIndices[:5], 0, 4, 1, 2, 3)
	eq(bm.KVNumBlocks[1:2], 0)
	eq(bm.KVIndices[5:10], 0, 1, 2, 3, 4)
	eq(bm.QNumBlocks, 0, 1, 0, 1, 0)
	eq(bm.QIndices[5:10], 0, 1, 2, 3, 4) // kv block 1: q block 0, then the rest
	eq(bm.FullQIndices[0:5], 0, 1, 2, 3, 4)
	for k, c := range row {
		if bm.Class(0, 0, 0, k) != c {
			t.Errorf("Class(0,0,0,%d) = %s, want %s", k, bm.Class(0, 0, 0, k), c)
		}
	}
	// Density: block (0,0) and (0,4) full, (0,1), (0,3) partial: 4 of 25.
	if d := bm.Density(); d != 4.0/25 {
		t.Errorf("density %v", d)
	}
	// Clipped blocks count their clipped area: 3×3 with 2×2 blocks.
	g2 := NewGridMust(t, 1, 1, 3, 3, 2, 2)
	g2.Set(0, 0, 1, 1, Full)
	bm2, _ := FromClasses(g2)
	if a := bm2.KeptArea(); a != 1 {
		t.Errorf("clipped area %d, want 1", a)
	}
	if d := bm2.Density(); d != 1.0/9 {
		t.Errorf("clipped density %v, want 1/9", d)
	}
	if e, p, f := bm.Counts(); e != 21 || p != 2 || f != 2 {
		t.Errorf("counts %d %d %d", e, p, f)
	}
}

func fmtInts(xs []int32) []byte {
	var b bytes.Buffer
	for _, x := range xs {
		b.WriteString(string(rune('0'+x)) + ",")
	}
	return b.Bytes()
}

func TestPNG(t *testing.T) {
	bm := sample(t) // three distinct heads, 5×6 blocks
	var buf bytes.Buffer
	const cell = 7
	if err := PNG(&buf, bm, cell); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// 3 panels: 2 columns, 2 rows.
	pw, ph := 6*cell, 5*cell
	wantW := max(8+2*(pw+8), legendWidth()+16)
	wantH := 8 + 2*(14+ph+8) + 10 + 8
	if b := img.Bounds(); b.Dx() != wantW || b.Dy() != wantH {
		t.Fatalf("image %v, want %d×%d", b, wantW, wantH)
	}
	// Head 0, q block 4, kv block 0: q ∈ [64,70), kv ∈ [0,8): q-kv ≥ 56 ≥ 20: empty;
	// q block 1 (16..31), kv block 0 (0..7): kv <= q and q-kv < 20? q=31,kv=0 fails: partial;
	// q block 1, kv block 1 (8..15): q-kv ≤ 23: partial; q block 0 kv block 0: partial (diagonal).
	// Head 2 (third panel, second row): q block 2 (32..47), kv block 1 (8..15): q-kv < 60: full.
	at := func(panel, qb, kb int) [3]uint32 {
		x0 := 8 + (panel%2)*(pw+8) + kb*cell + 2
		y0 := 8 + (panel/2)*(14+ph+8) + 14 + qb*cell + 2
		r, g, b, _ := img.At(x0, y0).RGBA()
		return [3]uint32{r >> 8, g >> 8, b >> 8}
	}
	rgb := func(c interface{ RGBA() (r, g, b, a uint32) }) [3]uint32 {
		r, g, b, _ := c.RGBA()
		return [3]uint32{r >> 8, g >> 8, b >> 8}
	}
	if got := at(0, 4, 0); got != rgb(ColorEmpty) {
		t.Errorf("empty cell colour %v", got)
	}
	if got := at(0, 1, 0); got != rgb(ColorPartial) {
		t.Errorf("partial cell colour %v", got)
	}
	if got := at(2, 2, 1); got != rgb(ColorFull) {
		t.Errorf("full cell colour %v", got)
	}
	// A shared mask gives a single panel.
	one, _ := BruteForceFunc(Shape{B: 2, H: 2, SeqQ: 64, SeqK: 64}, Options{BlockQ: 16, BlockK: 16}, func(_, _, q, kv int) bool { return q >= kv })
	img2, err := Image(one, 4)
	if err != nil {
		t.Fatal(err)
	}
	if b := img2.Bounds(); b.Dx() != max(8+16+8, legendWidth()+16) || b.Dy() != 8+14+16+8+10+8 {
		t.Errorf("single panel image %v", b)
	}
	if err := PNG(&buf, bm, 0); err == nil {
		t.Errorf("cell size 0 accepted")
	}
}

// TestProvenanceRoundTrip: Save records the mask and the batch and heads a
// block mask was built for (format 2) and Load gives them back; format 1
// files and files without a format load with the provenance unknown.
// Before, a block mask did not know its mask, so one made for "none" ran
// a causal kernel without complaint.
func TestProvenanceRoundTrip(t *testing.T) {
	bm := sample(t)
	bm.Mask, bm.BuiltB, bm.BuiltH = "sliding_window(20, 0)", 4, 3
	dir := filepath.Join(t.TempDir(), "bm")
	if err := bm.Save(dir); err != nil {
		t.Fatal(err)
	}
	js, _ := os.ReadFile(filepath.Join(dir, MetaFile))
	for _, want := range []string{`"format": "fac-blockmask/2"`, `"mask": "sliding_window(20, 0)"`, `"batch_heads": [`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("%s lacks %s:\n%s", MetaFile, want, js)
		}
	}
	got, err := Load(dir, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Mask != bm.Mask || got.BuiltB != 4 || got.BuiltH != 3 || !got.Equal(bm) {
		t.Fatalf("provenance lost: mask %q, built for %d×%d", got.Mask, got.BuiltB, got.BuiltH)
	}
	meta := func(s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, MetaFile), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{
		`{"format": "fac-blockmask/1", "seq_lengths": [70, 45], "block_size": [16, 8]}`,
		`{"seq_lengths": [70, 45], "block_size": [16, 8]}`, // written by a Python script
	} {
		meta(s)
		got, err := Load(dir, 0, 0, 0, 0)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got.Mask != "" || got.BuiltB != 0 || got.BuiltH != 0 || !got.Equal(bm) {
			t.Errorf("%s: provenance %q %d×%d, want unknown", s, got.Mask, got.BuiltB, got.BuiltH)
		}
	}
	// A script may record the mask itself.
	meta(`{"seq_lengths": [70, 45], "block_size": [16, 8], "mask": "causal"}`)
	if got, err := Load(dir, 0, 0, 0, 0); err != nil || got.Mask != "causal" {
		t.Errorf("mask from a script's json: %v %q", err, got.Mask)
	}
	for _, c := range []struct{ json, want string }{
		{`{"format": "fac-blockmask/9", "seq_lengths": [70, 45], "block_size": [16, 8]}`, `format "fac-blockmask/9", want "fac-blockmask/2" (or "fac-blockmask/1")`},
		{`{"format": "fac-blockmask/1", "seq_lengths": [70, 45], "block_size": [16, 8], "mask": "causal"}`, `format "fac-blockmask/1" has no mask`},
		{`{"seq_lengths": [70, 45], "block_size": [16, 8], "batch_heads": [0, 3]}`, "batch_heads is [0 3]"},
		// H=3 masks, but built for 2 heads: impossible.
		{`{"seq_lengths": [70, 45], "block_size": [16, 8], "batch_heads": [1, 2]}`, "built for batch 1 and 2 heads"},
	} {
		meta(c.json)
		if _, err := Load(dir, 0, 0, 0, 0); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.json, err, c.want)
		}
	}
}
