package blockmask

// Lists are one direction's four tensors: the kv_* set (per q block, the
// kv blocks to visit) or, transposed, the q_* set (per kv block, the q
// blocks), as kernels read them.
func (bm *BlockMask) Lists(transposed bool) (counts, indices, fullCounts, fullIndices []int32) {
	if transposed {
		return bm.QNumBlocks, bm.QIndices, bm.FullQNumBlocks, bm.FullQIndices
	}
	return bm.KVNumBlocks, bm.KVIndices, bm.FullKVNumBlocks, bm.FullKVIndices
}

// Dims are the batch and head extents (1 where the mask is shared) and the
// number of q and kv blocks.
func (bm *BlockMask) Dims() (b, h, numQ, numK int) { return bm.B, bm.H, bm.NumQ, bm.NumK }

// RowLens are the lengths of an index row of the kv lists and of the q
// lists (KVWidth, QWidth): the row strides kernels index the lists with.
func (bm *BlockMask) RowLens() (kv, q int) { return bm.KVWidth, bm.QWidth }
