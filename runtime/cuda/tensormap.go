package cuda

import (
	"fmt"
	"unsafe"
)

// TensorMap is an opaque CUtensorMap (128 bytes), the TMA descriptor a
// kernel takes as a by-value, grid-constant parameter. Pass it to
// Function.Launch as a TensorMap or *TensorMap.
type TensorMap [16]uint64

// TensorDataType is a CUtensorMapDataType.
type TensorDataType int32

// Tensor map element types.
const (
	TensorUint8    TensorDataType = 0
	TensorUint16   TensorDataType = 1
	TensorUint32   TensorDataType = 2
	TensorInt32    TensorDataType = 3
	TensorUint64   TensorDataType = 4
	TensorInt64    TensorDataType = 5
	TensorFloat16  TensorDataType = 6
	TensorFloat32  TensorDataType = 7
	TensorFloat64  TensorDataType = 8
	TensorBFloat16 TensorDataType = 9
)

// TensorSwizzle is a CUtensorMapSwizzle.
type TensorSwizzle int32

// Shared-memory swizzle modes.
const (
	SwizzleNone TensorSwizzle = 0
	Swizzle32B  TensorSwizzle = 1
	Swizzle64B  TensorSwizzle = 2
	Swizzle128B TensorSwizzle = 3
)

// TensorL2Promotion is a CUtensorMapL2promotion.
type TensorL2Promotion int32

// L2 promotion sizes.
const (
	L2PromotionNone TensorL2Promotion = 0
	L2Promotion64B  TensorL2Promotion = 1
	L2Promotion128B TensorL2Promotion = 2
	L2Promotion256B TensorL2Promotion = 3
)

// TiledTensorMap describes a tiled TMA mapping of a row-major tensor in
// global memory; dimension 0 is the innermost (contiguous) one.
type TiledTensorMap struct {
	DataType TensorDataType
	Addr     DevicePtr // 16-byte aligned
	Dims     []uint64  // size of each dimension, innermost first (rank 1..5)
	Strides  []uint64  // byte strides of dims 1..rank-1 (multiples of 16)
	Box      []uint32  // tile size copied per TMA operation, per dim
	// ElementStrides are the per-dim traversal strides; nil means all 1.
	ElementStrides []uint32
	Swizzle        TensorSwizzle
	L2Promotion    TensorL2Promotion
	// OOBFillNaN fills out-of-bounds elements with NaN instead of zero.
	OOBFillNaN bool
}

// Encode builds the TensorMap with cuTensorMapEncodeTiled (CUDA 12+).
func (t TiledTensorMap) Encode() (*TensorMap, error) {
	rank := len(t.Dims)
	if rank < 1 || rank > 5 || len(t.Strides) != rank-1 || len(t.Box) != rank ||
		(t.ElementStrides != nil && len(t.ElementStrides) != rank) {
		return nil, fmt.Errorf("cuda: TiledTensorMap: rank %d needs %d strides, %d box dims, %d element strides; got %d, %d, %d",
			rank, rank-1, rank, rank, len(t.Strides), len(t.Box), len(t.ElementStrides))
	}
	es := t.ElementStrides
	if es == nil {
		es = make([]uint32, rank)
		for i := range es {
			es[i] = 1
		}
	}
	// A trailing 0 keeps &strides[0] valid for rank 1 (no strides).
	strides := append(append([]uint64(nil), t.Strides...), 0)
	var oob uintptr
	if t.OOBFillNaN {
		oob = 1
	}
	// The driver requires a 64-byte aligned output; Go only guarantees 8.
	buf := make([]byte, unsafe.Sizeof(TensorMap{})+64)
	off := (64 - uintptr(unsafe.Pointer(&buf[0]))%64) % 64
	out := unsafe.Pointer(&buf[off])
	err := ctxCall(fTensorMapEncodeTiled, uintptr(out), uintptr(t.DataType), uintptr(rank), uintptr(t.Addr),
		uintptr(unsafe.Pointer(&t.Dims[0])), uintptr(unsafe.Pointer(&strides[0])),
		uintptr(unsafe.Pointer(&t.Box[0])), uintptr(unsafe.Pointer(&es[0])),
		0 /* no interleave */, uintptr(t.Swizzle), uintptr(t.L2Promotion), oob)
	if err != nil {
		return nil, err
	}
	m := new(TensorMap)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(m)), unsafe.Sizeof(*m)), buf[off:])
	return m, nil
}
