package codegen

import "testing"

func TestZZStats(t *testing.T) {
	for _, k := range kernels {
		m, names := loadKernels(t, k.name)
		for _, n := range names {
			res, err := Lower(m, n, Options{Arch: "sm_90a"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%-28s conv=%d smem=%d ll=%d bytes", n, res.Conversions, res.SharedBytes, len(res.LL))
		}
	}
}
