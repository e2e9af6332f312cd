// Package launch turns a call's named values into a kernel's launch: each
// stdlib kernel declares a Contract beside its .fa file (grid, tensors with
// their shapes and strides, scalars, block-mask inputs, mods whose aux
// tensors it takes), and Bind is the one binder from names to ordered
// arguments that the CPU device and the GPU runtime share.
package launch

import (
	"fmt"
	"math"
	"math/bits"
)

// Shape is an attention problem: Q is [Batch, Heads, SeqQ, Dim], K is
// [Batch, KVHeads, SeqK, Dim], V is [Batch, KVHeads, SeqK, DimV] and O is
// [Batch, Heads, SeqQ, DimV] (KVHeads = Heads unless grouped-query; DimV =
// Dim unless V's head dim differs, as DeepSeek's 192 for Q and K, 128 for V).
type Shape struct {
	Batch, Heads, KVHeads, SeqQ, SeqK, Dim int
	// DimV is the head dim of V and O; 0 means Dim.
	DimV int
}

// VDim is the head dim of V and O (Dim when DimV is 0).
func (s Shape) VDim() int {
	if s.DimV == 0 {
		return s.Dim
	}
	return s.DimV
}

// KV is the number of kv heads (Heads when KVHeads is 0).
func (s Shape) KV() int {
	if s.KVHeads == 0 {
		return s.Heads
	}
	return s.KVHeads
}

// Validate reports a clear error for an impossible shape, and for one whose
// tensors could not be addressed with the kernels' 32-bit offsets.
func (s Shape) Validate() error { return s.validate(true) }

// ValidatePaged is Validate for a call whose keys and values live in a
// paged cache: SeqK is the longest cache, and k and v are not tensors of
// [Batch, KV, SeqK, Dim] (the caller checks the cache's own size), so only
// q and o must fit 32-bit offsets.
func (s Shape) ValidatePaged() error { return s.validate(false) }

func (s Shape) validate(denseKV bool) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"batch", s.Batch}, {"heads", s.Heads}, {"kv heads", s.KV()}, {"seqlen_q", s.SeqQ}, {"seqlen_k", s.SeqK}, {"head dim", s.Dim}, {"value head dim", s.VDim()}} {
		if f.v <= 0 {
			return fmt.Errorf("shape: %s must be positive, got %d", f.name, f.v)
		}
	}
	if s.Heads%s.KV() != 0 {
		return fmt.Errorf("shape: heads (%d) must be a multiple of kv heads (%d)", s.Heads, s.KV())
	}
	type tensor struct {
		name string
		dims []int
	}
	tensors := []tensor{{"q", []int{s.Batch, s.Heads, s.SeqQ, s.Dim}}}
	if denseKV {
		tensors = append(tensors, tensor{"k", []int{s.Batch, s.KV(), s.SeqK, s.Dim}}, tensor{"v", []int{s.Batch, s.KV(), s.SeqK, s.VDim()}})
	}
	tensors = append(tensors, tensor{"o", []int{s.Batch, s.Heads, s.SeqQ, s.VDim()}})
	for _, t := range tensors {
		n, ok := Product(t.dims...)
		if !ok || n > math.MaxInt32 {
			return fmt.Errorf("shape: %s has %d×%d×%d×%d elements, more than 32-bit offsets address", t.name, t.dims[0], t.dims[1], t.dims[2], t.dims[3])
		}
	}
	return nil
}

// Product multiplies non-negative ints, reporting false on overflow of int64
// (or of int on a 32-bit machine).
func Product(xs ...int) (int, bool) {
	p := uint64(1)
	for _, x := range xs {
		if x < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(p, uint64(x))
		if hi != 0 || lo > math.MaxInt {
			return 0, false
		}
		p = lo
	}
	return int(p), true
}

// CeilDiv is ⌈a / b⌉ for a ≥ 0, b > 0.
func CeilDiv(a, b int) int { return (a + b - 1) / b }
