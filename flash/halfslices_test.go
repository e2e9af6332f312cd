package flash

import (
	"slices"
	"testing"
)

func TestHalfSlicesRoundTrip(t *testing.T) {
	bits := []uint16{0x0000, 0x3f80, 0xbf80, 0x4049, 0x7f80, 0x0001}
	if got := F32sToBF16(BF16s(bits)); !slices.Equal(got, bits) {
		t.Errorf("bf16 round trip: %x, want %x", got, bits)
	}
	hbits := []uint16{0x0000, 0x3c00, 0xbc00, 0x4248, 0x7c00, 0x0001}
	if got := F32sToF16(F16s(hbits)); !slices.Equal(got, hbits) {
		t.Errorf("f16 round trip: %x, want %x", got, hbits)
	}
}
