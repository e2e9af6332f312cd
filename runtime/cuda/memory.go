package cuda

import (
	"fmt"
	"unsafe"
)

// DevicePtr is a device memory address (CUdeviceptr).
type DevicePtr uintptr

// Add returns p offset by n bytes.
func (p DevicePtr) Add(n int) DevicePtr { return p + DevicePtr(n) }

func checkSize(n int) error {
	if n < 0 {
		return fmt.Errorf("cuda: negative size %d", n)
	}
	return nil
}

// MemAlloc allocates bytes of device memory.
func MemAlloc(bytes int) (DevicePtr, error) {
	if err := checkSize(bytes); err != nil {
		return 0, err
	}
	var p DevicePtr
	if err := ctxCall(fMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes)); err != nil {
		return 0, err
	}
	return p, nil
}

// MemFree frees memory from MemAlloc. Freeing 0 is a no-op.
func MemFree(p DevicePtr) error {
	if p == 0 {
		return nil
	}
	return ctxCall(fMemFree, uintptr(p))
}

// MemGetInfo returns the free and total device memory of the current
// context's device.
func MemGetInfo() (free, total uint64, err error) {
	err = ctxCall(fMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))
	return free, total, err
}

// MemcpyHtoD copies bytes from host memory src to device memory dst.
func MemcpyHtoD(dst DevicePtr, src unsafe.Pointer, bytes int) error {
	if err := checkSize(bytes); err != nil {
		return err
	}
	return ctxCall(fMemcpyHtoD, uintptr(dst), uintptr(src), uintptr(bytes))
}

// MemcpyDtoH copies bytes from device memory src to host memory dst.
func MemcpyDtoH(dst unsafe.Pointer, src DevicePtr, bytes int) error {
	if err := checkSize(bytes); err != nil {
		return err
	}
	return ctxCall(fMemcpyDtoH, uintptr(dst), uintptr(src), uintptr(bytes))
}

// MemcpyDtoD copies bytes between device buffers.
func MemcpyDtoD(dst, src DevicePtr, bytes int) error {
	if err := checkSize(bytes); err != nil {
		return err
	}
	return ctxCall(fMemcpyDtoD, uintptr(dst), uintptr(src), uintptr(bytes))
}

// MemcpyHtoDAsync queues a host-to-device copy on s. With pageable (Go)
// memory the driver stages src before returning; with page-locked memory
// src must stay valid until the stream reaches the copy.
func MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, bytes int, s Stream) error {
	if err := checkSize(bytes); err != nil {
		return err
	}
	return ctxCall(fMemcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(bytes), s.h)
}

// MemcpyDtoHAsync queues a device-to-host copy on s. With pageable (Go)
// memory it completes before returning; with page-locked memory dst must
// stay valid (and unread) until the stream is synchronized.
func MemcpyDtoHAsync(dst unsafe.Pointer, src DevicePtr, bytes int, s Stream) error {
	if err := checkSize(bytes); err != nil {
		return err
	}
	return ctxCall(fMemcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(bytes), s.h)
}

// MemsetD8 sets n bytes at dst to v.
func MemsetD8(dst DevicePtr, v uint8, n int) error {
	if err := checkSize(n); err != nil {
		return err
	}
	return ctxCall(fMemsetD8, uintptr(dst), uintptr(v), uintptr(n))
}

// MemsetD32 sets n 32-bit words at dst (4-byte aligned) to v.
func MemsetD32(dst DevicePtr, v uint32, n int) error {
	if err := checkSize(n); err != nil {
		return err
	}
	return ctxCall(fMemsetD32, uintptr(dst), uintptr(v), uintptr(n))
}

// MemsetD32Async queues setting n 32-bit words at dst (4-byte aligned) to
// v on stream s.
func MemsetD32Async(dst DevicePtr, v uint32, n int, s Stream) error {
	if err := checkSize(n); err != nil {
		return err
	}
	return ctxCall(fMemsetD32Async, uintptr(dst), uintptr(v), uintptr(n), s.h)
}

// HtoD copies the slice src to device memory dst.
func HtoD[T any](dst DevicePtr, src []T) error {
	if len(src) == 0 {
		return nil
	}
	return MemcpyHtoD(dst, unsafe.Pointer(&src[0]), len(src)*int(unsafe.Sizeof(src[0])))
}

// DtoH copies len(dst) elements from device memory src into dst.
func DtoH[T any](dst []T, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return MemcpyDtoH(unsafe.Pointer(&dst[0]), src, len(dst)*int(unsafe.Sizeof(dst[0])))
}
