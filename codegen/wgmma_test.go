package codegen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/tir"
)

// wgmmaKernels are the testdata kernels whose every dot runs on sm_90a's
// wgmma (4 or 8 warps, 64-row blocks per warpgroup).
var wgmmaKernels = []string{
	"dot_bf16", "dot_f16", "flash_fwd_d64", "flash_fwd_d128_causal", "flash_fwd_ifmask",
	"frontend_flash_none", "frontend_flash_causal", "frontend_flash_document", "frontend_flash_window",
	"frontend_flash_128x128", "frontend_flash_128x128_overlap", "frontend_flash_128x128_pingpong", "atomic_dot", "dot_wgmma",
	"frontend_flash_128x128_ws", "frontend_flash_128x128_ws_pingpong",
}

// TestWGMMAPTX lowers the wgmma kernels for sm_90a with wgmma on through
// every installed llc and checks the PTX: wgmma.mma_async and its fences,
// commit and wait, the proxy fence for cp.async tiles, no mma.sync, no
// external function;
// the attention kernels convert nothing and copy Q, K and V by TMA. With wgmma=off sm_90a has no wgmma (TestPTX).
func TestWGMMAPTX(t *testing.T) {
	for _, tool := range findLLCs(t) {
		t.Run(fmt.Sprintf("llvm%d", tool.Major), func(t *testing.T) {
			for _, k := range wgmmaKernels {
				m, names := loadKernels(t, k)
				for _, name := range names {
					t.Run(k+"/"+name, func(t *testing.T) {
						ptx, res, err := CompilePTX(context.Background(), m, name, Options{Target: wgmmaTarget}, tool)
						if err != nil {
							t.Fatal(err)
						}
						s := string(ptx)
						for _, want := range []string{".entry " + res.Name, "wgmma.mma_async.sync.aligned.m64n", "wgmma.fence.sync.aligned;",
							"wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;"} {
							if !strings.Contains(s, want) {
								t.Errorf("no %q in PTX", want)
							}
						}
						for _, bad := range []string{".extern .func", "mma.sync.aligned"} {
							if strings.Contains(s, bad) {
								t.Errorf("%q in PTX", bad)
							}
						}
						if strings.Contains(k, "flash") {
							// Q is resident in shared memory (stage-resident): no conversion.
							if res.Conversions != 0 {
								t.Errorf("%d shared-memory conversions, want 0 (Q resident)", res.Conversions)
							}
							// O leaves the accumulator layout through shared
							// memory, then goes out in 16-byte vectors
							// (coalesceStore); f32 fragments already fill sectors.
							if want := strings.Count(s, "st.global.v4.b32"); res.CoalescedStores != min(want, 1) {
								t.Errorf("%d coalesced stores, %d 16-byte vector stores in PTX", res.CoalescedStores, want)
							}
							t.Logf("coalesced stores %d, shared %d", res.CoalescedStores, res.SharedBytes)
							// The overlapped forward's last V is issued by the kv
							// loop's last iteration (pipetail.go), not after it.
							// With a producer warpgroup (warp-specialize), it issues
							// every copy, the tail after its loop.
							ws := strings.Contains(k, "_ws")
							tail := false
							for _, n := range res.Notes {
								tail = tail || strings.Contains(n, "issued by the last iteration of the loop") ||
									ws && strings.Contains(n, "issued by the producer warp after the loop")
							}
							if want := strings.Contains(k, "overlap") || strings.Contains(k, "pingpong") || ws; tail != want { // the snapshots are overlapped
								t.Errorf("tail issued by the loop: %v, want %v (notes %q)", tail, want, res.Notes)
							}
							if ws {
								checkProducer(t, s, res)
								return
							}
							// Q once; K and V each issued by the prologue and by the prefetch (pipeline-loads) of each loop;
							// with overlap-softmax, the last V (the loop's tail) once more.
							loads := 1 + 4*kvLoops(m, name)
							if tail {
								loads++
							}
							if c := strings.Count(res.LL, "call void @llvm.nvvm.cp.async.commit.group()"); c != loads {
								t.Errorf("%d cp.async groups, want %d (Q; K, V in the prologue and the prefetch of each loop)", c, loads)
							}
							// The tiles (whole 1024-byte patterns), then, with TMA
							// (tma-loads: the frontend kernels, whose addresses are
							// tiles of their tensors), 128 bytes of mbarriers and
							// those loads, a box per 64 columns.
							n := strings.Count(s, "cp.async.bulk.tensor.4d")
							if want := min(n, 1) * 128; res.SharedBytes%1024 != want {
								t.Errorf("shared memory %d is not whole 1024-byte tiles and %d bytes of mbarriers", res.SharedBytes, want)
							}
							// cp.async tiles go to the async proxy through a fence;
							// TMA writes through it.
							if n == 0 && !strings.Contains(s, "fence.proxy.async.shared::cta;") {
								t.Error("cp.async tiles and no proxy fence")
							}
							if n > 0 {
								// The resident Q is waited for after the loop's prologue
								// has issued the first K and V (DeferToRegion).
								w := strings.Index(s, "mbarrier.try_wait")
								if c := strings.Count(s[:max(w, 0)], "cp.async.bulk.tensor.4d"); c < 3 {
									t.Errorf("%d TMA copies before the first mbarrier wait, want Q, K and V's", c)
								}
							}
							if strings.HasPrefix(k, "frontend_flash_128x128") && res.SharedBytes != 5*32768+128 {
								// Q, two K and two V buffers and the mbarriers: the
								// overlapped loop's tail and the epilogue's store
								// conversion take no more (placeStaged, retireResident).
								t.Errorf("shared memory %d, want %d", res.SharedBytes, 5*32768+128)
							}
							if n%loads != 0 || (n == 0) == strings.HasPrefix(k, "frontend") {
								t.Errorf("%d TMA copies, want a multiple of %d (none: the hand-written kernels)", n, loads)
							}
						}
						if dir := os.Getenv("FAC_PTX_OUT"); dir != "" {
							os.WriteFile(filepath.Join(dir, res.Name+"_sm_90a_wgmma.ptx"), ptx, 0o644)
						}
					})
				}
			}
		})
	}
}

// checkProducer checks a flash_fwd with a producer warpgroup: 384
// threads, setmaxnreg 24/240, every TMA copy (Q, K, V and the tail, two
// boxes each) in the producer's code, the consumers' barriers counted over
// their 256 threads, empty mbarriers instead of release counters, and the
// consumers' empty commit groups for Q and the prologue's K and V only.
func checkProducer(t *testing.T, ptx string, res *Result) {
	t.Helper()
	if res.Threads != 384 {
		t.Errorf("%d threads, want 384", res.Threads)
	}
	dec, inc := strings.Index(ptx, "setmaxnreg.dec.sync.aligned.u32 24;"), strings.Index(ptx, "setmaxnreg.inc.sync.aligned.u32 240;")
	if dec < 0 || inc < dec {
		t.Fatalf("setmaxnreg dec 24 at %d, inc 240 at %d: want both, the producer's first", dec, inc)
	}
	// The LLVM IR's blocks: the producer's are named producer*.
	var prod, cons strings.Builder
	in := &cons
	for _, line := range strings.Split(res.LL, "\n") {
		if lab, ok := strings.CutSuffix(line, ":"); ok && !strings.HasPrefix(line, "\t") {
			in = &cons
			if strings.HasPrefix(lab, "producer") {
				in = &prod
			}
		}
		in.WriteString(line + "\n")
	}
	p, c := prod.String(), cons.String()
	if n := strings.Count(p, "cp.async.bulk.tensor.4d"); n != 8 || strings.Contains(c, "cp.async.bulk.tensor") {
		t.Errorf("%d TMA copies in the producer (want 8), consumers issue some: %v", n, strings.Contains(c, "cp.async.bulk.tensor"))
	}
	for _, bad := range []string{"atom.acq_rel", "llvm.nvvm.barrier0()\n\t%"} {
		if strings.Contains(c[strings.Index(c, "setmaxnreg.inc"):], bad) {
			t.Errorf("%q in the consumers' code", bad)
		}
	}
	if !strings.Contains(c, "bar.sync 0, 256;") || !strings.Contains(c, "mbarrier.arrive.shared::cta.b64") {
		t.Error("no consumer barrier or no empty-barrier arrival in the consumers' code")
	}
	if !strings.Contains(p, "mbarrier.try_wait.parity") {
		t.Error("the producer does not wait for empty buffers")
	}
	// The consumers skip what only the copies read (copyOnlyOps): no
	// block-list entry is loaded for nothing, here or in the producer.
	if dead := deadLoads(ptx); len(dead) > 0 {
		t.Errorf("global loads whose results nothing reads: %v", dead)
	}
	if c := strings.Count(res.LL, "call void @llvm.nvvm.cp.async.commit.group()"); c != 3 {
		t.Errorf("%d cp.async groups, want 3 (Q, the prologue's K and V)", c)
	}
	if res.SharedBytes != 5*32768+128 {
		t.Errorf("shared memory %d, want %d", res.SharedBytes, 5*32768+128)
	}
}

// TestWGMMAGoldenPTX compares the wgmma PTX of the stdlib flash_fwd (bf16,
// D=128, causal) with testdata/golden/ptx (same llc rule as TestGoldenPTX).
func TestWGMMAGoldenPTX(t *testing.T) {
	tool, err := llc.Find()
	if err != nil {
		t.Skipf("no llc: %v", err)
	}
	if !*update {
		b, err := os.ReadFile(goldenLLC)
		if err != nil {
			t.Fatalf("%v (run go test ./codegen -run GoldenPTX -update)", err)
		}
		if want := strings.TrimSpace(string(b)); want != fmt.Sprint(tool.Major) {
			t.Skipf("golden PTX was made with llc %s, found %s", want, tool)
		}
	}
	// The 64×64 tile, and the tuned 128×128 tile on two warpgroups with
	// pingpong turns, with three pipeline stages, and with P·V overlapping
	// the next block's softmax (overlap-softmax; wgmma.wait_group 1).
	for kernel, golden := range map[string]string{
		"frontend_flash_causal":           "flash_fwd_bf16_d128_causal.sm_90a-wgmma.ptx",
		"frontend_flash_128x128_pingpong": "flash_fwd_bf16_d128_causal_128x128_pingpong.sm_90a-wgmma.ptx",
		"frontend_flash_128x128_s3":       "flash_fwd_bf16_d128_causal_128x128_stages3.sm_90a-wgmma.ptx",
		"frontend_flash_128x128_overlap":  "flash_fwd_bf16_d128_causal_128x128_overlap.sm_90a-wgmma.ptx",
	} {
		m, k := loadKernel(t, kernel)
		ptx, res, err := CompilePTX(context.Background(), m, k, Options{Target: wgmmaTarget}, tool)
		if err != nil {
			t.Fatal(err)
		}
		checkGolden(t, filepath.Join("testdata", "golden", "ptx", golden), ptx)
		if kernel == "frontend_flash_128x128_overlap" {
			// Q (32 KB) and two stages of K and V (128 KB); the V of the last
			// P·V, after the loop, takes the loop's buffers (placeStaged).
			if most := 160<<10 + 1024; res.SharedBytes > most {
				t.Errorf("%s: %d bytes of shared memory, want at most %d", kernel, res.SharedBytes, most)
			}
		}
		// The driver's JIT (cuLink, relocatable code) serializes every wgmma
		// of a kernel that calls a function (ptxas C7509); an IEEE f32
		// division has an out-of-line slow path, so none may appear.
		if text := string(ptx); strings.Contains(text, "div.rn.f32") || regexp.MustCompile(`\bcall(\.uni)?\s`).MatchString(text) {
			t.Errorf("%s: the PTX divides with div.rn.f32 or calls a function", kernel)
		}
		if strings.HasSuffix(kernel, "overlap") || strings.HasSuffix(kernel, "pingpong") {
			// The wait for the previous P·V (RS form) sits behind a scheduling
			// fence (core.SchedulingFence), after the softmax.
			if !strings.Contains(string(ptx), "// %sched.fence") {
				t.Errorf("%s: no scheduling fence before the P·V wait", kernel)
			}
		}
		if kernel == "frontend_flash_128x128_pingpong" {
			// One turn per kv block: Q·Kᵀ and the previous P·V together.
			text := string(ptx)
			loop := text[strings.Index(text, "// %for.hdr"):strings.Index(text, "// %for.exit")]
			if s, a := strings.Count(loop, "bar.sync %r"), strings.Count(loop, "bar.arrive %r"); s != 1 || a != 1 {
				t.Errorf("pingpong loop has %d turn waits and %d hand-overs, want 1 and 1", s, a)
			}
		}
	}
}

// TestPipelineTailConditions checks that the overlapped loop's tail is
// issued by the loop only where an issued copy is sure to be waited for by
// the thread that freed its buffer: with two stages and buffers released
// without a CTA barrier (pipetail.go); otherwise it is loaded after the
// loop as before. The simulator runs the cases that take it
// (frontend_flash_128x128_overlap, _pingpong).
func TestPipelineTailConditions(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "frontend_flash_128x128_overlap.tir"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, from, to, opt string
		tail                bool
	}{
		{"two stages", "", "", "", true},
		{"three stages", "num_stages = 2", "num_stages = 3", "", false},
		{"CTA barrier per iteration", "", "", "release=barrier", false},
		{"cp.async", "", "", "tma=off", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := wgmmaTarget
			if c.opt != "" {
				target = withOpts(t, target, c.opt)
			}
			text := string(src)
			if c.from != "" {
				if !strings.Contains(text, c.from) {
					t.Fatalf("no %q in the snapshot", c.from)
				}
				text = strings.ReplaceAll(text, c.from, c.to)
			}
			m, err := tir.Parse("overlap.tir", text)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Lower(m, "flash_fwd", Options{Target: target})
			if err != nil {
				t.Fatal(err)
			}
			tail := false
			for _, n := range res.Notes {
				tail = tail || strings.Contains(n, "(its tail)")
			}
			if tail != c.tail {
				t.Errorf("tail issued by the loop: %v, want %v (notes %q)", tail, c.tail, res.Notes)
			}
		})
	}
}

// predLoadRE is a masked scalar load as codegen emits it (an asm block:
// the default moved in, then the predicated load).
var predLoadRE = regexp.MustCompile(`@p ld\.global\.b32 (%r\d+),`)

// deadLoads lists the registers of ptx's masked scalar loads that appear
// nowhere but in their load and its default's move: loads LLVM could not
// delete (asm with side effects) and nothing reads.
func deadLoads(ptx string) []string {
	var dead []string
	for _, m := range predLoadRE.FindAllStringSubmatch(ptx, -1) {
		if n := len(regexp.MustCompile(regexp.QuoteMeta(m[1])+`\b`).FindAllStringIndex(ptx, -1)); n <= 2 {
			dead = append(dead, m[1])
		}
	}
	return dead
}
