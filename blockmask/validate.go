package blockmask

import "fmt"

// Validate checks that bm is a well-formed block mask: geometry, tensor
// lengths, counts in [0, NumK] (resp. NumQ), every index slot in range, no
// repeated index among the valid ones, partial and full disjoint, and the
// q lists the transpose of the kv lists. Errors name the tensor and the
// offending element.
func (bm *BlockMask) Validate() error {
	if err := checkGeometry(bm.B, bm.H, bm.SeqQ, bm.SeqK, bm.BlockQ, bm.BlockK); err != nil {
		return err
	}
	if nq, nk := cdiv(bm.SeqQ, bm.BlockQ), cdiv(bm.SeqK, bm.BlockK); bm.NumQ != nq || bm.NumK != nk {
		return fmt.Errorf("blockmask: NumQ=%d NumK=%d, but SeqQ=%d SeqK=%d in %d×%d blocks give %d×%d",
			bm.NumQ, bm.NumK, bm.SeqQ, bm.SeqK, bm.BlockQ, bm.BlockK, nq, nk)
	}
	sets := bm.sets()
	for _, s := range sets {
		if err := s.checkLen(bm.B, bm.H); err != nil {
			return err
		}
	}
	_, err := checkSets(sets, bm.B, bm.H, bm.NumQ, bm.NumK, true)
	return err
}

// set is one (counts, indices) pair of tensors.
type set struct {
	numName, idxName string
	num, idx         []int32
	rows, cols       int  // rows of counts per (b, h); length of an index row
	q                bool // a q list: rows are kv blocks, columns q blocks
	full             bool
}

func (bm *BlockMask) sets() []*set {
	nq, nk := bm.NumQ, bm.NumK
	return []*set{
		{numName: "kv_num_blocks", idxName: "kv_indices", num: bm.KVNumBlocks, idx: bm.KVIndices, rows: nq, cols: nk},
		{numName: "full_kv_num_blocks", idxName: "full_kv_indices", num: bm.FullKVNumBlocks, idx: bm.FullKVIndices, rows: nq, cols: nk, full: true},
		{numName: "q_num_blocks", idxName: "q_indices", num: bm.QNumBlocks, idx: bm.QIndices, rows: nk, cols: nq, q: true},
		{numName: "full_q_num_blocks", idxName: "full_q_indices", num: bm.FullQNumBlocks, idx: bm.FullQIndices, rows: nk, cols: nq, q: true, full: true},
	}
}

func (s *set) checkLen(b, h int) error {
	if want := b * h * s.rows; len(s.num) != want {
		return fmt.Errorf("%s has %d elements, want B*H*%d = %d", s.numName, len(s.num), s.rows, want)
	}
	if want := b * h * s.rows * s.cols; len(s.idx) != want {
		return fmt.Errorf("%s has %d elements, want B*H*%d*%d = %d", s.idxName, len(s.idx), s.rows, s.cols, want)
	}
	return nil
}

// checkSets checks the sets (kv, full kv, then optionally q, full q; nil
// entries are absent) against each other and returns the first problem, or
// each set's blocks on a dense [B, H, NumQ, NumK] grid. With filler, slots
// past the count must hold in-range indices too.
func checkSets(sets []*set, b, h, nq, nk int, filler bool) ([4][]bool, error) {
	var dense [4][]bool // by position in sets
	for i, s := range sets {
		if s == nil {
			continue
		}
		var other []bool // the partial set a full set must not meet
		var otherSet *set
		if s.full && sets[i-1] != nil {
			other, otherSet = dense[i-1], sets[i-1]
		}
		d, err := s.dense(b, h, nq, nk, filler, other, otherSet)
		if err != nil {
			return dense, err
		}
		dense[i] = d
	}
	for i := 2; i < len(sets); i++ {
		s, kv := sets[i], sets[i-2]
		if s == nil {
			continue
		}
		if dense[i-2] == nil {
			return dense, fmt.Errorf("%s is given without %s", s.idxName, kv.idxName)
		}
		for j := range dense[i] {
			if dense[i][j] == dense[i-2][j] {
				continue
			}
			kb := j % nk
			qb := j / nk % nq
			hh := j / (nk * nq) % h
			bb := j / (nk * nq * h)
			if dense[i-2][j] {
				return dense, fmt.Errorf("%s is not the transpose of %s: %s lists kv block %d for q block %d of (b=%d, h=%d), but %s%s does not list q block %d",
					s.idxName, kv.idxName, kv.idxName, kb, qb, bb, hh, s.idxName, fmtIdx(bb, hh, kb), qb)
			}
			return dense, fmt.Errorf("%s is not the transpose of %s: %s%s lists q block %d, but %s does not list kv block %d for q block %d of (b=%d, h=%d)",
				s.idxName, kv.idxName, s.idxName, fmtIdx(bb, hh, kb), qb, kv.idxName, kb, qb, bb, hh)
		}
	}
	return dense, nil
}

// dense marks the set's valid entries on a [B, H, NumQ, NumK] grid,
// checking counts, ranges, repeats and (against other) disjointness.
func (s *set) dense(b, h, nq, nk int, filler bool, other []bool, otherSet *set) ([]bool, error) {
	d := make([]bool, b*h*nq*nk)
	seen := make([]int, s.cols) // 1 + the slot where an index was seen in this row
	for m := range b * h {
		bb, hh := m/h, m%h
		for r := range s.rows {
			n := s.num[m*s.rows+r]
			if n < 0 || int(n) > s.cols {
				return nil, fmt.Errorf("%s%s = %d is out of range [0, %d]", s.numName, fmtIdx(bb, hh, r), n, s.cols)
			}
			clear(seen)
			row := s.idx[(m*s.rows+r)*s.cols:][:s.cols]
			for j, v := range row {
				if j >= int(n) && !filler {
					break
				}
				if v < 0 || int(v) >= s.cols {
					what := ""
					if j >= int(n) {
						what = fmt.Sprintf(" (a filler slot past the count %d; FlexAttention fills them with the other block indices)", n)
					}
					return nil, fmt.Errorf("%s%s = %d is out of range [0, %d)%s", s.idxName, fmtIdx(bb, hh, r, j), v, s.cols, what)
				}
				if j >= int(n) {
					continue
				}
				if seen[v] != 0 {
					return nil, fmt.Errorf("%s%s = %d repeats %s%s", s.idxName, fmtIdx(bb, hh, r, j), v, s.idxName, fmtIdx(bb, hh, r, seen[v]-1))
				}
				seen[v] = j + 1
				qb, kb := r, int(v)
				if s.q {
					qb, kb = kb, qb
				}
				at := (m*nq+qb)*nk + kb
				if other != nil && other[at] {
					return nil, fmt.Errorf("%s%s = %d is also listed in %s (a block cannot be both partial and full)",
						s.idxName, fmtIdx(bb, hh, r, j), v, otherSet.idxName)
				}
				d[at] = true
			}
		}
	}
	return d, nil
}

func fmtIdx(ix ...int) string {
	s := "["
	for i, v := range ix {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(v)
	}
	return s + "]"
}
