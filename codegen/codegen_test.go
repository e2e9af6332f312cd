package codegen

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/passes"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden (LLVM IR, PTX, phase prints)")

// loadKernel parses and verifies testdata/name.tir and returns the module
// and its first kernel's name.
// kvLoops counts kernel k's top-level loops: stdlib flash_fwd walks its
// partial and its full kv blocks in two, the hand-written kernels in one;
// each pipelines its own K and V.
func kvLoops(m *tir.Module, k string) int {
	n := 0
	for _, op := range m.Func(k).Body.Ops {
		if op.Kind == tir.OpFor {
			n++
		}
	}
	return n
}

func loadKernel(t testing.TB, name string) (*tir.Module, string) {
	t.Helper()
	m, ks := loadKernels(t, name)
	return m, ks[0]
}

// loadKernels parses and verifies testdata/name.tir and returns the module
// and its kernels' names.
func loadKernels(t testing.TB, name string) (*tir.Module, []string) {
	t.Helper()
	path := filepath.Join("testdata", name+".tir")
	if strings.Contains(name, "/") {
		path = name
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tir.Parse(path, string(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if err := tir.Verify(m); err != nil {
		t.Fatalf("verify: %v", err)
	}
	var ks []string
	for _, f := range m.Funcs {
		if f.Kernel {
			ks = append(ks, f.Name)
		}
	}
	if len(ks) == 0 {
		t.Fatalf("%s: no kernel", path)
	}
	return m, ks
}

// kernels lists every testdata kernel with what its PTX must contain.
var kernels = []struct {
	name string
	mma  bool
}{
	{"elementwise", false},
	{"reduce", false},
	{"loop", false},
	{"if", false},
	{"dot_bf16", true},
	{"dot_f16", true},
	{"dot_f32", false},
	{"tiny_dot", true},
	{"convert", false},
	{"misc", false},
	{"flash_fwd_d64", true},
	{"flash_fwd_d128_causal", true},
	{"flash_fwd_ifmask", true},
	{"frontend_flash_none", true},
	{"frontend_flash_causal", true},
	{"frontend_flash_document", true},
	{"frontend_flash_window", true},
	{"frontend_flash_f32", false},
	{"frontend_flash_128x128", true},
	{"atomic_dot", true},
	{"dot_wgmma", true},
	{"dot_nsplit", true},
	{"dot_nextent", true},
	{"mask_bits", true},
	{"../tir/testdata/atomic.tir", false},
}

var archs = []string{"sm_80", "sm_90", "sm_90a"}

// findLLCs returns the llc that llc.Find picks plus every other usable
// /usr/lib/llvm-NN/bin/llc of another major version (e.g. 19 and 22), so
// both ends of the supported range are checked where installed.
func findLLCs(t *testing.T) []*llc.Tool {
	t.Helper()
	tool, err := llc.Find()
	if err != nil {
		t.Skipf("no llc: %v", err)
	}
	tools := []*llc.Tool{tool}
	seen := map[int]bool{tool.Major: true}
	for v := llc.MinMajor; v <= 30; v++ {
		if seen[v] {
			continue
		}
		if x, err := llc.Probe(fmt.Sprintf("/usr/lib/llvm-%d/bin/llc", v)); err == nil {
			tools = append(tools, x)
			seen[v] = true
		}
	}
	return tools
}

// TestPTX lowers every testdata kernel for every arch, runs llc and checks
// the PTX: an .entry, no .extern .func (misspelled intrinsic), mma.sync for
// 16-bit dots. ptxas is not run here (no CUDA on dev machines); see
// docs/codegen.md for the command the GPU check uses.
func TestPTX(t *testing.T) {
	for _, tool := range findLLCs(t) {
		t.Run(fmt.Sprintf("llvm%d", tool.Major), func(t *testing.T) { testPTX(t, tool) })
	}
}

func testPTX(t *testing.T, tool *llc.Tool) {
	for _, k := range kernels {
		_, names := loadKernels(t, k.name)
		for _, name := range names {
			for _, arch := range archs {
				t.Run(k.name+"/"+name+"/"+arch, func(t *testing.T) {
					t.Parallel()
					m, _ := loadKernels(t, k.name) // a module of its own
					ptx, res, err := CompilePTX(context.Background(), m, name, Options{Target: testTarget(arch)}, tool)
					if err != nil {
						t.Fatal(err)
					}
					s := string(ptx)
					if !strings.Contains(s, ".entry "+res.Name) {
						t.Errorf("no .entry %s in PTX", res.Name)
					}
					if strings.Contains(s, ".extern .func") {
						t.Errorf("PTX declares an external function")
					}
					if strings.Contains(s, "wgmma") {
						t.Errorf("wgmma in PTX with wgmma=off")
					}
					if got := strings.Contains(s, "mma.sync.aligned.m16n8k16"); got != k.mma {
						t.Errorf("mma.sync.aligned.m16n8k16 in PTX: %v, want %v", got, k.mma)
					}
					if !strings.Contains(s, fmt.Sprintf(".maxntid %d", res.Threads)) {
						t.Errorf("no .maxntid %d", res.Threads)
					}
					if dir := os.Getenv("FAC_PTX_OUT"); dir != "" {
						os.WriteFile(filepath.Join(dir, res.Name+"_"+arch+".ptx"), ptx, 0o644)
					}
				})
			}
		}
	}
}

// TestConversions guards the layout assignment: the attention kernels
// convert only Q through shared memory (K and V go there by cp.async, P
// stays in registers, softmax runs in the accumulator layout, LSE is
// stored from it; O's conversion into 16-byte vectors, coalesceStore, is
// counted apart), and the demand analysis never misses a conversion.
func TestConversions(t *testing.T) {
	before := core.LateConversions()
	for _, k := range kernels {
		m, names := loadKernels(t, k.name)
		for _, n := range names {
			res, err := Lower(m, n, Options{Target: testTarget("sm_90a")})
			if err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			t.Logf("%-24s %-16s conversions=%d coalesced=%d shared=%d", k.name, n, res.Conversions, res.CoalescedStores, res.SharedBytes)
			if k.mma && strings.Contains(k.name, "flash") {
				if res.Conversions != 1 {
					t.Errorf("%s/%s: %d shared-memory conversions, want 1 (Q)", k.name, n, res.Conversions)
				}
				// K and V, each issued by the prologue and by the prefetch (pipeline-loads), per loop.
				if c, want := strings.Count(res.LL, "call void @llvm.nvvm.cp.async.commit.group()"), 4*kvLoops(m, n); c != want {
					t.Errorf("%s/%s: %d cp.async groups, want %d (K, V; prologue and prefetch; per loop)", k.name, n, c, want)
				}
			}
		}
	}
	if n := core.LateConversions() - before; n != 0 {
		t.Errorf("%d conversions were not announced by the demand pass", n)
	}
}

// TestGolden compares the LLVM IR of tiny kernels with testdata/golden.
func TestGolden(t *testing.T) {
	for _, name := range []string{"tiny_elementwise", "tiny_reduce"} {
		t.Run(name, func(t *testing.T) {
			m, k := loadKernel(t, name)
			res, err := Lower(m, k, Options{Target: TargetConfig{Arch: "sm_80"}})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", name+".ll")
			if *update {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, []byte(res.LL), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./codegen -run TestGolden -update)", err)
			}
			if !bytes.Equal(want, []byte(res.LL)) {
				t.Errorf("LLVM IR differs from %s (rerun with -update if intended):\n%s", path, firstDiff(string(want), res.LL))
			}
		})
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  want: %s\n  got:  %s", i+1, x, y)
		}
	}
	return ""
}

func TestErrors(t *testing.T) {
	src := `func @m(%a: tensor<4xi32>) -> tensor<4xi1> {
  %0 = const {value = 0} : tensor<4xi32>
  %1 = cmp %a, %0 {pred = gt} : tensor<4xi1>
  return %1
}

kernel @k(%p: ptr<i32>) attributes {num_warps = 1} {
  %0 = arange {start = 0, end = 4} : tensor<4xi32>
  %1 = call %0 {callee = @m} : tensor<4xi1>
  %2 = cast %1 : tensor<4xi32>
  %3 = splat %p : tensor<4xptr<i32>>
  %4 = addptr %3, %0 : tensor<4xptr<i32>>
  store %4, %2
  return
}
`
	m, err := tir.Parse("calls.tir", src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lower(m, "k", Options{}); err == nil || !strings.Contains(err.Error(), "not inlined") {
		t.Errorf("call: got %v, want a 'not inlined' error", err)
	}
	if _, err := Lower(m, "m", Options{}); err == nil || !strings.Contains(err.Error(), "not a kernel") {
		t.Errorf("func: got %v", err)
	}
	if _, err := Lower(m, "k", Options{Target: TargetConfig{Arch: "sm_75"}}); err == nil {
		t.Errorf("sm_75 accepted")
	}
	src2 := `kernel @k(%p: ptr<i32>) {
  %0 = arange {start = 0, end = 6} : tensor<6xi32>
  %1 = splat %p : tensor<6xptr<i32>>
  %2 = addptr %1, %0 : tensor<6xptr<i32>>
  store %2, %0
  return
}
`
	m2, err := tir.Parse("pow2.tir", src2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lower(m2, "k", Options{}); err == nil || !strings.Contains(err.Error(), "power-of-two") {
		t.Errorf("non-power-of-two: got %v", err)
	}
}

// ---- numerical checks on the simulator ----

func randBuf(rng *rand.Rand, name string, e tir.Elem, n int, scale float64) *cpu.Buffer {
	xs := make([]float64, n)
	for i := range xs {
		switch e {
		case tir.I32, tir.I64:
			xs[i] = float64(rng.Intn(2001) - 1000)
		case tir.I1:
			xs[i] = float64(rng.Intn(2))
		default:
			xs[i] = (rng.Float64()*2 - 1) * scale
		}
	}
	return cpu.FromFloats(name, e, xs)
}

func cloneArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if b, ok := a.(*cpu.Buffer); ok {
			c := *b
			c.Vals = append([]float64(nil), b.Vals...)
			out[i] = &c
		} else {
			out[i] = a
		}
	}
	return out
}

type simCase struct {
	inline     bool   // run the passes up to inline first
	kernel     string // testdata file
	fn         string // kernel in it; "" for the first
	grid       [3]int
	args       func(rng *rand.Rand) []any
	rtol, atol float64
	numWarps   int
	misalign   bool // buffers off vector alignment (scalar fallbacks)
	disable    map[string]bool
	target     []string       // target options set while lowering (code-shaping choices, e.g. dq=bulk)
	attrs      map[string]any // compile-time arguments changed on the kernel's IR (schedule arguments)
	sm90Only   bool           // a kernel only a producer warpgroup runs (consumer_groups)
}

func simCases() []simCase {
	buf := func(name string, e tir.Elem, n int, scale float64) func(*rand.Rand) *cpu.Buffer {
		return func(rng *rand.Rand) *cpu.Buffer { return randBuf(rng, name, e, n, scale) }
	}
	zeros := func(name string, e tir.Elem, n int) *cpu.Buffer { return cpu.NewBuffer(name, e, n) }
	flash := func(kernel string, D, sq, sk, bh int) simCase {
		return simCase{kernel: kernel, grid: [3]int{(sq + 63) / 64, bh, 1}, rtol: 1e-2, atol: 2e-3,
			args: func(rng *rand.Rand) []any {
				return []any{
					buf("q", tir.BF16, bh*sq*D, 1)(rng), buf("k", tir.BF16, bh*sk*D, 1)(rng),
					buf("v", tir.BF16, bh*sk*D, 1)(rng), zeros("o", tir.BF16, bh*sq*D),
					zeros("lse", tir.F32, bh*sq), sq, sk, float32(1 / math.Sqrt(float64(D))),
				}
			}}
	}
	return append([]simCase{
		{kernel: "elementwise", grid: [3]int{2, 1, 1}, rtol: 1e-5, atol: 1e-6, args: func(rng *rand.Rand) []any {
			return []any{buf("x", tir.F32, 2000, 2)(rng), buf("y", tir.BF16, 2000, 2)(rng), zeros("out", tir.F32, 2048), 1998}
		}},
		{kernel: "elementwise", grid: [3]int{2, 1, 1}, rtol: 1e-5, atol: 1e-6, misalign: true, args: func(rng *rand.Rand) []any {
			return []any{buf("x", tir.F32, 2000, 2)(rng), buf("y", tir.BF16, 2000, 2)(rng), zeros("out", tir.F32, 2048), 2000}
		}},
		{kernel: "reduce", grid: [3]int{1, 1, 1}, rtol: 1e-5, atol: 1e-4, args: func(rng *rand.Rand) []any {
			return []any{buf("x", tir.F32, 4096, 100)(rng), zeros("rowmax", tir.F32, 64), zeros("colsum", tir.F32, 64),
				zeros("total", tir.F32, 1), zeros("imin", tir.I32, 64)}
		}},
		{kernel: "loop", grid: [3]int{1, 1, 1}, rtol: 1e-5, atol: 1e-5, args: func(rng *rand.Rand) []any {
			return []any{buf("x", tir.F32, 128*5, 1)(rng), zeros("out", tir.F32, 128), zeros("cnt", tir.I32, 1), 5}
		}},
		{kernel: "if", grid: [3]int{1, 1, 1}, rtol: 1e-5, atol: 1e-6, args: func(rng *rand.Rand) []any {
			return []any{buf("x", tir.F32, 64, 2)(rng), zeros("out", tir.F32, 64), zeros("flag", tir.I32, 1), 50}
		}},
		{kernel: "if", grid: [3]int{1, 1, 1}, rtol: 1e-5, atol: 1e-6, args: func(rng *rand.Rand) []any {
			return []any{buf("x", tir.F32, 64, 2)(rng), zeros("out", tir.F32, 64), zeros("flag", tir.I32, 1), 5}
		}},
		{kernel: "dot_bf16", grid: [3]int{1, 1, 1}, rtol: 1e-4, atol: 1e-4, args: func(rng *rand.Rand) []any {
			return []any{buf("a", tir.BF16, 4096, 1)(rng), buf("b", tir.BF16, 4096, 1)(rng), zeros("c", tir.F32, 4096)}
		}},
		{kernel: "dot_f16", grid: [3]int{1, 1, 1}, rtol: 1e-4, atol: 1e-4, args: func(rng *rand.Rand) []any {
			return []any{buf("a", tir.F16, 4096, 1)(rng), buf("b", tir.F16, 4096, 1)(rng), zeros("c", tir.F32, 4096)}
		}},
		{kernel: "dot_bf16", numWarps: 8, grid: [3]int{1, 1, 1}, rtol: 1e-4, atol: 1e-4, args: func(rng *rand.Rand) []any {
			return []any{buf("a", tir.BF16, 4096, 1)(rng), buf("b", tir.BF16, 4096, 1)(rng), zeros("c", tir.F32, 4096)}
		}},
		{kernel: "dot_f32", grid: [3]int{1, 1, 1}, rtol: 1e-4, atol: 1e-4, args: func(rng *rand.Rand) []any {
			return []any{buf("a", tir.F32, 32*16, 1)(rng), buf("b", tir.F32, 16*64, 1)(rng), zeros("c", tir.F32, 32*64)}
		}},
		{kernel: "convert", grid: [3]int{1, 1, 1}, rtol: 1e-5, atol: 1e-4, args: func(rng *rand.Rand) []any {
			return []any{buf("x", tir.F32, 64*32, 10)(rng), zeros("out", tir.F32, 32*64), zeros("rows", tir.F32, 64*32)}
		}},
		flash("flash_fwd_d64", 64, 128, 128, 2),
		flash("flash_fwd_d64", 64, 100, 75, 1),
		flash("flash_fwd_d128_causal", 128, 128, 128, 1),
		flash("flash_fwd_d128_causal", 128, 70, 70, 1),
		{kernel: "misc", grid: [3]int{1, 1, 1}, rtol: 1e-5, atol: 1e-5, args: func(rng *rand.Rand) []any {
			return []any{buf("a", tir.I32, 128, 0)(rng), buf("h", tir.F16, 128, 3)(rng), buf("b", tir.I1, 128, 0)(rng),
				buf("w", tir.I64, 16, 0)(rng), zeros("oi", tir.I32, 128), zeros("oh", tir.F16, 128), zeros("ob", tir.I1, 128),
				zeros("ow", tir.I64, 16), zeros("os", tir.F32, 1), 6}
		}},
		{kernel: "../tir/testdata/sample.tir", fn: "sample", inline: true, grid: [3]int{3, 1, 1}, rtol: 1e-5, atol: 1e-5,
			args: func(rng *rand.Rand) []any {
				return []any{buf("x", tir.F32, 96, 2)(rng), zeros("out", tir.F32, 12), 11}
			}},
		{kernel: "../tir/testdata/sample.tir", fn: "sample", inline: true, grid: [3]int{3, 1, 1}, rtol: 1e-5, atol: 1e-5,
			args: func(rng *rand.Rand) []any {
				return []any{buf("x", tir.F32, 96, 2)(rng), zeros("out", tir.F32, 12), 0}
			}},
		withWarps(flash("flash_fwd_d64", 64, 128, 96, 1), 8),
		flash("flash_fwd_ifmask", 64, 150, 200, 1),
		misaligned(flash("flash_fwd_d64", 64, 100, 75, 1)),
		withWarps(flash("flash_fwd_d64", 64, 64, 64, 1), 2),
		frontend("frontend_flash_none", "", tir.BF16, 64, 2, 2, 1, 128, 192, false),
		frontend("frontend_flash_none", "flash_fwd.full", tir.BF16, 64, 1, 2, 2, 100, 130, false),
		frontend("frontend_flash_causal", "", tir.BF16, 128, 1, 2, 1, 130, 130, false),
		frontend("frontend_flash_document", "", tir.F16, 64, 1, 1, 1, 150, 150, true),
		frontend("frontend_flash_window", "", tir.BF16, 64, 1, 1, 1, 200, 200, false),
		// Index compares as bits of words (core/bit_mask.go): bounds from
		// below every column to past the last, every order, both sides.
		{kernel: "mask_bits", grid: [3]int{1, 1, 1}, rtol: 1e-4, atol: 1e-4, args: func(rng *rand.Rand) []any {
			lim := make([]float64, 4*64)
			for i := range lim {
				lim[i] = float64(rng.Intn(381) - 60)
			}
			return []any{buf("a", tir.BF16, 64*16, 1)(rng), buf("b", tir.BF16, 16*128, 1)(rng),
				cpu.FromFloats("lim", tir.I32, lim), zeros("out", tir.F32, 7*64*128), 77}
		}},
		frontend("frontend_flash_f32", "", tir.F32, 64, 1, 1, 1, 64, 100, false),
		withWarps(frontend("frontend_flash_128x128", "", tir.BF16, 128, 1, 1, 1, 200, 200, false), 8),
		withWarps(frontend("frontend_flash_128x128_pingpong", "", tir.BF16, 128, 1, 2, 2, 300, 390, false), 8),
		withWarps(frontend("frontend_flash_128x128_pingpong", "flash_fwd.full", tir.BF16, 128, 1, 1, 1, 200, 130, false), 8),
		withWarps(frontend("frontend_flash_128x128_s3", "", tir.BF16, 128, 1, 1, 1, 400, 520, false), 8),
		withWarps(frontend("frontend_flash_128x128_overlap", "", tir.BF16, 128, 1, 2, 2, 300, 390, false), 8),
		withWarps(frontend("frontend_flash_128x128_overlap", "flash_fwd.full", tir.BF16, 128, 1, 1, 1, 200, 130, false), 8),
		// A producer warpgroup issues the copies (warp-specialize); with
		// pingpong consumers too. Odd lengths: the tail and the row bounds.
		withWarps(frontend("frontend_flash_128x128_ws", "", tir.BF16, 128, 1, 2, 2, 300, 390, false), 8),
		withWarps(frontend("frontend_flash_128x128_ws", "flash_fwd.full", tir.BF16, 128, 1, 1, 1, 200, 130, false), 8),
		withWarps(frontend("frontend_flash_128x128_ws_pingpong", "", tir.BF16, 128, 1, 2, 2, 300, 390, false), 8),
		// Three buffers a tile: the producer issues the tail after its loop.
		withAttrs(withWarps(frontend("frontend_flash_128x128_ws", "", tir.BF16, 128, 1, 2, 2, 300, 650, false), 8), "num_stages", int64(3)),
		// flash_fwd_varlen in the tuned sm_90a set (128×128, 8 warps, overlap):
		// three sequences, one of them empty, GQA 2.
		varlenCase("frontend_varlen_128x128", 128, 2, 2, []int{100, 0, 40}, []int{150, 30, 140}),
		// packed_loads: on TMA with a producer warpgroup, three K/V buffers and
		// the softmax arguments (a sequence of 300 keys: the producer's tail),
		// and on TMA without the producer.
		varlenCase("frontend_varlen_128x128_ws", 128, 2, 2, []int{100, 0, 40, 200}, []int{150, 30, 140, 300}),
		withAttrs(varlenCase("frontend_varlen_128x128_ws", 128, 2, 2, []int{100, 0, 40, 200}, []int{150, 30, 140, 300}), "warp_specialize", false),
		bwdCase("frontend_bwd_64x128", 128, 8, 128, 1, 2, 2, 200, 300, false),
		bwdCaseRows("frontend_bwd_64x128_rows", 128, 8, 128, 1, 2, 2, 200, 300),
		bwdCase("frontend_bwd_32x128_w4", 128, 4, 64, 2, 2, 1, 150, 200, true),
		bwdCase("frontend_bwd_32x128_s3", 128, 4, 64, 1, 2, 2, 600, 140, false),
		// A producer warpgroup (warp-specialize) across the GQA loop's runs.
		bwdCase("frontend_bwd_64x128_ws", 128, 8, 128, 1, 2, 2, 200, 300, false),
		bwdCase("frontend_bwd_32x128_w4_ws", 128, 4, 64, 2, 2, 1, 150, 200, true),
		// dQ transposed and masked: by masked red.v2 (the default), and
		// with dq=tma on sm_90a by TMA tensor reductions from a
		// double-buffered staging tile (tma-reduce).
		bwdCaseTMA("frontend_bwd_64x128_tma", 128, 8, 128, 1, 2, 2, 200, 300, false),
		bwdCaseTMA("frontend_bwd_32x128_w4_tma", 128, 4, 64, 2, 2, 1, 150, 200, false),
		withTarget(bwdCaseTMA("frontend_bwd_64x128_tma", 128, 8, 128, 1, 2, 2, 200, 300, false), "dq=tma"),
		withTarget(bwdCaseTMA("frontend_bwd_32x128_w4_tma", 128, 4, 64, 2, 2, 1, 150, 200, false), "dq=tma"),
		// dQᵀ added unmasked into a transposed accumulator with rows of
		// padding, by red.v2 pairs, and with dq=tma by TMA boxes bounded by
		// the rows' stride (a form measured slower than the kernel's own).
		bwdCaseTMA("frontend_bwd_64x128_dq", 128, 8, 128, 1, 2, 2, 200, 300, false),
		bwdCaseTMA("frontend_bwd_32x128_w4_dq", 128, 4, 64, 2, 2, 1, 150, 200, false),
		withTarget(bwdCaseTMA("frontend_bwd_64x128_dq", 128, 8, 128, 1, 2, 2, 200, 300, false), "dq=tma"),
		withTarget(bwdCaseTMA("frontend_bwd_32x128_w4_dq", 128, 4, 64, 2, 2, 1, 150, 200, false), "dq=tma"),
		// K converted through the scratch area (at 0) before V's resident
		// TMA copy, which overwrites it: one thread issues the copy only
		// once every thread has read its part (a barrier).
		bwdCaseTMA("frontend_bwd_64x128_d64", 128, 8, 64, 1, 2, 2, 200, 300, false),
		// The same with a producer warpgroup issuing the TMA copies.
		bwdCaseTMA("frontend_bwd_64x128_ws_tma", 128, 8, 128, 1, 2, 2, 200, 300, false),
		withTarget(bwdCaseTMA("frontend_bwd_64x128_ws_tma", 128, 8, 128, 1, 2, 2, 200, 300, false), "dq=tma"),
		// dQ added through shared memory by deferred cp.reduce.async.bulk.
		withTarget(bwdCase("frontend_bwd_64x128", 128, 8, 128, 1, 2, 2, 200, 300, false), "dq=bulk"),
		withTarget(bwdCase("frontend_bwd_32x128_w4", 128, 4, 64, 2, 2, 1, 150, 200, true), "dq=bulk"),
		// Two pipelined loops sharing their buffers (placeStaged).
		{kernel: "two_loops", grid: [3]int{1, 1, 1}, rtol: 1e-2, atol: 1e-2, args: func(rng *rand.Rand) []any {
			return []any{buf("a", tir.BF16, 64*64, 1)(rng), buf("b", tir.BF16, 3*64*64, 1)(rng), zeros("c", tir.F32, 64*64), 3}
		}},
		// Atomics from 3 programs: sums of exactly representable products
		// (bf16 inputs of few bits) so any order of the adds gives one result.
		{kernel: "atomic_dot", grid: [3]int{3, 1, 1}, rtol: 1e-6, atol: 1e-6, args: func(rng *rand.Rand) []any {
			return []any{smallInts(rng, "a", 3*64*32), smallInts(rng, "b", 32*32), zeros("c", tir.F32, 64*32), zeros("r", tir.F32, 32), 50}
		}},
		{kernel: "../tir/testdata/atomic.tir", grid: [3]int{8, 1, 1}, rtol: 1e-6, atol: 1e-6, args: func(rng *rand.Rand) []any {
			return []any{smallInts(rng, "x", 8*16), zeros("acc", tir.F32, 16), 5}
		}},
		{kernel: "tiny_dot", grid: [3]int{1, 1, 1}, rtol: 1e-4, atol: 1e-4, args: func(rng *rand.Rand) []any {
			return []any{buf("a", tir.BF16, 256, 1)(rng), buf("b", tir.BF16, 256, 1)(rng), zeros("c", tir.F32, 256), zeros("m", tir.F32, 16)}
		}},
		// Without the optional select-async phase: no cp.async, the dots
		// stage their operands from registers.
		without(flash("flash_fwd_d64", 64, 100, 75, 1), "select-async"),
		without(simCase{kernel: "dot_bf16", grid: [3]int{1, 1, 1}, rtol: 1e-4, atol: 1e-4, args: func(rng *rand.Rand) []any {
			return []any{buf("a", tir.BF16, 4096, 1)(rng), buf("b", tir.BF16, 4096, 1)(rng), zeros("c", tir.F32, 4096)}
		}}, "select-async"),
		// Operand forms of wgmma the attention kernels do not use (see the file).
		{kernel: "dot_wgmma", fn: "dot_at", grid: [3]int{1, 1, 1}, rtol: 1e-4, atol: 1e-4, args: func(rng *rand.Rand) []any {
			return []any{buf("a", tir.BF16, 32*128, 1)(rng), buf("b", tir.BF16, 32*16, 1)(rng), zeros("c", tir.F32, 128*16)}
		}},
		{kernel: "dot_wgmma", fn: "dot_wide", grid: [3]int{1, 1, 1}, rtol: 1e-4, atol: 1e-4, args: func(rng *rand.Rand) []any {
			return []any{buf("a", tir.BF16, 64*16, 1)(rng), buf("b", tir.BF16, 16*512, 1)(rng), zeros("c", tir.F32, 64*512)}
		}},
		without(simCase{kernel: "dot_wgmma", fn: "dot_at", grid: [3]int{1, 1, 1}, rtol: 1e-4, atol: 1e-4, args: func(rng *rand.Rand) []any {
			return []any{buf("a", tir.BF16, 32*128, 1)(rng), buf("b", tir.BF16, 32*16, 1)(rng), zeros("c", tir.F32, 128*16)}
		}}, "select-async"),
		// A persistent tile loop around the 128×128 producer forward: 6
		// tiles on 2 programs (the producer loads a tile's Q and K while
		// the consumers store the last tile's O), one tile with no kv
		// blocks; 2 tiles on 3; without the producer (Q refilled behind a
		// CTA barrier). At the end: a case's index seeds its inputs.
		persistent(withWarps(frontend("frontend_flash_128x128_ws_persistent", "", tir.BF16, 128, 1, 2, 2, 300, 390, false), 8), 2),
		persistent(withWarps(frontend("frontend_flash_128x128_ws_persistent", "flash_fwd.full", tir.BF16, 128, 1, 1, 1, 200, 130, false), 8), 3),
		withAttrs(persistent(withWarps(frontend("frontend_flash_128x128_ws_persistent", "", tir.BF16, 128, 1, 2, 2, 300, 390, false), 8), 2), "warp_specialize", false),
		withAttrs(persistent(withWarps(frontend("frontend_flash_128x128_ws_persistent", "", tir.BF16, 128, 1, 2, 2, 300, 650, false), 8), 2), "num_stages", int64(3)),
		// Four consumer warpgroups on 256-row tiles and a producer (640
		// threads; setmaxnreg within the registers at entry), D = 64.
		withWarps(frontend("frontend_flash_256x64_d64_ws", "", tir.BF16, 64, 1, 2, 2, 300, 390, false), 16),
		// Lazy rescaling and the scale folded into exp2's factor: O's
		// rescale runs only in warps where a row's max grew by more than 8;
		// at scale 8 (scores spread over about 130 in log2 units) that
		// happens mid-row too, and a build that never rescales fails this
		// case; a negative scale takes the scores' own multiply.
		withScale(withWarps(frontend("frontend_flash_128x128_ws_lazy_fold", "", tir.BF16, 128, 1, 2, 2, 200, 390, false), 8), 8),
		withScale(withWarps(frontend("frontend_flash_128x128_ws_lazy_fold", "flash_fwd.full", tir.BF16, 128, 1, 1, 1, 200, 130, false), 8), -0.7),
		// prefetch_q: each program prefetches the Q tile of the program
		// num_sms() (3 here) after it; the simulator fails a prefetch
		// outside every buffer, so the last programs' must be masked off.
		withWarps(frontend("frontend_flash_128x128_ws_prefetch", "", tir.BF16, 128, 1, 2, 2, 300, 390, false), 8),
		// full_first: a tile's full blocks before its partial ones (the
		// lists alternate partial and full blocks; the last q tile has none).
		withWarps(frontend("frontend_flash_128x128_ws_fullfirst", "", tir.BF16, 128, 1, 2, 2, 300, 390, false), 8),
		withWarps(frontend("frontend_flash_128x128_ws_fullfirst", "flash_fwd.full", tir.BF16, 128, 1, 1, 1, 200, 130, false), 8),
		// Three consumer groups of one warpgroup on 64-row tiles of one
		// 192-row block-mask row, D = 64, sharing the producer's K/V (512
		// threads); 300 rows: the second program's third group is past
		// the end.
		groups(frontend("frontend_flash_64x128_d64_groups3", "", tir.BF16, 64, 1, 2, 2, 300, 390, false)),
		groups(frontend("frontend_flash_64x128_d64_groups3", "flash_fwd.full", tir.BF16, 64, 1, 1, 1, 200, 130, false)),
		// The same with O through the TMA store: each group stages its
		// own tile in its own scratch.
		withTarget(groups(frontend("frontend_flash_64x128_d64_groups3", "", tir.BF16, 64, 1, 2, 2, 300, 390, false)), "tma-store=on"),
		// Launched heads-minor in groups of 2 of the 4 heads (grid (2, program
		// rows, 2)): a program's rows come from the grid's second axis.
		groups(headsMinorGrid(frontend("frontend_flash_64x128_d64_groups3_hm", "", tir.BF16, 64, 1, 4, 2, 300, 390, false), 2)),
		groups(headsMinorGrid(withLastRow(frontend("frontend_flash_64x128_d64_groups3_hm", "", tir.BF16, 64, 1, 4, 2, 300, 390, false), 300, 390, 192), 2)),
		// The last program's third group starts at row 320 of 300: its
		// loop runs (the last mask row has blocks here) with every row
		// past the end, and stores nothing.
		withLastRow(groups(frontend("frontend_flash_64x128_d64_groups3", "", tir.BF16, 64, 1, 2, 2, 300, 390, false)), 300, 390, 192),
		withTarget(withLastRow(groups(frontend("frontend_flash_64x128_d64_groups3", "", tir.BF16, 64, 1, 2, 2, 300, 390, false)), 300, 390, 192), "tma-store=on"),
		// exp2_poly: three of each eight probabilities from the cubic on
		// the groups (rows past the end: all-masked rows must still sum
		// to 0); all of them under lazy rescaling at scale 8, where
		// exp2's arguments reach +8 and masked ones are -inf. At scale 8
		// a row's O is one or two probabilities' V, so the cubic's 1e-4
		// may round such a P, and then O, to the next bf16 where the
		// interpreter's exact exp2 did not (O's ulp is 3.9e-3 in [1/2, 1)).
		withAttrs(withLastRow(groups(frontend("frontend_flash_64x128_d64_groups3", "", tir.BF16, 64, 1, 2, 2, 300, 390, false)), 300, 390, 192), "exp2_poly", int64(3)),
		withTol(withAttrs(withScale(withWarps(frontend("frontend_flash_128x128_ws_lazy_fold", "", tir.BF16, 128, 1, 2, 2, 200, 390, false), 8), 8), "exp2_poly", int64(8)), 1e-2, 8e-3),
		// V's head dim unlike Q's and K's (HEAD_DIM_V): dimv_sim_test.go; head dims
		// padded to a power of two (pad-dims): paddims_sim_test.go; dQ's
		// accumulator in tiles (DQ_FRAG): bwd_sim_test.go.
	}, slices.Concat(dimVSimCases(), padSimCases(), fragSimCases(), stagingSimCases(), nsplitSimCases(), nExtentSimCases())...)
}

// withScale is frontend case c with the softmax scale s instead of
// 1/sqrt(D).
func withScale(c simCase, s float32) simCase {
	args := c.args
	c.args = func(rng *rand.Rand) []any {
		a := args(rng)
		a[21] = s // after the 5 tensors, 12 strides, heads, kv_group, seqlen_q, seqlen_k
		return a
	}
	return c
}

// smallInts is a buffer of integers in [-3, 3] (bf16 for names a, b, f32
// otherwise): sums of their products are exact in f32 in any order.
func smallInts(rng *rand.Rand, name string, n int) *cpu.Buffer {
	e := tir.F32
	if name == "a" || name == "b" {
		e = tir.BF16
	}
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(rng.Intn(7) - 3)
	}
	return cpu.FromFloats(name, e, xs)
}

func without(c simCase, phase string) simCase {
	c.disable = map[string]bool{phase: true}
	return c
}

func misaligned(c simCase) simCase {
	c.misalign = true
	return c
}

// withTol is c compared with tolerances rtol and atol.
func withTol(c simCase, rtol, atol float64) simCase {
	c.rtol, c.atol = rtol, atol
	return c
}

// withTarget is c lowered with the target options opts (NAME=VALUE).
func withTarget(c simCase, opts ...string) simCase {
	c.target = opts
	return c
}

func withWarps(c simCase, nw int) simCase {
	c.numWarps = nw
	return c
}

// withLastRow is frontend case c (sq × sk queries and keys, q mask
// blocks of qblk rows) with kv blocks in the last row of q blocks too, so
// that its programs run their loops past the sequence's end.
func withLastRow(c simCase, sq, sk, qblk int) simCase {
	args := c.args
	c.args = func(rng *rand.Rand) []any {
		a := args(rng)
		copy(a[22:], simBlockListsRows(sq, sk, qblk, false)) // after the tensors, strides and scalars
		return a
	}
	return c
}

// headsMinorGrid is c launched heads-minor in groups of hg heads, as
// attention.fwdGrid launches it: (a group's heads, the q axis, groups).
func headsMinorGrid(c simCase, hg int) simCase {
	c.grid = [3]int{hg, c.grid[0], c.grid[1] / hg}
	return c
}

// groups is c on sm_90a only, as four warps a group.
func groups(c simCase) simCase {
	c.sm90Only, c.numWarps = true, 4
	return c
}

// withAttrs is c with compile-time argument name set to v (besides those
// set before).
func withAttrs(c simCase, name string, v any) simCase {
	attrs := maps.Clone(c.attrs)
	if attrs == nil {
		attrs = map[string]any{}
	}
	attrs[name] = v
	c.attrs = attrs
	return c
}

// persistent is c for a persistent kernel (the persistent pass) on
// programs programs: the logical grid goes to its grid parameters, and
// the tiles run in reverse order (grid.order; any permutation is valid).
func persistent(c simCase, programs int) simCase {
	g, args := c.grid, c.args
	c.grid = [3]int{programs, 1, 1}
	c.args = func(rng *rand.Rand) []any {
		n := g[0] * g[1] * g[2]
		order := make([]int32, n)
		for s := range order {
			order[s] = int32(n - 1 - s)
		}
		return append(args(rng), g[0], g[1], g[2], programs, cpu.FromI32("grid.order", order))
	}
	return c
}

// frontend is a case for the stdlib flash_fwd kernel as the front end
// emits it: q, o [B, H, sq, D], k, v [B, H/kvGroup, sk, D], lse [B, H, sq].
func frontend(file, fn string, e tir.Elem, D, B, H, kvGroup, sq, sk int, doc bool) simCase {
	return frontendDims(file, fn, e, D, D, B, H, kvGroup, sq, sk, doc)
}

// frontendDims is frontend with V's head dim Dv apart from Q's and K's D
// (HEAD_DIM_V): v [B, H/kvGroup, sk, Dv], o [B, H, sq, Dv].
func frontendDims(file, fn string, e tir.Elem, D, Dv, B, H, kvGroup, sq, sk int, doc bool) simCase {
	Hk := H / kvGroup
	bm, qblk := 64, 128 // the q tile, and the q mask block (SPARSE_Q)
	switch {
	case strings.Contains(file, "128x128"):
		bm = 128
	case strings.Contains(file, "256x"):
		bm, qblk = 256, 256
	case strings.Contains(file, "groups3"):
		bm, qblk = 192, 192 // three groups of 64 rows a program
	}
	return simCase{kernel: file, fn: fn, grid: [3]int{(sq + bm - 1) / bm, B * H, 1}, rtol: 1e-2, atol: 2e-3,
		args: func(rng *rand.Rand) []any {
			args := []any{
				randBuf(rng, "q", e, B*H*sq*D, 1), randBuf(rng, "k", e, B*Hk*sk*D, 1),
				randBuf(rng, "v", e, B*Hk*sk*Dv, 1), cpu.NewBuffer("o", e, B*H*sq*Dv),
				cpu.NewBuffer("lse", tir.F32, B*H*sq),
				H * sq * D, sq * D, D, // q strides
				Hk * sk * D, sk * D, D, // k
				Hk * sk * Dv, sk * Dv, Dv, // v
				H * sq * Dv, sq * Dv, Dv, // o
				H, kvGroup, sq, sk, float32(1 / math.Sqrt(float64(D))),
			}
			args = append(args, simBlockLists(sq, sk, qblk)...)
			if doc {
				args = append(args, simDocArgs(sq, sk)...)
			}
			return args
		}}
}

// simDocArgs are a document mask's aux arguments for sq queries and sk
// keys: ids of documents of 37 tokens, and their length.
func simDocArgs(sq, sk int) []any {
	n := max(sq, sk)
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i / 37)
	}
	return []any{cpu.FromI32("doc", ids), n}
}

// simBlockLists are block-mask arguments for the stdlib kernels' qblk×128
// mask blocks, shared over batch and heads: every kv block listed, the
// even ones as partial and the odd ones as full (the interpreter runs the
// same lists, so any lists compare), listed in a scrambled order, and the
// last q block row empty when there are several (a loop of no iterations:
// the pipelined prologue must not run).
func simBlockLists(sq, sk, qblk int) []any { return simBlockListsRows(sq, sk, qblk, true) }

// simBlockListsRows is simBlockLists, with the last row of q blocks
// empty or not.
func simBlockListsRows(sq, sk, qblk int, emptyLast bool) []any {
	const blk = 128
	nq, nk := (sq+qblk-1)/qblk, (sk+blk-1)/blk
	np, nf := make([]int32, nq), make([]int32, nq)
	pi, fi := make([]int32, nq*nk), make([]int32, nq*nk)
	for r := 0; r < nq; r++ {
		if emptyLast && nq > 1 && r == nq-1 {
			continue
		}
		for c := nk - 1; c >= 0; c-- {
			if c%2 == 0 {
				pi[r*nk+int(np[r])] = int32(c)
				np[r]++
			} else {
				fi[r*nk+int(nf[r])] = int32(c)
				nf[r]++
			}
		}
	}
	return []any{cpu.FromI32("kv_num_blocks", np), cpu.FromI32("kv_indices", pi),
		cpu.FromI32("full_kv_num_blocks", nf), cpu.FromI32("full_kv_indices", fi), 0, 0, nk}
}

// simArchs are the archs TestSimulate lowers every case for: one per
// target. Each case runs again as wgmmaArch (sm_90a with wgmma on) when
// that changes its code.
var simArchs = []string{"sm_80", "sm_90a"}

const wgmmaArch = "sm_90a+wgmma"

// testTarget is the target this package's tests mean by arch: "sm_90a" is
// sm_90a with wgmma off (the mma.sync path), so that each case names its
// path; wgmmaArch and wgmmaTarget are sm_90a with wgmma on, the default.
func testTarget(arch string) TargetConfig {
	switch arch {
	case wgmmaArch:
		return wgmmaTarget
	case "sm_90a":
		return TargetConfig{Arch: "sm_90a", NoWGMMA: true}
	}
	return TargetConfig{Arch: arch}
}

// wgmmaTarget is sm_90a's default target: wgmma, TMA.
var wgmmaTarget = TargetConfig{Arch: "sm_90a"}

// withOpts is t with the target options opts set (NAME=VALUE).
func withOpts(tb testing.TB, t TargetConfig, opts ...string) TargetConfig {
	tb.Helper()
	for _, o := range opts {
		if err := t.Set(o); err != nil {
			tb.Fatal(err)
		}
	}
	return t
}

// TestSimulate runs each kernel's LLVM IR, for each target, on the SIMT
// simulator and compares every output buffer with the CPU interpreter.
func TestSimulate(t *testing.T) {
	for i, c := range simCases() {
		t.Run(fmt.Sprintf("%s%s/%d", filepath.Base(c.kernel), c.fn, i), func(t *testing.T) {
			t.Parallel()
			if testing.Short() && strings.HasPrefix(c.kernel, "flash") {
				t.Skip("short")
			}
			m, name := loadKernel(t, c.kernel)
			if c.inline {
				if err := passes.RunUntil(m, passes.Options{VerifyEach: true}, "inline"); err != nil {
					t.Fatal(err)
				}
			}
			if c.fn != "" {
				name = c.fn
			}
			for k, v := range c.attrs {
				m.Func(name).SetAttr(k, v)
			}
			rng := rand.New(rand.NewSource(int64(i + 1)))
			args := c.args(rng)
			inputs := cloneArgs(args)
			if err := cpu.Launch(m, name, c.grid, args...); err != nil {
				t.Fatalf("cpu: %v", err)
			}
			var ll90 string // sm_90a's default LLVM IR
			for _, arch := range append(simArchs, wgmmaArch) {
				t.Run(arch, func(t *testing.T) {
					if c.sm90Only && arch != wgmmaArch {
						t.Skip("consumer groups need sm_90a's producer warpgroup (wgmma)")
					}
					opts := Options{Target: withOpts(t, testTarget(arch), c.target...), NumWarps: c.numWarps, Disable: c.disable}
					res, err := Lower(m, name, opts)
					if err != nil {
						t.Fatal(err)
					}
					if arch == "sm_90a" {
						ll90 = res.LL
					} else if arch == wgmmaArch && res.LL == ll90 {
						t.Skip("no dot on wgmma")
					}
					for _, seed := range simSeeds() {
						simArgs := cloneArgs(inputs)
						if err := simulateSeed(res.LL, res, c.grid, simArgs, c.misalign, seed); err != nil {
							t.Fatalf("simulate (seed %d): %v", seed, err)
						}
						compareBuffers(t, args, simArgs, c.rtol, c.atol)
					}
				})
			}
		})
	}
}

// compareBuffers checks every output buffer of got against want.
func compareBuffers(t *testing.T, wantArgs, gotArgs []any, rtol, atol float64) {
	t.Helper()
	for j, a := range wantArgs {
		want, ok := a.(*cpu.Buffer)
		if !ok {
			continue
		}
		got := gotArgs[j].(*cpu.Buffer)
		bad := 0
		maxErr := 0.0
		for k := range want.Vals {
			w, g := want.Vals[k], got.Vals[k]
			if e := math.Abs(w - g); e > maxErr && !math.IsInf(w, 0) {
				maxErr = e
			}
			if math.IsInf(w, 0) && w == g || math.IsNaN(w) && math.IsNaN(g) {
				continue
			}
			if !(math.Abs(w-g) <= atol+rtol*math.Abs(w)) {
				if bad < 5 {
					t.Errorf("%s[%d] = %v, want %v", want.Name, k, g, w)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d elements differ", want.Name, bad, len(want.Vals))
		}
		nz := 0
		for _, w := range want.Vals {
			if w != 0 {
				nz++
			}
		}
		t.Logf("%s: max abs error %.3g, %d of %d nonzero", want.Name, maxErr, nz, len(want.Vals))
	}
}
