package tests

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/reference"
	"github.com/fac-compiler/fac/runtime/cpu"
	"github.com/fac-compiler/fac/tir"
)

// sharedFnSrc is a dense attention forward written twice: attn_fns with
// the stdlib's shared functions (softmax.fa, kv_block.fa), attn_hand with
// their bodies written out.
const sharedFnSrc = `
kernel attn_fns<M: i32 = 16, N: i32 = 16, D: i32 = 32, DTYPE: type = f32, mask: mask = causal>(
    q: ptr[DTYPE], k: ptr[DTYPE], v: ptr[DTYPE], o: ptr[DTYPE], lse: ptr[f32], seqlen_q: i32, seqlen_k: i32, scale: f32) {
    let offs_m = program_id(0) * M + arange(0, M)
    let rows = offs_m[:, None]
    let row_ok = rows < seqlen_q
    let offs_d = arange(0, D)
    let q_tile = load(q + rows * D + offs_d[None, :], mask=row_ok, other=0.0)
    var m_i, l_i, acc = softmax_init(M, D)
    for start in range(0, seqlen_k, N) {
        let cols, k_tile, v_tile = load_kv_block(k, v, D, D, start, N, offs_d, seqlen_k)
        let s = dot(q_tile, trans(k_tile)) * scale
        let s2 = mask_block(s, true, start + N, seqlen_k, mask, 0, 0, rows, cols)
        m_i, l_i, acc = softmax_update(m_i, l_i, acc, s2, v_tile, DTYPE, false)
    }
    let empty, out = softmax_normalize(acc, l_i, 1.0)
    store(o + rows * D + offs_d[None, :], DTYPE(out), mask=row_ok)
    let lse_row = softmax_lse(m_i, l_i, empty)
    store(lse + offs_m, lse_row, mask=offs_m < seqlen_q)
}

kernel attn_hand<M: i32 = 16, N: i32 = 16, D: i32 = 32, DTYPE: type = f32, mask: mask = causal>(
    q: ptr[DTYPE], k: ptr[DTYPE], v: ptr[DTYPE], o: ptr[DTYPE], lse: ptr[f32], seqlen_q: i32, seqlen_k: i32, scale: f32) {
    let offs_m = program_id(0) * M + arange(0, M)
    let rows = offs_m[:, None]
    let row_ok = rows < seqlen_q
    let offs_d = arange(0, D)
    let q_tile = load(q + rows * D + offs_d[None, :], mask=row_ok, other=0.0)
    var m_i = full([M], -inf, f32)
    var l_i = zeros([M], f32)
    var acc = zeros([M, D], f32)
    for start in range(0, seqlen_k, N) {
        let offs_n = start + arange(0, N)
        let cols = offs_n[None, :]
        let kv_rows = offs_n[:, None]
        let kv_ok = kv_rows < seqlen_k
        let k_tile = load(k + kv_rows * D + offs_d[None, :], mask=kv_ok, other=0.0)
        let v_tile = load(v + kv_rows * D + offs_d[None, :], mask=kv_ok, other=0.0)
        let s = dot(q_tile, trans(k_tile)) * scale
        // mask_block with is_partial = true: the or with a constant is
        // still a run-time condition.
        let block_end = start + N
        var s2 = s
        if true || block_end > seqlen_k {
            let in_seq = cols < seqlen_k
            s2 = select(in_seq && mask(0, 0, rows, cols), s2, -inf)
        }
        let m_new = max(m_i, max(s2, axis=1) * LOG2E)
        let m_use = select(m_new == -inf, 0.0, m_new)
        let p = exp2(s2 * LOG2E - m_use[:, None])
        let alpha = exp2(m_i - m_use)
        let l_new = l_i * alpha + sum(p, axis=1)
        acc = acc * alpha[:, None] + dot(DTYPE(p), v_tile)
        l_i = l_new
        m_i = m_new
    }
    let empty = l_i == 0.0
    let out = acc * (1.0 / select(empty, 1.0, l_i))[:, None]
    store(o + rows * D + offs_d[None, :], DTYPE(out), mask=row_ok)
    let lse_row = select(empty, -inf, (m_i + log2(select(empty, 1.0, l_i))) * LN2)
    store(lse + offs_m, lse_row, mask=offs_m < seqlen_q)
}
`

// TestSharedFunctionsOnCPU runs a kernel made of the stdlib's shared
// functions and the same kernel written out on the CPU device: the same
// tile IR, bit-identical results, and both within f32 tolerance of naive
// float64 attention.
func TestSharedFunctionsOnCPU(t *testing.T) {
	const seqQ, seqK, d = 37, 45, 32
	rng := rand.New(rand.NewPCG(47, 3))
	randn := func(n int) []float32 {
		xs := make([]float32, n)
		for i := range xs {
			xs[i] = float32(rng.NormFloat64())
		}
		return xs
	}
	q, k, v := randn(seqQ*d), randn(seqK*d), randn(seqK*d)
	scale := float32(1 / math.Sqrt(d))
	for _, mask := range []string{"causal", "none", "sliding_window(6, 2)"} {
		run := func(kernel string) (*compiler.Result, []float32, []float32) {
			res, err := compiler.Compile(compiler.Request{Sources: map[string]string{"shared.fa": sharedFnSrc}, Kernel: kernel, Mask: mask})
			if err != nil {
				t.Fatalf("%s: %v", kernel, err)
			}
			o, lse := cpu.NewBuffer("o", tir.F32, seqQ*d), cpu.NewBuffer("lse", tir.F32, seqQ)
			grid := [3]int{(seqQ + 15) / 16, 1, 1}
			err = cpu.Launch(res.Module, kernel, grid, cpu.FromF32("q", q), cpu.FromF32("k", k), cpu.FromF32("v", v), o, lse,
				int32(seqQ), int32(seqK), scale)
			if err != nil {
				t.Fatalf("%s: %v", kernel, err)
			}
			return res, o.F32(), lse.F32()
		}
		resF, oF, lseF := run("attn_fns")
		resH, oH, lseH := run("attn_hand")

		// attn_hand computes what the functions compute in their order
		// (arguments first, results left to right): the lowered IR is the
		// same but for the kernel's name.
		lower := func(res *compiler.Result) string {
			m, err := res.Program.Lower(lang.Instance{Kernel: res.Kernel, Args: res.Args})
			if err != nil {
				t.Fatal(err)
			}
			return strings.Replace(m.String(), "@"+res.Kernel+"(", "@k(", 1)
		}
		if lower(resF) != lower(resH) {
			t.Errorf("%s: attn_fns and attn_hand lower to different tile IR", mask)
		}
		for i := range oF {
			if math.Float32bits(oF[i]) != math.Float32bits(oH[i]) {
				t.Fatalf("%s: O[%d] = %v with functions, %v written out", mask, i, oF[i], oH[i])
			}
		}
		for i := range lseF {
			if math.Float32bits(lseF[i]) != math.Float32bits(lseH[i]) {
				t.Fatalf("%s: LSE[%d] = %v with functions, %v written out", mask, i, lseF[i], lseH[i])
			}
		}

		var keep reference.MaskFunc
		switch mask {
		case "causal":
			keep = func(b, h, i, j int) bool { return i >= j }
		case "sliding_window(6, 2)":
			keep = func(b, h, i, j int) bool { return i-6 <= j && j <= i+2 }
		}
		f64 := func(xs []float32) []float64 {
			out := make([]float64, len(xs))
			for i, x := range xs {
				out[i] = float64(x)
			}
			return out
		}
		sh := reference.Shape{B: 1, H: 1, HKV: 1, Sq: seqQ, Sk: seqK, D: d}
		oRef, lseRef := reference.Attention(f64(q), f64(k), f64(v), sh, float64(scale), keep, nil)
		for i := range oRef {
			if diff := math.Abs(oRef[i] - float64(oF[i])); diff > 1e-4 {
				t.Fatalf("%s: O[%d] = %v, reference %v", mask, i, oF[i], oRef[i])
			}
		}
		for i := range lseRef {
			if diff := math.Abs(lseRef[i] - float64(lseF[i])); diff > 1e-4 && !(math.IsInf(lseRef[i], -1) && math.IsInf(float64(lseF[i]), -1)) {
				t.Fatalf("%s: LSE[%d] = %v, reference %v", mask, i, lseF[i], lseRef[i])
			}
		}
	}
}
