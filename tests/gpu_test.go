//go:build gpu

package tests

import (
	"fmt"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// TestGPUMatchesReference is the GPU back end's acceptance test: flash_fwd
// on the GPU against naive float64 attention for every stdlib mask and
// score, bf16 and f16, head dims 64 and 128, unaligned and unequal seqlens.
// Build here with `go test -c -tags gpu -o .gpu/tests.test ./tests` and run
// the binary on the GPU machine.
func TestGPUMatchesReference(t *testing.T) {
	gpu := openTestGPU(t)
	t.Logf("device %s (%s)", gpu.Name, gpu.Arch)
	seqs := [][2]int{{1, 1}, {127, 127}, {128, 128}, {1000, 1000}, {127, 1000}, {1000, 128}}
	if !testing.Short() {
		seqs = append(seqs, [2]int{4096, 4096})
	}
	for _, dtype := range []string{"bf16", "f16"} {
		tol := gpuTol(dtype)
		for _, d := range []int{64, 128} {
			for mi, m := range masks {
				for si, s := range scores {
					fwd, err := fac.CompileForward(fac.Options{Mask: m.expr, Score: s.expr, DType: dtype}, d)
					if err != nil {
						t.Fatal(err)
					}
					for li, sl := range seqs {
						if sl[0]*sl[1] > 1<<22 && (si > 0 || d == 64) {
							continue // the long case once per mask is enough
						}
						sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: sl[0], SeqK: sl[1], Dim: d}
						if sl[0]*sl[1] >= 1<<17 {
							sh.Heads, sh.KVHeads = 2, 1 // keep the float64 reference quick
						}
						in := inputs(sh, uint64(1000*mi+100*si+li))
						name := fmt.Sprintf("%s/d%d/%s/%s/%dx%d", dtype, d, m.expr, s.expr, sl[0], sl[1])
						o, lse, err := fwd.RunCUDA(gpu, only(fwd, in), sh)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						ro, rlse := goReference(roundInputs(in, dtype), sh, m.fn, s.fn)
						checkFlat(t, name, o, lse, ro, rlse, tol)
					}
				}
			}
		}
	}
}

// TestGPULaunchDevicePointers runs the kernel on caller-owned device buffers
// in the [B, S, H, D] layout (strided heads), on a stream, with no copies by
// fac, and checks the result.
func TestGPULaunchDevicePointers(t *testing.T) {
	gpu := openTestGPU(t)
	sh := fac.Shape{Batch: 2, Heads: 4, KVHeads: 2, SeqQ: 300, SeqK: 200, Dim: 64}
	fwd, err := fac.CompileForward(fac.Options{Mask: "document", DType: "bf16"}, sh.Dim)
	if err != nil {
		t.Fatal(err)
	}
	in := inputs(sh, 5) // contiguous [B, H, S, D]
	toBSHD := func(x []float32, h, s int) []uint16 {
		out := make([]uint16, len(x))
		for b := 0; b < sh.Batch; b++ {
			for hh := 0; hh < h; hh++ {
				for i := 0; i < s; i++ {
					for d := 0; d < sh.Dim; d++ {
						out[((b*s+i)*h+hh)*sh.Dim+d] = half.F32ToBF16(x[((b*h+hh)*s+i)*sh.Dim+d])
					}
				}
			}
		}
		return out
	}
	up := func(x []uint16) uintptr { return toDevice(t, x) }
	q, k, v := up(toBSHD(in.Q, sh.Heads, sh.SeqQ)), up(toBSHD(in.K, sh.KVHeads, sh.SeqK)), up(toBSHD(in.V, sh.KVHeads, sh.SeqK))
	poison := func(n int) []uint16 { // all-ones: NaN in bf16 and in f32
		x := make([]uint16, n)
		for i := range x {
			x[i] = 0xffff
		}
		return x
	}
	o := up(poison(len(in.Q)))
	lseBuf := up(poison(2 * sh.Batch * sh.Heads * sh.SeqQ))
	doc := in.Aux["doc"].([]int32)
	dp, err := cuda.MemAlloc(len(doc) * 4)
	if err != nil {
		t.Fatal(err)
	}
	defer cuda.MemFree(dp)
	if err := cuda.HtoD(dp, doc); err != nil {
		t.Fatal(err)
	}
	s, err := cuda.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	stride := func(h, seq int) [3]int { return [3]int{seq * h * sh.Dim, sh.Dim, h * sh.Dim} }
	err = fwd.LaunchCUDA(gpu, fac.DeviceTensors{Q: q, K: k, V: v, O: o, LSE: lseBuf,
		QStride: stride(sh.Heads, sh.SeqQ), KStride: stride(sh.KVHeads, sh.SeqK), VStride: stride(sh.KVHeads, sh.SeqK), OStride: stride(sh.Heads, sh.SeqQ),
		Aux: map[string]fac.DeviceAux{"doc": {Ptr: uintptr(dp), Len: len(doc)}}}, sh, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	ob := make([]uint16, len(in.Q))
	if err := cuda.DtoH(ob, cuda.DevicePtr(o)); err != nil {
		t.Fatal(err)
	}
	lse := make([]float32, sh.Batch*sh.Heads*sh.SeqQ)
	if err := cuda.DtoH(lse, cuda.DevicePtr(lseBuf)); err != nil {
		t.Fatal(err)
	}
	// Back to [B, H, S, D] for the comparison.
	got := make([]float32, len(ob))
	for b := 0; b < sh.Batch; b++ {
		for hh := 0; hh < sh.Heads; hh++ {
			for i := 0; i < sh.SeqQ; i++ {
				for d := 0; d < sh.Dim; d++ {
					got[((b*sh.Heads+hh)*sh.SeqQ+i)*sh.Dim+d] = half.BF16ToF32(ob[((b*sh.SeqQ+i)*sh.Heads+hh)*sh.Dim+d])
				}
			}
		}
	}
	ro, rlse := goReference(roundInputs(in, "bf16"), sh, masks[5].fn, nil)
	checkFlat(t, "device pointers, BSHD strides, document mask", got, lse, ro, rlse, 2e-2)
}
