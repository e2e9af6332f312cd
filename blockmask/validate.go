package blockmask

import (
	"fmt"
	"strings"
)

// Validate checks that bm is a well-formed block mask: geometry, index row
// widths in [1, NumK] (resp. NumQ), tensor lengths, counts in [0, width],
// every index slot in range, no repeated index among the valid ones,
// partial and full disjoint, and the q lists the transpose of the kv lists.
// Errors name the tensor and the offending element. It takes time and
// memory in proportion to the tensors, never to a dense grid of blocks.
func (bm *BlockMask) Validate() error {
	if err := checkGeometry(bm.B, bm.H, bm.SeqQ, bm.SeqK, bm.BlockQ, bm.BlockK); err != nil {
		return err
	}
	if nq, nk := cdiv(bm.SeqQ, bm.BlockQ), cdiv(bm.SeqK, bm.BlockK); bm.NumQ != nq || bm.NumK != nk {
		return fmt.Errorf("blockmask: NumQ=%d NumK=%d, but SeqQ=%d SeqK=%d in %d×%d blocks give %d×%d",
			bm.NumQ, bm.NumK, bm.SeqQ, bm.SeqK, bm.BlockQ, bm.BlockK, nq, nk)
	}
	if bm.KVWidth < 1 || bm.KVWidth > bm.NumK || bm.QWidth < 1 || bm.QWidth > bm.NumQ {
		return fmt.Errorf("blockmask: index rows KVWidth=%d QWidth=%d, want 1 to NumK=%d and 1 to NumQ=%d (FlexAttention's full rows: NumK and NumQ)",
			bm.KVWidth, bm.QWidth, bm.NumK, bm.NumQ)
	}
	sets := bm.sets()
	for _, s := range sets {
		if err := s.checkLen(bm.B, bm.H); err != nil {
			return err
		}
	}
	return checkSets(sets, bm.B, bm.H, true)
}

// checkLists is the part of Validate that reading the lists needs:
// geometry, widths, tensor lengths, counts within the rows and valid
// indices in range; not the filler, repeats or the transpose, which cost as
// much as the tensors.
func (bm *BlockMask) checkLists() error {
	if err := checkGeometry(bm.B, bm.H, bm.SeqQ, bm.SeqK, bm.BlockQ, bm.BlockK); err != nil {
		return err
	}
	if bm.NumQ != cdiv(bm.SeqQ, bm.BlockQ) || bm.NumK != cdiv(bm.SeqK, bm.BlockK) ||
		bm.KVWidth < 1 || bm.KVWidth > bm.NumK || bm.QWidth < 1 || bm.QWidth > bm.NumQ {
		return bm.Validate() // for its message
	}
	for _, s := range bm.sets() {
		if err := s.checkLen(bm.B, bm.H); err != nil {
			return err
		}
		for i, n := range s.num {
			if n < 0 || int(n) > s.width {
				return bm.Validate()
			}
			for _, v := range s.idx[i*s.width:][:n] {
				if v < 0 || int(v) >= s.n {
					return bm.Validate()
				}
			}
		}
	}
	return nil
}

// set is one (counts, indices) pair of tensors.
type set struct {
	numName, idxName string
	num, idx         []int32
	rows             int  // rows of counts per (b, h)
	width            int  // length of an index row
	n                int  // blocks an index may name: NumK for kv lists, NumQ for q lists
	q                bool // a q list: rows are kv blocks, indices q blocks
	full             bool
}

func (bm *BlockMask) sets() []*set {
	nq, nk, wk, wq := bm.NumQ, bm.NumK, bm.KVWidth, bm.QWidth
	return []*set{
		{numName: "kv_num_blocks", idxName: "kv_indices", num: bm.KVNumBlocks, idx: bm.KVIndices, rows: nq, width: wk, n: nk},
		{numName: "full_kv_num_blocks", idxName: "full_kv_indices", num: bm.FullKVNumBlocks, idx: bm.FullKVIndices, rows: nq, width: wk, n: nk, full: true},
		{numName: "q_num_blocks", idxName: "q_indices", num: bm.QNumBlocks, idx: bm.QIndices, rows: nk, width: wq, n: nq, q: true},
		{numName: "full_q_num_blocks", idxName: "full_q_indices", num: bm.FullQNumBlocks, idx: bm.FullQIndices, rows: nk, width: wq, n: nq, q: true, full: true},
	}
}

func (s *set) checkLen(b, h int) error {
	if want := b * h * s.rows; len(s.num) != want {
		return fmt.Errorf("%s has %d elements, want B*H*%d = %d", s.numName, len(s.num), s.rows, want)
	}
	if want := b * h * s.rows * s.width; len(s.idx) != want {
		return fmt.Errorf("%s has %d elements, want B*H*%d*%d = %d", s.idxName, len(s.idx), s.rows, s.width, want)
	}
	return nil
}

// checkSets checks the sets (kv, full kv, then optionally q, full q; nil
// entries are absent) against each other and returns the first problem.
// With filler, slots past the count must hold in-range indices too.
func checkSets(sets []*set, b, h int, filler bool) error {
	for i, s := range sets {
		if s == nil {
			continue
		}
		var partner *set // the partial set a full set must not meet
		if s.full {
			partner = sets[i-1]
		}
		if err := s.checkRows(b, h, filler, partner); err != nil {
			return err
		}
	}
	for i := 2; i < len(sets); i++ {
		s, kv := sets[i], sets[i-2]
		if s == nil {
			continue
		}
		if kv == nil {
			return fmt.Errorf("%s is given without %s", s.idxName, strings.Replace(s.idxName, "q_", "kv_", 1))
		}
		if err := checkTranspose(kv, s, b, h); err != nil {
			return err
		}
	}
	return nil
}

// row is the valid part of index row r of mask m.
func (s *set) row(m, r int) []int32 {
	i := m*s.rows + r
	return s.idx[i*s.width:][:s.num[i]]
}

// checkRows checks counts, ranges, repeats and (against partner, already
// checked) disjointness, with a stamp per index instead of a dense grid.
func (s *set) checkRows(b, h int, filler bool, partner *set) error {
	stamp := make([]int64, s.n) // 1 + the row an index was last seen in
	slot := make([]int32, s.n)  // the slot it was seen at
	var other []int64           // 1 + the row the partner lists an index in
	if partner != nil {
		other = make([]int64, s.n)
	}
	for m := range b * h {
		bb, hh := m/h, m%h
		for r := range s.rows {
			serial := int64(m*s.rows+r) + 1
			n := s.num[m*s.rows+r]
			if n < 0 || int(n) > s.width {
				what := ""
				if s.width < s.n {
					what = fmt.Sprintf(" (its index rows hold %d of the %d blocks)", s.width, s.n)
				}
				return fmt.Errorf("%s%s = %d is out of range [0, %d]%s", s.numName, fmtIdx(bb, hh, r), n, s.width, what)
			}
			if partner != nil {
				for _, v := range partner.row(m, r) {
					other[v] = serial
				}
			}
			row := s.idx[(m*s.rows+r)*s.width:][:s.width]
			for j, v := range row {
				if j >= int(n) && !filler {
					break
				}
				if v < 0 || int(v) >= s.n {
					what := ""
					if j >= int(n) {
						what = fmt.Sprintf(" (a filler slot past the count %d; FlexAttention fills them with the other block indices)", n)
					}
					return fmt.Errorf("%s%s = %d is out of range [0, %d)%s", s.idxName, fmtIdx(bb, hh, r, j), v, s.n, what)
				}
				if j >= int(n) {
					continue
				}
				if stamp[v] == serial {
					return fmt.Errorf("%s%s = %d repeats %s%s", s.idxName, fmtIdx(bb, hh, r, j), v, s.idxName, fmtIdx(bb, hh, r, int(slot[v])))
				}
				stamp[v], slot[v] = serial, int32(j)
				if partner != nil && other[v] == serial {
					return fmt.Errorf("%s%s = %d is also listed in %s (a block cannot be both partial and full)",
						s.idxName, fmtIdx(bb, hh, r, j), v, partner.idxName)
				}
			}
		}
	}
	return nil
}

// checkTranspose checks that the q lists q (rows: kv blocks) hold exactly
// the transpose of the kv lists kv, both checked already: the kv lists are
// bucketed by kv block (a counting sort, O(rows + kept blocks)) and each q
// row compared with its bucket as a set.
func checkTranspose(kv, q *set, b, h int) error {
	nq, nk := kv.rows, q.rows
	start := make([]int, nk+1)
	var bucket []int32
	pos := make([]int, nk)
	inQ := make([]int64, nq)  // 1 + the kv block whose q row lists a q block
	inKV := make([]int64, nq) // 1 + the kv block whose bucket holds a q block
	for m := range b * h {
		bb, hh := m/h, m%h
		clear(start)
		for r := range nq {
			for _, v := range kv.row(m, r) {
				start[v+1]++
			}
		}
		for c := range nk {
			start[c+1] += start[c]
		}
		if cap(bucket) < start[nk] {
			bucket = make([]int32, start[nk])
		}
		bucket = bucket[:start[nk]]
		copy(pos, start[:nk])
		for r := range nq {
			for _, v := range kv.row(m, r) {
				bucket[pos[v]] = int32(r)
				pos[v]++
			}
		}
		for c := range nk {
			serial := int64(m*nk+c) + 1
			want, got := bucket[start[c]:start[c+1]], q.row(m, c)
			for _, r := range got {
				inQ[r] = serial
			}
			for _, r := range want {
				inKV[r] = serial
			}
			// The first q block (ascending) listed on one side only.
			missing, extra := int32(-1), int32(-1)
			for _, r := range want { // ascending
				if inQ[r] != serial {
					missing = r
					break
				}
			}
			for _, r := range got {
				if inKV[r] != serial && (extra < 0 || r < extra) {
					extra = r
				}
			}
			switch {
			case missing >= 0 && (extra < 0 || missing < extra):
				return fmt.Errorf("%s is not the transpose of %s: %s lists kv block %d for q block %d of (b=%d, h=%d), but %s%s does not list q block %d",
					q.idxName, kv.idxName, kv.idxName, c, missing, bb, hh, q.idxName, fmtIdx(bb, hh, c), missing)
			case extra >= 0:
				return fmt.Errorf("%s is not the transpose of %s: %s%s lists q block %d, but %s does not list kv block %d for q block %d of (b=%d, h=%d)",
					q.idxName, kv.idxName, q.idxName, fmtIdx(bb, hh, c), extra, kv.idxName, c, extra, bb, hh)
			}
		}
	}
	return nil
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
