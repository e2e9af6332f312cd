package cuda

import (
	"fmt"
	"unsafe"
)

// Device is a CUdevice ordinal handle.
type Device int32

// DeviceAttribute is a CUdevice_attribute.
type DeviceAttribute int32

// Device attributes used by fac.
const (
	DevAttrMaxThreadsPerBlock               DeviceAttribute = 1
	DevAttrMaxSharedMemoryPerBlock          DeviceAttribute = 8
	DevAttrWarpSize                         DeviceAttribute = 10
	DevAttrMaxRegistersPerBlock             DeviceAttribute = 12
	DevAttrClockRate                        DeviceAttribute = 13 // kHz
	DevAttrMultiprocessorCount              DeviceAttribute = 16
	DevAttrMemoryClockRate                  DeviceAttribute = 36 // kHz
	DevAttrGlobalMemoryBusWidth             DeviceAttribute = 37 // bits
	DevAttrL2CacheSize                      DeviceAttribute = 38 // bytes
	DevAttrMaxThreadsPerMultiprocessor      DeviceAttribute = 39
	DevAttrComputeCapabilityMajor           DeviceAttribute = 75
	DevAttrComputeCapabilityMinor           DeviceAttribute = 76
	DevAttrMaxSharedMemoryPerMultiprocessor DeviceAttribute = 81
	DevAttrMaxRegistersPerMultiprocessor    DeviceAttribute = 82
	DevAttrMaxSharedMemoryPerBlockOptin     DeviceAttribute = 97
	DevAttrClusterLaunch                    DeviceAttribute = 120
)

// DeviceCount returns the number of CUDA devices.
func DeviceCount() (int, error) {
	var n int32
	if err := call(fDeviceGetCount, uintptr(unsafe.Pointer(&n))); err != nil {
		return 0, err
	}
	return int(n), nil
}

// GetDevice returns the device with the given ordinal.
func GetDevice(ordinal int) (Device, error) {
	var d int32
	if err := call(fDeviceGet, uintptr(unsafe.Pointer(&d)), uintptr(ordinal)); err != nil {
		return 0, err
	}
	return Device(d), nil
}

// Name returns the device's product name, e.g. "NVIDIA H200".
func (d Device) Name() (string, error) {
	buf := make([]byte, 256)
	if err := call(fDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(d)); err != nil {
		return "", err
	}
	return goString(buf), nil
}

// Attribute returns a device attribute.
func (d Device) Attribute(a DeviceAttribute) (int, error) {
	var v int32
	if err := call(fDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(d)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// ComputeCapability returns the SM version, e.g. 9, 0 for sm_90.
func (d Device) ComputeCapability() (major, minor int, err error) {
	if major, err = d.Attribute(DevAttrComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	if minor, err = d.Attribute(DevAttrComputeCapabilityMinor); err != nil {
		return 0, 0, err
	}
	return major, minor, nil
}

// Arch returns the PTX target name for the device: sm_XY, with the "a"
// suffix for sm_90 and later so arch-specific features (wgmma, setmaxnreg)
// are available.
func (d Device) Arch() (string, error) {
	major, minor, err := d.ComputeCapability()
	if err != nil {
		return "", err
	}
	s := fmt.Sprintf("sm_%d%d", major, minor)
	if major >= 9 {
		s += "a"
	}
	return s, nil
}

// TotalMem returns the device's memory size in bytes.
func (d Device) TotalMem() (uint64, error) {
	var n uint64
	if err := call(fDeviceTotalMem, uintptr(unsafe.Pointer(&n)), uintptr(d)); err != nil {
		return 0, err
	}
	return n, nil
}

// Context is a device's primary context. The primary context is shared
// with any other CUDA user in the process (e.g. the runtime API), which is
// why it is used instead of cuCtxCreate.
type Context struct {
	h   uintptr
	dev Device
}

// PrimaryContext retains the primary context of d. Call Release when done.
func PrimaryContext(d Device) (*Context, error) {
	var h uintptr
	if err := call(fDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&h)), uintptr(d)); err != nil {
		return nil, err
	}
	return &Context{h: h, dev: d}, nil
}

// Device returns the context's device.
func (c *Context) Device() Device { return c.dev }

// SetCurrent makes c the process-wide current context: every later call
// that needs a context uses it, on whatever OS thread it runs.
func (c *Context) SetCurrent() error {
	if err := call(fCtxSetCurrent, c.h); err != nil {
		return err
	}
	current.Store(c.h)
	return nil
}

// Synchronize waits for all work in the context to finish.
func (c *Context) Synchronize() error {
	return withContext(c.h, fCtxSynchronize)
}

// Release releases the primary context retained by PrimaryContext.
func (c *Context) Release() error {
	if c.h == 0 {
		return nil
	}
	current.CompareAndSwap(c.h, 0)
	err := call(fDevicePrimaryCtxRelease, uintptr(c.dev))
	c.h = 0
	return err
}
