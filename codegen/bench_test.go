package codegen

import "testing"

// BenchmarkLowerFlash measures Lower on the front end's d128 causal
// attention kernel (llc time is separate: see TestPTX timings).
func BenchmarkLowerFlash(b *testing.B) {
	m, name := loadKernel(b, "frontend_flash_causal")
	for i := 0; i < b.N; i++ {
		if _, err := Lower(m, name, Options{Target: testTarget("sm_90a")}); err != nil {
			b.Fatal(err)
		}
	}
}
