package simt_test

// The simulator against the CPU device: a 64×64 bf16 GEMM lowered by
// codegen for each target (mma.sync and ldmatrix on sm_80, wgmma with TMA
// on sm_90a) must compute what runtime/cpu computes from the same tile IR.
// codegen's TestSimulate runs every kernel family the same way.

import (
	"math"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/codegen/simt"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

func TestAgainstCPUDevice(t *testing.T) {
	src, err := os.ReadFile("../testdata/dot_bf16.tir")
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"sm_80", "sm_90a"} {
		t.Run(arch, func(t *testing.T) {
			m, err := tir.Parse("dot_bf16.tir", string(src))
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewSource(7))
			rnd := func(name string, e tir.Elem, n int) *cpu.Buffer {
				xs := make([]float64, n)
				for i := range xs {
					xs[i] = rng.Float64()*2 - 1
				}
				return cpu.FromFloats(name, e, xs)
			}
			a, b := rnd("a", tir.BF16, 64*64), rnd("b", tir.BF16, 64*64)
			want := []any{a, b, cpu.NewBuffer("c", tir.F32, 64*64)}
			if err := cpu.Launch(m, "dot_bf16", [3]int{1, 1, 1}, want...); err != nil {
				t.Fatal(err)
			}
			res, err := codegen.Lower(m, "dot_bf16", codegen.Options{Target: codegen.TargetConfig{Arch: arch}})
			if err != nil {
				t.Fatal(err)
			}
			if arch == "sm_90a" && !strings.Contains(res.LL, "wgmma.mma_async") {
				t.Fatal("sm_90a lowered the GEMM without wgmma")
			}
			k := &simt.Kernel{Name: res.Name, Threads: res.Threads, SharedBytes: res.SharedBytes}
			for _, p := range res.Params {
				k.Params = append(k.Params, simt.Param{Name: p.Name, Kind: simt.Ptr, Elem: p.Type.Elem})
			}
			got := cpu.NewBuffer("c", tir.F32, 64*64)
			sb := func(b *cpu.Buffer) *simt.Buffer { return &simt.Buffer{Elem: b.Elem, Vals: b.Vals} }
			if err := simt.Run(res.LL, k, [3]int{1, 1, 1}, []any{sb(a), sb(b), sb(got)}, simt.Options{}); err != nil {
				t.Fatal(err)
			}
			c := want[2].(*cpu.Buffer)
			for i, w := range c.Vals {
				if math.Abs(got.Vals[i]-w) > 1e-4*(1+math.Abs(w)) {
					t.Fatalf("c[%d] = %v, want %v", i, got.Vals[i], w)
				}
			}
		})
	}
}
