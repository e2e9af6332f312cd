package codegen

import (
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen/async"

	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// TestBroadcastOperandLayout: an elementwise op between a loaded [4, 128]
// tile and a [4] vector broadcast to it takes the tile's layout, not the
// one the broadcast carries over (which put all 128 columns in every
// thread: 128 stores a thread after the sum over dim 0), and the result
// still matches the interpreter on the simulator.
func TestBroadcastOperandLayout(t *testing.T) {
	m, k := loadKernel(t, "bcast_reduce")
	globalStore := regexp.MustCompile(`(?m)^\s*store .* addrspace\(1\)\*`)
	for _, arch := range simArchs {
		res, err := Lower(m, k, Options{Target: testTarget(arch)})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(globalStore.FindAllString(res.LL, -1)); n > 8 {
			t.Errorf("%s: %d global stores a thread for a 128-element row on 128 threads", arch, n)
		}
		rng := rand.New(rand.NewSource(7))
		args := []any{randBuf(rng, "o", tir.F32, 4*128, 1), randBuf(rng, "l", tir.F32, 4, 1), cpu.NewBuffer("out", tir.F32, 128)}
		simArgs := cloneArgs(args)
		if err := cpu.Launch(m, k, [3]int{1, 1, 1}, args...); err != nil {
			t.Fatal(err)
		}
		if err := simulate(res.LL, res, [3]int{1, 1, 1}, simArgs, false); err != nil {
			t.Fatalf("%s: simulate: %v", arch, err)
		}
		compareBuffers(t, args, simArgs, 1e-5, 1e-6)
	}
}

// TestNumStagesBounds: num_stages outside 1..MaxStages is an error naming
// the value; 1 pipelines nothing (no second buffer).
func TestNumStagesBounds(t *testing.T) {
	for _, n := range []int64{0, -1, async.MaxStages + 1} {
		m, k := loadKernel(t, "frontend_flash_128x128")
		m.Func(k).SetAttr("num_stages", n)
		_, err := Lower(m, k, Options{Target: testTarget("sm_90a")})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("num_stages = %d", n)) {
			t.Errorf("num_stages = %d: err = %v", n, err)
		}
	}
	m, k := loadKernel(t, "frontend_flash_128x128")
	m.Func(k).SetAttr("num_stages", int64(1))
	var out strings.Builder
	if _, err := Lower(m, k, Options{Target: testTarget("sm_90a"), PrintAfter: "pipeline-loads", Out: &out}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "prefetched") {
		t.Errorf("num_stages = 1 still pipelines:\n%s", out.String())
	}
}
