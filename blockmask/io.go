package blockmask

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/fac-compiler/fac/internal/npy"
)

// File names of a saved block mask: FlexAttention's BlockMask fields.
const (
	fileKVNum     = "kv_num_blocks.npy"
	fileKVIdx     = "kv_indices.npy"
	fileFullKVNum = "full_kv_num_blocks.npy"
	fileFullKVIdx = "full_kv_indices.npy"
	fileQNum      = "q_num_blocks.npy"
	fileQIdx      = "q_indices.npy"
	fileFullQNum  = "full_q_num_blocks.npy"
	fileFullQIdx  = "full_q_indices.npy"
	fileMeta      = MetaFile
)

// MetaFile is the name of the metadata file Save writes next to the
// tensors (sizes and provenance; see Load).
const MetaFile = "block_mask.json"

// metaFormat tags block_mask.json. Version 2 added the provenance (mask,
// batch_heads); version 1 files, and files without a format (written by a
// Python script), still load, with the provenance unknown.
const (
	metaFormat   = "fac-blockmask/2"
	metaFormatV1 = "fac-blockmask/1"
)

// meta is block_mask.json: the sizes the tensors' shapes do not pin down,
// and where the block mask came from. The size field names follow
// PyTorch's BlockMask attributes (seq_lengths, BLOCK_SIZE), so a Python
// script writes it from bm.seq_lengths and bm.BLOCK_SIZE.
type meta struct {
	Format     string  `json:"format,omitempty"`
	SeqLengths [2]int  `json:"seq_lengths"`           // (q, kv)
	BlockSize  [2]int  `json:"block_size"`            // (q, kv)
	Mask       string  `json:"mask,omitempty"`        // canonical mask mod; absent = unknown
	BatchHeads *[2]int `json:"batch_heads,omitempty"` // (B, H) built for; absent = unknown
	// Run-time parameter values of the mask it was built with.
	Params map[string]string `json:"params,omitempty"`
}

// Save writes the block mask into dir (made if missing) as eight int32 .npy
// files with FlexAttention's names and shapes ([B, H, NumQ], [B, H, NumQ,
// KVWidth], ...: index rows as long as bm's) and block_mask.json with the sequence lengths and block sizes
// and, when known, the mask and the batch and heads it was built for.
//
// The folder is written whole or not at all (see save.go): a new folder is
// made beside dir and renamed into place; in an existing one each file is
// staged beside the file it replaces (through symlinks, keeping the link
// and the file's mode) and renamed over it, block_mask.json last, and an
// error puts every old file back. A read-only or non-regular file in the
// folder is refused before anything is written.
func (bm *BlockMask) Save(dir string) error {
	if err := bm.Validate(); err != nil {
		return fmt.Errorf("blockmask: save %s: invalid block mask: %w", dir, err)
	}
	b, h, nq, nk, wk, wq := bm.B, bm.H, bm.NumQ, bm.NumK, bm.KVWidth, bm.QWidth
	files := []struct {
		name  string
		shape []int
		vals  []int32
	}{
		{fileKVNum, []int{b, h, nq}, bm.KVNumBlocks},
		{fileKVIdx, []int{b, h, nq, wk}, bm.KVIndices},
		{fileFullKVNum, []int{b, h, nq}, bm.FullKVNumBlocks},
		{fileFullKVIdx, []int{b, h, nq, wk}, bm.FullKVIndices},
		{fileQNum, []int{b, h, nk}, bm.QNumBlocks},
		{fileQIdx, []int{b, h, nk, wq}, bm.QIndices},
		{fileFullQNum, []int{b, h, nk}, bm.FullQNumBlocks},
		{fileFullQIdx, []int{b, h, nk, wq}, bm.FullQIndices},
	}
	var out []saveFile
	for _, f := range files {
		data, err := npy.EncodeI32(f.shape, f.vals)
		if err != nil {
			return fmt.Errorf("blockmask: save %s: %w", f.name, err)
		}
		out = append(out, saveFile{f.name, data})
	}
	m := meta{Format: metaFormat, SeqLengths: [2]int{bm.SeqQ, bm.SeqK}, BlockSize: [2]int{bm.BlockQ, bm.BlockK}, Mask: bm.Mask, Params: bm.Params}
	if bm.BuiltB > 0 && bm.BuiltH > 0 {
		m.BatchHeads = &[2]int{bm.BuiltB, bm.BuiltH}
	}
	js, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	out = append(out, saveFile{fileMeta, append(js, '\n')}) // last: saveInto puts it in place last
	if err := saveFiles(dir, out); err != nil {
		return fmt.Errorf("blockmask: save %s: %w", dir, err)
	}
	return nil
}

// Load reads a block mask saved by Save or made by PyTorch (the tensors of
// a BlockMask saved with numpy.save under the names Save uses).
//
// Sizes come from block_mask.json when present: seqQ and seqK must then
// agree with it or be 0, and blockQ, blockK are ignored (the json's block
// sizes hold; compare bm.BlockQ, bm.BlockK with your kernel's). Without the
// json (a PyTorch-made set) the sizes come from the arguments: the sequence
// lengths must be given, block sizes of 0 mean 128.
//
// kv_num_blocks and kv_indices are required. full_kv_* may be absent (then
// no block is full, as in a BlockMask without full blocks); q_* and
// full_q_* may be absent (they are computed, as PyTorch's create_block_mask
// gives only the kv lists) and are checked against the kv lists when
// present. Shapes, counts, index ranges, repeats and disjointness are
// checked; errors name the file and the offending element. Only the first
// count entries of an index row are read: the rest is rewritten in
// FlexAttention's layout, so Load(Save(x)) equals x.
//
// Index rows may be shorter than the number of blocks (the last dimension
// of kv_indices may be any width from the longest list to NumK; the full
// lists' must be the same): the block mask keeps the files' widths.
// Computed q lists get rows as long as their longest list.
//
// The provenance (Mask, BuiltB, BuiltH) comes from the json's "mask" and
// "batch_heads" (format fac-blockmask/2); it is unknown ("" and 0) for
// format 1 files and sets without a json.
func Load(dir string, seqQ, seqK, blockQ, blockK int) (*BlockMask, error) {
	bm, err := load(dir, seqQ, seqK, blockQ, blockK)
	if err != nil {
		return nil, fmt.Errorf("blockmask: load %s: %w", dir, err)
	}
	return bm, nil
}

func load(dir string, seqQ, seqK, blockQ, blockK int) (*BlockMask, error) {
	var m meta
	js, err := os.ReadFile(filepath.Join(dir, fileMeta))
	switch {
	case err == nil:
		if err := json.Unmarshal(js, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", fileMeta, err)
		}
		switch m.Format {
		case "", metaFormat:
		case metaFormatV1:
			if m.Mask != "" || m.BatchHeads != nil {
				return nil, fmt.Errorf("%s: format %q has no mask or batch_heads (they came with %q)", fileMeta, m.Format, metaFormat)
			}
		default:
			return nil, fmt.Errorf("%s: format %q, want %q (or %q)", fileMeta, m.Format, metaFormat, metaFormatV1)
		}
		if bh := m.BatchHeads; bh != nil && (bh[0] < 1 || bh[1] < 1) {
			return nil, fmt.Errorf("%s: batch_heads is %v, want two positive numbers (or no batch_heads)", fileMeta, *bh)
		}
		for _, p := range []struct {
			name      string
			arg, file int
			dst       *int
			check     bool
		}{
			{"sequence length q", seqQ, m.SeqLengths[0], &seqQ, true},
			{"sequence length kv", seqK, m.SeqLengths[1], &seqK, true},
			{"block size q", blockQ, m.BlockSize[0], &blockQ, false},
			{"block size kv", blockK, m.BlockSize[1], &blockK, false},
		} {
			if p.file <= 0 {
				return nil, fmt.Errorf("%s: %s is %d, want a positive number (seq_lengths and block_size are required)", fileMeta, p.name, p.file)
			}
			if p.check && p.arg != 0 && p.arg != p.file {
				return nil, fmt.Errorf("%s: %s is %d, but %d was asked for", fileMeta, p.name, p.file, p.arg)
			}
			*p.dst = p.file
		}
	case errors.Is(err, fs.ErrNotExist):
		if seqQ <= 0 || seqK <= 0 {
			return nil, fmt.Errorf("no %s: give the sequence lengths (got q=%d, kv=%d)", fileMeta, seqQ, seqK)
		}
		if blockQ == 0 {
			blockQ = DefaultBlock
		}
		if blockK == 0 {
			blockK = DefaultBlock
		}
	default:
		return nil, err
	}
	if err := checkGeometry(1, 1, seqQ, seqK, blockQ, blockK); err != nil {
		return nil, err
	}
	nq, nk := cdiv(seqQ, blockQ), cdiv(seqK, blockK)
	geom := fmt.Sprintf("SeqQ=%d, SeqK=%d in blocks of %d×%d give %d×%d blocks", seqQ, seqK, blockQ, blockK, nq, nk)

	kvNum, err := readI32(dir, fileKVNum, true)
	if err != nil {
		return nil, err
	}
	if len(kvNum.Shape) != 3 || kvNum.Shape[0] < 1 || kvNum.Shape[1] < 1 || kvNum.Shape[2] != nq {
		return nil, fmt.Errorf("%s: shape %v, want [B, H, %d] (%s)", fileKVNum, kvNum.Shape, nq, geom)
	}
	b, h := kvNum.Shape[0], kvNum.Shape[1]
	// A mask that reads b (h) has one mask per batch (head) of the shape it
	// was built for; one that does not has a single shared one.
	if bh := m.BatchHeads; bh != nil && ((b != 1 && b != bh[0]) || (h != 1 && h != bh[1])) {
		return nil, fmt.Errorf("%s: shape %v (B=%d, H=%d), but %s says it was built for batch %d and %d heads (B and H are those, or 1)",
			fileKVNum, kvNum.Shape, b, h, fileMeta, bh[0], bh[1])
	}
	arrays := map[string]*i32Array{fileKVNum: kvNum}
	for _, name := range []string{fileKVIdx, fileFullKVNum, fileFullKVIdx, fileQNum, fileQIdx, fileFullQNum, fileFullQIdx} {
		a, err := readI32(dir, name, name == fileKVIdx)
		if err != nil {
			return nil, err
		}
		if a != nil {
			arrays[name] = a
		}
	}
	// Index rows: each direction's width is its index tensor's last
	// dimension, from 1 to the number of blocks (FlexAttention's).
	width := func(idx, fullIdx string, rows, n int) (int, error) {
		a := arrays[idx]
		if a == nil {
			return 0, nil
		}
		if len(a.Shape) != 4 || a.Shape[0] != b || a.Shape[1] != h || a.Shape[2] != rows || a.Shape[3] < 1 || a.Shape[3] > n {
			return 0, fmt.Errorf("%s: shape %v, want [%d %d %d W] with W from 1 to %d (B=%d, H=%d from %s; %s)", idx, a.Shape, b, h, rows, n, b, h, fileKVNum, geom)
		}
		w := a.Shape[3]
		if f := arrays[fullIdx]; f != nil && !slices.Equal(f.Shape, a.Shape) {
			return 0, fmt.Errorf("%s: shape %v, want %v (as %s)", fullIdx, f.Shape, a.Shape, idx)
		}
		return w, nil
	}
	wk, err := width(fileKVIdx, fileFullKVIdx, nq, nk)
	if err != nil {
		return nil, err
	}
	wq, err := width(fileQIdx, fileFullQIdx, nk, nq)
	if err != nil {
		return nil, err
	}
	if wq == 0 {
		// No q lists: full_q_indices (if any) is refused below; give it a
		// width to check its shape against.
		wq = nq
		if a := arrays[fileFullQIdx]; a != nil && len(a.Shape) == 4 {
			wq = a.Shape[3]
		}
	}
	want := map[string][]int{
		fileFullKVNum: {b, h, nq}, fileFullKVIdx: {b, h, nq, wk},
		fileQNum: {b, h, nk}, fileQIdx: {b, h, nk, wq}, fileFullQNum: {b, h, nk}, fileFullQIdx: {b, h, nk, wq},
	}
	for _, name := range []string{fileFullKVNum, fileFullKVIdx, fileQNum, fileQIdx, fileFullQNum, fileFullQIdx} {
		if a := arrays[name]; a != nil && !slices.Equal(a.Shape, want[name]) {
			return nil, fmt.Errorf("%s: shape %v, want %v (B=%d, H=%d from %s; %s)", name, a.Shape, want[name], b, h, fileKVNum, geom)
		}
	}
	pair := func(num, idx string) (bool, error) {
		_, hasNum := arrays[num]
		_, hasIdx := arrays[idx]
		if hasNum != hasIdx {
			have, miss := num, idx
			if hasIdx {
				have, miss = idx, num
			}
			return false, fmt.Errorf("%s is present but %s is missing (they come in pairs)", have, miss)
		}
		return hasNum, nil
	}
	hasFull, err := pair(fileFullKVNum, fileFullKVIdx)
	if err != nil {
		return nil, err
	}
	hasQ, err := pair(fileQNum, fileQIdx)
	if err != nil {
		return nil, err
	}
	hasFullQ, err := pair(fileFullQNum, fileFullQIdx)
	if err != nil {
		return nil, err
	}
	if hasFullQ && !hasFull {
		return nil, fmt.Errorf("%s is present without %s", fileFullQIdx, fileFullKVIdx)
	}
	if hasFull && hasQ && !hasFullQ {
		return nil, fmt.Errorf("%s and %s are present but %s is missing", fileFullKVIdx, fileQIdx, fileFullQIdx)
	}
	if !hasFull {
		// No full blocks: every listed block is partial.
		arrays[fileFullKVNum] = &i32Array{Vals: make([]int32, b*h*nq)}
		arrays[fileFullKVIdx] = &i32Array{Vals: make([]int32, b*h*nq*wk)}
	}
	mk := func(num, idx string, rows, width, n int, q, full bool) *set {
		if arrays[num] == nil {
			return nil
		}
		return &set{numName: num, idxName: idx, num: arrays[num].Vals, idx: arrays[idx].Vals, rows: rows, width: width, n: n, q: q, full: full}
	}
	sets := []*set{
		mk(fileKVNum, fileKVIdx, nq, wk, nk, false, false),
		mk(fileFullKVNum, fileFullKVIdx, nq, wk, nk, false, true),
		mk(fileQNum, fileQIdx, nk, wq, nq, true, false),
		mk(fileFullQNum, fileFullQIdx, nk, wq, nq, true, true),
	}
	if err := checkSets(sets, b, h, false); err != nil {
		return nil, err
	}
	qWidth := 0 // computed q lists: as long as the longest
	if hasQ {
		qWidth = wq
	}
	runs := listRuns(b*h, nq, wk, sets[0].num, sets[0].idx, sets[1].num, sets[1].idx)
	bm, err := listsFromRuns(b, h, seqQ, seqK, blockQ, blockK, runs, wk, qWidth)
	if err != nil {
		return nil, err
	}
	bm.Mask, bm.Params = m.Mask, m.Params
	if m.BatchHeads != nil {
		bm.BuiltB, bm.BuiltH = m.BatchHeads[0], m.BatchHeads[1]
	}
	return bm, nil
}

type i32Array struct {
	Shape []int
	Vals  []int32
}

// readI32 reads an integer .npy file; a missing optional file gives nil.
func readI32(dir, name string, required bool) (*i32Array, error) {
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if required {
			return nil, fmt.Errorf("%s is missing", name)
		}
		return nil, nil
	}
	a, err := npy.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch a.Dtype {
	case "<i4", "<i8", "|i1", "|u1":
	default:
		return nil, fmt.Errorf("%s: dtype %s, want an integer type (<i4 as PyTorch's int32, or <i8)", name, a.Dtype)
	}
	vals, err := a.I32()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &i32Array{Shape: a.Shape, Vals: vals}, nil
}
