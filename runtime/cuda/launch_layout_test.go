package cuda

import (
	"testing"
	"unsafe"
)

// TestLaunchConfigLayout: launchConfig and launchAttribute are
// CUlaunchConfig and CUlaunchAttribute byte for byte (cuda.h, 64-bit).
func TestLaunchConfigLayout(t *testing.T) {
	var c launchConfig
	var a launchAttribute
	for _, f := range []struct {
		what      string
		got, want uintptr
	}{
		{"sizeof(CUlaunchConfig)", unsafe.Sizeof(c), 56},
		{"offsetof(hStream)", unsafe.Offsetof(c.stream), 32},
		{"offsetof(attrs)", unsafe.Offsetof(c.attrs), 40},
		{"offsetof(numAttrs)", unsafe.Offsetof(c.numAttrs), 48},
		{"sizeof(CUlaunchAttribute)", unsafe.Sizeof(a), 72},
		{"offsetof(value)", unsafe.Offsetof(a.value), 8},
	} {
		if f.got != f.want {
			t.Errorf("%s = %d, want %d", f.what, f.got, f.want)
		}
	}
}
