package gpu

import (
	"fmt"
	"unsafe"

	"github.com/fac-compiler/fac/runtime/cuda"
)

// maxOrders bounds the tile orders a kernel keeps on the device: a
// persistent launch's order depends on its shape, its program count and
// its block mask, so a run over many masks (document ids per batch) would
// otherwise keep one per mask.
const maxOrders = 64

// tileOrder is a device copy of a persistent launch's tile order (the
// grid.order argument, launch.Call.Order). Copies are kept by content and
// shared by the launches that use the same order: a launch is asynchronous,
// so its order must outlive the call. When maxOrders are kept, the device
// finishes its work and they are all freed first.
func (k *Kernel) tileOrder(order []int32) (cuda.DevicePtr, error) {
	if len(order) == 0 {
		order = []int32{0} // an empty launch: any valid address
	}
	bytes := 4 * len(order)
	key := string(unsafe.Slice((*byte)(unsafe.Pointer(&order[0])), bytes))
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.orders[key]; ok {
		return p, nil
	}
	if len(k.orders) >= maxOrders {
		if k.ctx == nil {
			return 0, fmt.Errorf("tile orders: %d kept and no context to wait on before freeing them", len(k.orders))
		}
		if err := k.ctx.Synchronize(); err != nil {
			return 0, err
		}
		for _, p := range k.orders {
			cuda.MemFree(p)
		}
		k.orders = nil
	}
	p, err := cuda.MemAlloc(bytes)
	if err != nil {
		return 0, err
	}
	if err := cuda.MemcpyHtoD(p, unsafe.Pointer(&order[0]), bytes); err != nil {
		cuda.MemFree(p)
		return 0, err
	}
	if k.orders == nil {
		k.orders = map[string]cuda.DevicePtr{}
	}
	k.orders[key] = p
	return p, nil
}
