package codegen

import (
	"strings"
	"testing"
)

// TestLastArrivalSchedules: a kernel with last_arrival keeps every thread
// in its program: warp_specialize declines a producer warpgroup, saying
// why (the kernel still compiles), and consumer groups, which would each
// take a ticket, are refused.
func TestLastArrivalSchedules(t *testing.T) {
	m, name := loadKernel(t, "frontend_splitkv_m64_fused")
	f := m.Func(name)
	f.SetAttr("warp_specialize", true)
	res, err := Lower(m, name, Options{Target: wgmmaTarget})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "warp_specialize: off: the kernel calls last_arrival") {
		t.Errorf("notes %q: want warp_specialize declined for last_arrival", res.Notes)
	}
	f.SetAttr("consumer_groups", int64(2))
	for _, arch := range []string{wgmmaArch, "sm_80"} {
		_, err := Lower(m, name, Options{Target: testTarget(arch)})
		if err == nil || !strings.Contains(err.Error(), "last_arrival") {
			t.Errorf("%s: consumer groups with last_arrival: error %v, want one naming last_arrival", arch, err)
		}
	}
}
