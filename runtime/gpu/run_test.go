package gpu

import (
	"strings"
	"testing"

	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// TestTensorMapAlignment: what TMA cannot map is an error naming the
// tensor and the way out, before the driver is asked.
func TestTensorMapAlignment(t *testing.T) {
	call := &launch.Call{Kernel: "flash_fwd", Buffers: []launch.Buffer{{Name: "q"}, {Name: "k"}}}
	tm := launch.TensorMap{Buffer: 1, Elem: "bf16", Dims: []uint64{128, 100, 8}, Strides: []uint64{256, 25600}, Box: []uint32{64, 64, 1}, Swizzle: 128}
	for name, tc := range map[string]struct {
		addr    cuda.DevicePtr
		strides []uint64
		want    string
	}{
		"stride":  {1 << 20, []uint64{200, 20000}, "(stride 1 = 200 bytes)"},
		"address": {1<<20 + 8, tm.Strides, "(address 0x100008)"},
	} {
		tm := tm
		tm.Strides = tc.strides
		_, err := encodeTensorMap(call, tm, tc.addr)
		if err == nil || !strings.HasPrefix(err.Error(), "kernel flash_fwd: tensor k: TMA needs a 16-byte aligned address") ||
			!strings.Contains(err.Error(), tc.want) || !strings.HasSuffix(err.Error(), "compile with the target option tma=off (fac --target-opt tma=off, Options.Target.NoTMA, or FAC_TMA=0) for the cp.async path, which takes any layout") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
