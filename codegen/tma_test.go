package codegen

import (
	"bytes"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/artifact"
)

// TestTMAParams checks what tma-loads makes of the frontend flash_fwd
// (Q resident; K and V pipelined): one tensor-map parameter per tensor,
// described by its stride and bound parameters; none with tma=off; and
// a note for a load it cannot describe.
func TestTMAParams(t *testing.T) {
	m, name := loadKernel(t, "frontend_flash_128x128")
	res, err := Lower(m, name, Options{Target: wgmmaTarget})
	if err != nil {
		t.Fatal(err)
	}
	got := tensorMaps(res)
	want := &artifact.TMA{Tensor: "k", Swizzle: 128, Box: []int{64, 128, 1, 1},
		Dims: []artifact.TMADim{{Extent: 128}, {Stride: "stride_ks", Bound: "seqlen_k"}, {Stride: "stride_kb"}, {Stride: "stride_kh"}}}
	if len(got) != 3 || got["q"] == nil || got["v"] == nil || !reflect.DeepEqual(got["k"], want) {
		t.Errorf("tensor maps: q %+v, k %+v, v %+v (%d), want k %+v", got["q"], got["k"], got["v"], len(got), want)
	}
	if !strings.Contains(res.LL, `!"grid_constant"`) || !strings.Contains(res.LL, "byval([128 x i8]) align 64") {
		t.Error("tensor maps are not grid-constant byval parameters")
	}

	res, err = Lower(m, name, Options{Target: withOpts(t, wgmmaTarget, "tma=off")})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Params {
		if p.Kind == ParamTensorMap || strings.Contains(res.LL, "cp.async.bulk.tensor") {
			t.Fatalf("tma=off: TMA parameter %s", p.Name)
		}
	}

	// The hand-written kernel offsets its pointers by a flat scalar: no
	// tensor map can hold that per-program offset.
	m, name = loadKernel(t, "flash_fwd_d64")
	if res, err = Lower(m, name, Options{Target: wgmmaTarget}); err != nil {
		t.Fatal(err)
	}
	if len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "cp.async: an offset is not a coordinate times a stride parameter") {
		t.Errorf("notes %q", res.Notes)
	}
}

// TestTMAVarlenParams checks the tensor maps of flash_fwd_varlen with
// packed_loads: its tiles start at a per-sequence token (cu_seqlens[b] + the
// tile's first row) and add the head's offset after the row vector, and
// each map is bounded by the packed tensor's end (total_q, total_k); the
// producer warpgroup issues them.
func TestTMAVarlenParams(t *testing.T) {
	m, name := loadKernel(t, "frontend_varlen_128x128_ws")
	res, err := Lower(m, name, Options{Target: wgmmaTarget})
	if err != nil {
		t.Fatal(err)
	}
	got := tensorMaps(res)
	dims := func(tok, bound, head string) []artifact.TMADim {
		return []artifact.TMADim{{Extent: 128}, {Stride: tok, Bound: bound}, {Stride: head}}
	}
	want := map[string]*artifact.TMA{
		"q": {Tensor: "q", Swizzle: 128, Box: []int{64, 128, 1}, Dims: dims("stride_qt", "total_q", "stride_qh")},
		"k": {Tensor: "k", Swizzle: 128, Box: []int{64, 128, 1}, Dims: dims("stride_kt", "total_k", "stride_kh")},
		"v": {Tensor: "v", Swizzle: 128, Box: []int{64, 128, 1}, Dims: dims("stride_vt", "total_k", "stride_vh")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tensor maps:\n got %+v %+v %+v\nwant %+v %+v %+v", got["q"], got["k"], got["v"], want["q"], want["k"], want["v"])
	}
	if !strings.Contains(res.LL, "setmaxnreg") {
		t.Error("no producer warpgroup (setmaxnreg)")
	}
}

// tensorMaps are a lowered kernel's tensor-map parameters by the tensor
// they map.
func tensorMaps(res *Result) map[string]*artifact.TMA {
	got := map[string]*artifact.TMA{}
	for _, p := range res.Params {
		if p.Kind == ParamTensorMap {
			got[p.TMA.Tensor] = p.TMA
		}
	}
	return got
}

// TestTMAPrintGolden compares the layout-annotated IR of the frontend
// flash_fwd after tma-loads (sm_90a, wgmma) with testdata/golden/phases: Q,
// K and V staged "…, TMA".
func TestTMAPrintGolden(t *testing.T) {
	m, k := loadKernel(t, "frontend_flash_128x128")
	var out bytes.Buffer
	if _, err := Lower(m, k, Options{Target: wgmmaTarget, PrintAfter: "tma-loads", Out: &out}); err != nil {
		t.Fatal(err)
	}
	if n, want := strings.Count(out.String(), ", TMA"), 1+2*kvLoops(m, k); n != want {
		t.Errorf("%d loads staged by TMA, want %d (Q; K, V of each loop)", n, want)
	}
	checkGolden(t, filepath.Join("testdata", "golden", "phases", "frontend_flash_128x128.sm_90a-wgmma.tma-loads.txt"), out.Bytes())
}

// TestWarpSpecializePrintGolden compares the frontend flash_fwd with
// warp_specialize after warp-specialize (sm_90a) with
// testdata/golden/phases: every TMA load issued by the producer, which
// runs the ops marked "producer".
func TestWarpSpecializePrintGolden(t *testing.T) {
	m, k := loadKernel(t, "frontend_flash_128x128_ws")
	var out bytes.Buffer
	res, err := Lower(m, k, Options{Target: wgmmaTarget, PrintAfter: "warp-specialize", Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), ", issued by the producer"); n != 4 {
		t.Errorf("%d loads issued by the producer, want 4 (Q, K, V and the tail)", n)
	}
	if res.Threads != 384 {
		t.Errorf("%d threads, want 384", res.Threads)
	}
	checkGolden(t, filepath.Join("testdata", "golden", "phases", "frontend_flash_128x128_ws.sm_90a.warp-specialize.txt"), out.Bytes())
}

// TestWarpSpecializeStages: beside a producer, the loop's tail (the last
// V) is the producer's at any stage count, so the kernel keeps its
// producer at three and four buffers (flash_fwd's tuned D = 128 set has
// three).
func TestWarpSpecializeStages(t *testing.T) {
	for _, n := range []int64{2, 3, 4} {
		m, k := loadKernel(t, "frontend_flash_128x128_ws")
		m.Func(k).SetAttr("num_stages", n)
		res, err := Lower(m, k, Options{Target: wgmmaTarget})
		if err != nil {
			t.Fatal(err)
		}
		tail := slices.ContainsFunc(res.Notes, func(s string) bool { return strings.Contains(s, "issued by the producer warp after the loop") })
		if res.Threads != 384 || !tail {
			t.Errorf("num_stages = %d: %d threads, notes %q; want 384 and the tail issued by the producer", n, res.Threads, res.Notes)
		}
	}
}

// TestPersistentStages: a persistent producer forward keeps its producer
// with the next tile's block counts carried (persistent-prefetch), and at
// three buffers, where the stores' exchange would take it past 227 KiB of
// shared memory, stores from registers instead and fits; at two it keeps
// the exchange.
func TestPersistentStages(t *testing.T) {
	for _, n := range []int64{2, 3} {
		m, k := loadKernel(t, "frontend_flash_128x128_ws_persistent")
		m.Func(k).SetAttr("num_stages", n)
		before := m.String()
		res, err := Lower(m, k, Options{Target: wgmmaTarget})
		if err != nil {
			t.Fatal(err)
		}
		// The second lowering starts from the same IR: Lower leaves it as it was.
		if m.String() != before {
			t.Fatalf("num_stages = %d: Lower changed the module", n)
		}
		direct := slices.ContainsFunc(res.Notes, func(s string) bool { return strings.Contains(s, "stores from registers") })
		if direct {
			// The retry is the kernel a fresh lowering without the exchange
			// gives (no state of the first attempt's target leaks into it).
			tg, err := targetFor(wgmmaTarget)
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := lowerOnce(m.Func(k), k, Options{Target: wgmmaTarget}, tg, 8, false, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if fresh.LL != res.LL || fresh.SharedBytes != res.SharedBytes {
				t.Errorf("num_stages = %d: the retry (%d bytes) differs from a fresh lowering without the exchange (%d bytes)", n, res.SharedBytes, fresh.SharedBytes)
			}
		}
		if res.Threads != 384 || res.SharedBytes > 227<<10 || direct != (n == 3) || (res.CoalescedStores == 0) != direct {
			t.Errorf("num_stages = %d: %d threads, %d bytes of shared memory, %d coalesced stores, notes %q; want 384, at most %d, and stores from registers only at 3",
				n, res.Threads, res.SharedBytes, res.CoalescedStores, res.Notes, 227<<10)
		}
	}
}

// TestWarpSpecializeOff: a kernel asking for warp_specialize whose copies
// do not qualify compiles without a producer and says why (fac compile -v).
func TestWarpSpecializeOff(t *testing.T) {
	for _, c := range []struct {
		opt, stages string
		why         string
	}{
		{"release=barrier", "2", "warp_specialize: off: release=barrier"},
	} {
		m, k := loadKernel(t, "frontend_flash_128x128_ws")
		n, _ := strconv.Atoi(c.stages)
		m.Func(k).SetAttr("num_stages", int64(n))
		res, err := Lower(m, k, Options{Target: withOpts(t, wgmmaTarget, c.opt)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Threads != 256 || !slices.ContainsFunc(res.Notes, func(s string) bool { return strings.HasPrefix(s, c.why) }) {
			t.Errorf("%s num_stages=%s: %d threads, notes %q; want 256 and %q", c.opt, c.stages, res.Threads, res.Notes, c.why)
		}
	}
}

// TestTMARiders checks that tma-riders copies the backward's rows of
// lse_log2 and Δ with Q's TMA fills (a cp.async.bulk each, read from
// shared memory: no global load of them is left in the loop), and that
// disabling the phase, riders=off, or a kernel without TMA keeps the plain
// loads.
func TestTMARiders(t *testing.T) {
	m, name := loadKernel(t, "frontend_bwd_64x128_rows")
	res, err := Lower(m, name, Options{Target: wgmmaTarget, NumWarps: 8})
	if err != nil {
		t.Fatal(err)
	}
	var rides []string
	for _, n := range res.Notes {
		if strings.Contains(n, "rides with") {
			rides = append(rides, n)
		}
	}
	if len(rides) != 2 || !strings.Contains(rides[0], "lse_log2 rides with q's TMA copies") || !strings.Contains(rides[1], "delta rides with q's TMA copies") {
		t.Errorf("notes %q, want lse_log2 and delta riding with q", res.Notes)
	}
	// The prologue's fill and the body's prefetch, two vectors each.
	if n := strings.Count(res.LL, "cp.async.bulk.shared::cluster.global.mbarrier"); n != 4 {
		t.Errorf("%d bulk copies of vectors, want 4", n)
	}
	for _, opts := range []Options{
		{Target: wgmmaTarget, NumWarps: 8, Disable: map[string]bool{"tma-riders": true}},
		{Target: withOpts(t, wgmmaTarget, "riders=off"), NumWarps: 8},
		{Target: withOpts(t, wgmmaTarget, "tma=off"), NumWarps: 8},
	} {
		res, err := Lower(m, name, opts)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(res.LL, "cp.async.bulk.shared::cluster.global.mbarrier") || slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "rides") }) {
			t.Errorf("%+v: vectors still ride", opts.Disable)
		}
	}
}

// TestDQBulkArg: the kernel's dq_bulk schedule argument stages dQ for one
// bulk reduction a tile as the target's dq=bulk does; without either, the
// adds stay reds.
func TestDQBulkArg(t *testing.T) {
	m, name := loadKernel(t, "frontend_bwd_64x128_frag")
	for _, on := range []bool{false, true} {
		m.Func(name).SetAttr("dq_bulk", on)
		res, err := Lower(m, name, Options{Target: wgmmaTarget, NumWarps: 8})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(res.LL, "cp.reduce.async.bulk"); got != on {
			t.Errorf("dq_bulk = %v: bulk reductions %v", on, got)
		}
	}
}

// TestPDL: a kernel's pdl argument starts it with griddepcontrol's launch
// of the next kernel and wait for the previous one on sm_90a; sm_80 has no
// such instructions and ignores it.
func TestPDL(t *testing.T) {
	m, name := loadKernel(t, "frontend_combine")
	for _, c := range []struct {
		target TargetConfig
		on     bool
		want   bool
	}{{wgmmaTarget, false, false}, {wgmmaTarget, true, true}, {TargetConfig{Arch: "sm_80"}, true, false}} {
		m.Func(name).SetAttr("pdl", c.on)
		res, err := Lower(m, name, Options{Target: c.target})
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(res.LL, "griddepcontrol.launch_dependents;") && strings.Contains(res.LL, "griddepcontrol.wait;")
		if got != c.want {
			t.Errorf("%s pdl = %v: griddepcontrol %v", c.target.Arch, c.on, got)
		}
	}
}
