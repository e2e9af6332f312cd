package fac

import "github.com/fac-compiler/fac/flash"

// CUDA is an NVIDIA GPU opened through the driver API (no cgo); see
// runtime/gpu. Kernels are compiled with llc on first use (or loaded from
// added AOT bundles), through the on-disk kernel cache. Beside the methods
// of its gpu.Device, SMs is its multiprocessor count and UploadBlockMask
// copies a block mask to it once, for many launches (flash.CUDA).
type CUDA = flash.CUDA

// OpenCUDA opens GPU ordinal with its primary context and the kernel
// cache, set up as the environment says (Env: FAC_ARCH, FAC_CACHE_DIR,
// FAC_LLC, ...). On a machine without a driver it returns a clear error.
func OpenCUDA(ordinal int) (*CUDA, error) { return flash.OpenCUDA(ordinal) }

// DeviceTensors are device buffers for Forward.LaunchCUDA, as raw pointers
// (a gorgonia.org/cu DevicePtr converts with uintptr(p)). Q is [B, H, SeqQ,
// Dim], O [B, H, SeqQ, DimV], K [B, KVHeads, SeqK, Dim] and V [B, KVHeads,
// SeqK, DimV] (Shape.VDim), in the kernel's DType,
// with the last dimension contiguous and the other strides (in elements)
// given as {batch, head, seq}; a zero stride array means contiguous. LSE is
// [B, H, SeqQ] f32, contiguous. Aux holds the mods' aux tensors by name in
// their declared element types and shapes; Scalars the mods' run-time
// parameters; Scale 0 means 1/sqrt(Dim). BlockMask (CUDA.UploadBlockMask)
// and Workspace (Forward.NewWorkspace) may be nil: the call then makes its
// own. Fields: flash.DeviceTensors.
type DeviceTensors = flash.DeviceTensors

// PagedDeviceTensors are device buffers for Forward.LaunchPagedCUDA, as
// raw pointers, contiguous: Q [B, H, SeqQ, Dim] and O [B, H, SeqQ, DimV]
// in the kernel's DType, LSE [B, H, SeqQ] f32, KCache and VCache
// [NumPages, PageSize, KVHeads, Dim or DimV] in the DType, PageTable [B,
// MaxPages] int32 (not checked: its entries must be pages of the cache).
// CacheSeqlens [B] are on the host: the launch plans the call and builds
// its block mask from them. Workspace (Forward.NewPagedWorkspace) may be
// nil. With KNew [B, SeqQ, KVHeads, Dim] and VNew (DimV) the launch
// appends them first (rotated with q by RotaryCos and RotarySin
// [RotaryPositions, RotaryDim/2] in Rotary's form) and grows CacheSeqlens
// by SeqQ in place. Fields: flash.PagedDeviceTensors.
type PagedDeviceTensors = flash.PagedDeviceTensors

// PagedVarlenDeviceTensors are device buffers for
// Forward.LaunchPagedVarlenCUDA, as raw pointers, contiguous: Q [total_q,
// H, Dim] and O [total_q, H, DimV] in the kernel's DType, LSE [H, total_q]
// f32, the cache and page table as PagedDeviceTensors'. CuSeqlensQ [B + 1]
// and CacheSeqlens [B] are on the host: the launch plans the call and
// builds its tile list and block mask from them. Workspace
// (Forward.NewPagedVarlenWorkspace) may be nil. Fields:
// flash.PagedVarlenDeviceTensors.
type PagedVarlenDeviceTensors = flash.PagedVarlenDeviceTensors

// DeviceAux is an aux tensor on the device: a pointer and its length in
// elements.
type DeviceAux = flash.DeviceAux

// DeviceBlockMask is a block mask's kernel tensors on the device
// (CUDA.UploadBlockMask); Mask is the host block mask, Free releases the
// device copy.
type DeviceBlockMask = flash.DeviceBlockMask

// ForwardWorkspace is split-KV's scratch memory on the device
// (Forward.NewWorkspace): the partial outputs o_partial ([splits, B, H,
// SeqQ, DimV]) and lse_partial ([splits, B, H, SeqQ]), f32. One workspace
// serves every launch whose partial outputs are no larger, on one stream
// at a time; Free releases it.
type ForwardWorkspace = flash.ForwardWorkspace

// BackwardDeviceTensors are device buffers for Backward.LaunchCUDA, as raw
// pointers, laid out as for the forward's DeviceTensors: Q and DQ are
// [B, H, SeqQ, Dim], O and DO (dL/dO) [B, H, SeqQ, DimV], K and DK
// [B, KVHeads, SeqK, Dim], V and DV [B, KVHeads, SeqK, DimV], in the
// kernels' DType, strided by {batch, head, seq} (zero: contiguous); LSE
// is the forward's [B, H, SeqQ] f32, contiguous. DAux holds the gradients
// of the score's float aux tensors (Backward.AuxGrads), f32, which the
// kernels add into: zero them first. Sinks and DSinks ([H] f32) are for a
// backward compiled with Options.Sinks. BlockMask and Workspace
// (Backward.NewWorkspace) may be nil. Fields: flash.BackwardDeviceTensors.
type BackwardDeviceTensors = flash.BackwardDeviceTensors

// BackwardWorkspace is the backward pass's scratch memory on the device
// (Backward.NewWorkspace): Δ = rowsum(dO∘O) ([B, H, SeqQ] f32) and the f32
// dQ accumulator. One workspace serves every launch of a shape no larger
// than it was made for, on one stream at a time; Free releases it.
type BackwardWorkspace = flash.BackwardWorkspace
