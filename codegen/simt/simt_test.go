package simt

// The simulator's own semantics against hand-written kernels: lanes that
// diverge and reconverge, warp-synchronous instructions, barriers,
// deadlocks and hangs, the mma.sync fragment layouts against a float64
// product, cp.async's late completion, and the scheduler's determinism.

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/tir"
)

// kernelLL wraps body (LLVM IR blocks) into a kernel @k(params) with the
// usual declarations.
func kernelLL(params, body string) string {
	return `target triple = "nvptx64-nvidia-cuda"
@smem = external addrspace(3) global [0 x i8], align 1024
define ptx_kernel void @k(` + params + `) {
` + body + `}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare void @llvm.nvvm.barrier0()
declare i32 @llvm.nvvm.shfl.sync.bfly.i32(i32, i32, i32, i32)
declare {float, float, float, float} @llvm.nvvm.mma.m16n8k16.row.col.bf16(i32, i32, i32, i32, i32, i32, float, float, float, float)
declare void @llvm.nvvm.cp.async.cg.shared.global.16.s(i8 addrspace(3)*, i8 addrspace(1)*, i32)
declare void @llvm.nvvm.cp.async.commit.group()
declare void @llvm.nvvm.cp.async.wait.group(i32)
`
}

func i32Out(n int) *Buffer { return &Buffer{Elem: tir.I32, Vals: make([]float64, n)} }

func outKernel(threads int) *Kernel {
	return &Kernel{Name: "k", Threads: threads, SharedBytes: 1024, Params: []Param{{Name: "out", Kind: Ptr, Elem: tir.I32}}}
}

// TestReconverge: each lane loops tid%5 times on its own, then the warp
// exchanges a value with shfl.sync, which needs every lane back together.
func TestReconverge(t *testing.T) {
	ll := kernelLL("i32 addrspace(1)* %out", `entry:
	%tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
	%n = urem i32 %tid, 5
	br label %head
head:
	%i = phi i32 [0, %entry], [%i1, %body]
	%acc = phi i32 [0, %entry], [%acc1, %body]
	%more = icmp ult i32 %i, %n
	br i1 %more, label %body, label %done
body:
	%acc1 = add i32 %acc, %tid
	%i1 = add i32 %i, 1
	br label %head
done:
	%odd = and i32 %tid, 1
	%isodd = icmp ne i32 %odd, 0
	br i1 %isodd, label %a, label %b
a:
	%x = add i32 %acc, 1000
	br label %join
b:
	br label %join
join:
	%v = phi i32 [%x, %a], [%acc, %b]
	%s = call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %v, i32 1, i32 31)
	%p = getelementptr i32, i32 addrspace(1)* %out, i32 %tid
	store i32 %s, i32 addrspace(1)* %p, align 4
	ret void
`)
	for seed := int64(0); seed < 3; seed++ {
		out := i32Out(64)
		if err := Run(ll, outKernel(64), [3]int{1, 1, 1}, []any{out}, Options{Seed: seed}); err != nil {
			t.Fatal(err)
		}
		v := func(tid int) int {
			acc := tid * (tid % 5)
			if tid%2 == 1 {
				acc += 1000
			}
			return acc
		}
		for tid := 0; tid < 64; tid++ {
			if got, want := int(out.Vals[tid]), v(tid^1); got != want {
				t.Fatalf("seed %d: lane %d got %d, want %d", seed, tid, got, want)
			}
		}
	}
}

// TestWarpSyncErrors: a warp-synchronous instruction or barrier reached
// by part of a warp, or by part of a CTA, fails instead of hanging.
func TestWarpSyncErrors(t *testing.T) {
	for _, c := range []struct {
		name, inner, want string
	}{
		{"shfl in a branch", `%s = call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %tid, i32 1, i32 31)`, "diverged lanes at a warp-synchronous instruction"},
		{"barrier in a branch", `call void @llvm.nvvm.barrier0()`, "wait at barriers that never complete"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ll := kernelLL("i32 addrspace(1)* %out", `entry:
	%tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
	%lo = icmp ult i32 %tid, 16
	br i1 %lo, label %in, label %done
in:
	`+c.inner+`
	br label %done
done:
	ret void
`)
			err := Run(ll, outKernel(64), [3]int{1, 1, 1}, []any{i32Out(64)}, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestBarrierOrders: warp 1 writes shared memory, and after bar.sync warp
// 0 reads it, whatever the interleaving.
func TestBarrierOrders(t *testing.T) {
	ll := kernelLL("i32 addrspace(1)* %out", `entry:
	%tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
	%sp = bitcast [0 x i8] addrspace(3)* @smem to i32 addrspace(3)*
	%w1 = icmp uge i32 %tid, 32
	br i1 %w1, label %write, label %sync
write:
	%l = sub i32 %tid, 32
	%v = mul i32 %tid, 7
	%wp = getelementptr i32, i32 addrspace(3)* %sp, i32 %l
	store i32 %v, i32 addrspace(3)* %wp, align 4
	br label %sync
sync:
	call void @llvm.nvvm.barrier0()
	br i1 %w1, label %done, label %read
read:
	%rp = getelementptr i32, i32 addrspace(3)* %sp, i32 %tid
	%r = load i32, i32 addrspace(3)* %rp, align 4
	%op = getelementptr i32, i32 addrspace(1)* %out, i32 %tid
	store i32 %r, i32 addrspace(1)* %op, align 4
	br label %done
done:
	ret void
`)
	for seed := int64(0); seed < 8; seed++ {
		out := i32Out(32)
		if err := Run(ll, outKernel(64), [3]int{1, 1, 1}, []any{out}, Options{Seed: seed}); err != nil {
			t.Fatal(err)
		}
		for l := 0; l < 32; l++ {
			if int(out.Vals[l]) != (l+32)*7 {
				t.Fatalf("seed %d: lane %d read %v, want %d", seed, l, out.Vals[l], (l+32)*7)
			}
		}
	}
}

// TestHang: a loop that never ends fails at the block budget.
func TestHang(t *testing.T) {
	ll := kernelLL("i32 addrspace(1)* %out", `entry:
	br label %loop
loop:
	br label %loop
`)
	err := Run(ll, outKernel(32), [3]int{1, 1, 1}, []any{i32Out(1)}, Options{MaxBlocks: 10000})
	if err == nil || !strings.Contains(err.Error(), "a hang") {
		t.Fatalf("got %v, want a hang", err)
	}
}

// TestMemoryErrors: out-of-bounds and misaligned accesses, and unknown
// inline asm, fail with what and where.
func TestMemoryErrors(t *testing.T) {
	for _, c := range []struct {
		name, body, want string
	}{
		{"past the buffer", `%p = getelementptr i32, i32 addrspace(1)* %out, i32 64
	store i32 1, i32 addrspace(1)* %p, align 4`, "outside every buffer"},
		{"misaligned", `%b = bitcast i32 addrspace(1)* %out to i8 addrspace(1)*
	%q = getelementptr i8, i8 addrspace(1)* %b, i32 2
	%p = bitcast i8 addrspace(1)* %q to i32 addrspace(1)*
	store i32 1, i32 addrspace(1)* %p, align 4`, "misaligned 4-byte access"},
		{"shared past SharedBytes", `%sp = bitcast [0 x i8] addrspace(3)* @smem to i32 addrspace(3)*
	%p = getelementptr i32, i32 addrspace(3)* %sp, i32 256
	store i32 1, i32 addrspace(3)* %p, align 4`, "beyond SharedBytes=1024"},
		{"unknown asm", `call void asm sideeffect "brkpt;", ""()`, "unknown inline asm"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ll := kernelLL("i32 addrspace(1)* %out", "entry:\n\t"+c.body+"\n\tret void\n")
			err := Run(ll, outKernel(32), [3]int{1, 1, 1}, []any{i32Out(64)}, Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestMMALayout loads mma.sync's fragments from row-major A (16×16) and
// B (16×8, given as Bᵀ row-major) by the PTX ISA's index formulas written
// in the kernel, and checks D against a float64 product.
func TestMMALayout(t *testing.T) {
	ll := kernelLL("i16 addrspace(1)* %a, i16 addrspace(1)* %bt, float addrspace(1)* %d", `entry:
	%l = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
	%g = lshr i32 %l, 2
	%t = and i32 %l, 3
	%t2 = shl i32 %t, 1
	; A register r (r = 0..3) holds elements 2r, 2r+1: row g + 8(r&1), col 2t + 8(r>>1)
	%a0 = call i32 @pair(i16 addrspace(1)* %a, i32 %g, i32 %t2)
	%g8 = add i32 %g, 8
	%a1 = call i32 @pair(i16 addrspace(1)* %a, i32 %g8, i32 %t2)
	%t28 = add i32 %t2, 8
	%a2 = call i32 @pair(i16 addrspace(1)* %a, i32 %g, i32 %t28)
	%a3 = call i32 @pair(i16 addrspace(1)* %a, i32 %g8, i32 %t28)
	; B register r holds k = 2t + 8r, 2t + 8r + 1 of column g: row g of Bᵀ
	%b0 = call i32 @pair(i16 addrspace(1)* %bt, i32 %g, i32 %t2)
	%b1 = call i32 @pair(i16 addrspace(1)* %bt, i32 %g, i32 %t28)
	%r = call {float, float, float, float} @llvm.nvvm.mma.m16n8k16.row.col.bf16(i32 %a0, i32 %a1, i32 %a2, i32 %a3, i32 %b0, i32 %b1, float 0.0, float 0.0, float 0.0, float 0.0)
	; D element i: row g + 8(i>>1), col 2t + (i&1)
	%d0 = extractvalue {float, float, float, float} %r, 0
	%d1 = extractvalue {float, float, float, float} %r, 1
	%d2 = extractvalue {float, float, float, float} %r, 2
	%d3 = extractvalue {float, float, float, float} %r, 3
	%o0 = mul i32 %g, 8
	%o1 = add i32 %o0, %t2
	%p0 = getelementptr float, float addrspace(1)* %d, i32 %o1
	store float %d0, float addrspace(1)* %p0, align 4
	%p1 = getelementptr float, float addrspace(1)* %p0, i32 1
	store float %d1, float addrspace(1)* %p1, align 4
	%p2 = getelementptr float, float addrspace(1)* %p0, i32 64
	store float %d2, float addrspace(1)* %p2, align 4
	%p3 = getelementptr float, float addrspace(1)* %p0, i32 65
	store float %d3, float addrspace(1)* %p3, align 4
	ret void
`)
	// @pair: the two bf16 at (row, col), (row, col+1) of a 16-wide matrix,
	// low half first. The simulator runs one function, so it is inlined
	// below by hand.
	ll = inlinePair(ll)
	rng := rand.New(rand.NewSource(1))
	A := make([]float64, 16*16)
	Bt := make([]float64, 8*16)
	for i := range A {
		A[i] = float64(half.BF16ToF32(half.F32ToBF16(float32(rng.NormFloat64()))))
	}
	for i := range Bt {
		Bt[i] = float64(half.BF16ToF32(half.F32ToBF16(float32(rng.NormFloat64()))))
	}
	d := &Buffer{Elem: tir.F32, Vals: make([]float64, 16*8)}
	k := &Kernel{Name: "k", Threads: 32, Params: []Param{{Name: "a", Kind: Ptr, Elem: tir.BF16}, {Name: "bt", Kind: Ptr, Elem: tir.BF16}, {Name: "d", Kind: Ptr, Elem: tir.F32}}}
	if err := Run(ll, k, [3]int{1, 1, 1}, []any{&Buffer{Elem: tir.BF16, Vals: A}, &Buffer{Elem: tir.BF16, Vals: Bt}, d}, Options{}); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 16; r++ {
		for c := 0; c < 8; c++ {
			want := 0.0
			for k := 0; k < 16; k++ {
				want += A[r*16+k] * Bt[c*16+k]
			}
			if got := d.Vals[r*8+c]; math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
				t.Fatalf("D[%d][%d] = %v, want %v", r, c, got, want)
			}
		}
	}
}

// inlinePair replaces each `%x = call i32 @pair(i16 addrspace(1)* %m, i32
// %row, i32 %col)` with the loads it stands for.
func inlinePair(ll string) string {
	var out strings.Builder
	for _, line := range strings.Split(ll, "\n") {
		var x, m, row, col string
		if n, _ := fmt.Sscanf(strings.TrimSpace(line), "%s = call i32 @pair(i16 addrspace(1)* %s i32 %s i32 %s", &x, &m, &row, &col); n == 4 {
			m, row, col = strings.TrimSuffix(m, ","), strings.TrimSuffix(row, ","), strings.TrimSuffix(col, ")")
			n := strings.TrimPrefix(x, "%")
			fmt.Fprintf(&out, "\t%%%s.o = mul i32 %s, 16\n\t%%%s.i = add i32 %%%s.o, %s\n", n, row, n, n, col)
			fmt.Fprintf(&out, "\t%%%s.p = getelementptr i16, i16 addrspace(1)* %s, i32 %%%s.i\n", n, m, n)
			fmt.Fprintf(&out, "\t%%%s.w = bitcast i16 addrspace(1)* %%%s.p to i32 addrspace(1)*\n", n, n)
			fmt.Fprintf(&out, "\t%s = load i32, i32 addrspace(1)* %%%s.w, align 4\n", x, n)
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), ";") {
			continue
		}
		out.WriteString(line + "\n")
	}
	return out.String()
}

// TestCPAsyncLate: cp.async copies complete at issue or at their wait;
// a kernel that reads shared memory without waiting sees some copies
// missing, and with the wait sees all.
func TestCPAsyncLate(t *testing.T) {
	for _, wait := range []bool{false, true} {
		w := ""
		if wait {
			w = "call void @llvm.nvvm.cp.async.wait.group(i32 0)"
		}
		ll := kernelLL("i32 addrspace(1)* %src, i32 addrspace(1)* %out", `entry:
	%tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
	%sp = bitcast [0 x i8] addrspace(3)* @smem to i32 addrspace(3)*
	br label %loop
loop:
	%i = phi i32 [0, %entry], [%i1, %loop]
	%e = mul i32 %i, 4
	%sd = getelementptr i32, i32 addrspace(3)* %sp, i32 %e
	%gs = getelementptr i32, i32 addrspace(1)* %src, i32 %e
	%sd8 = bitcast i32 addrspace(3)* %sd to i8 addrspace(3)*
	%gs8 = bitcast i32 addrspace(1)* %gs to i8 addrspace(1)*
	call void @llvm.nvvm.cp.async.cg.shared.global.16.s(i8 addrspace(3)* %sd8, i8 addrspace(1)* %gs8, i32 16)
	%i1 = add i32 %i, 1
	%more = icmp ult i32 %i1, 4
	br i1 %more, label %loop, label %commit
commit:
	call void @llvm.nvvm.cp.async.commit.group()
	`+w+`
	%is0 = icmp eq i32 %tid, 0
	br i1 %is0, label %copy, label %done
copy:
	br label %cl
cl:
	%j = phi i32 [0, %copy], [%j1, %cl]
	%rp = getelementptr i32, i32 addrspace(3)* %sp, i32 %j
	%v = load i32, i32 addrspace(3)* %rp, align 4
	%op = getelementptr i32, i32 addrspace(1)* %out, i32 %j
	store i32 %v, i32 addrspace(1)* %op, align 4
	%j1 = add i32 %j, 1
	%jm = icmp ult i32 %j1, 16
	br i1 %jm, label %cl, label %done
done:
	ret void
`)
		src := make([]float64, 16)
		for i := range src {
			src[i] = float64(i + 1)
		}
		out := i32Out(16)
		k := &Kernel{Name: "k", Threads: 32, SharedBytes: 64, Params: []Param{{Name: "src", Kind: Ptr, Elem: tir.I32}, {Name: "out", Kind: Ptr, Elem: tir.I32}}}
		if err := Run(ll, k, [3]int{1, 1, 1}, []any{&Buffer{Elem: tir.I32, Vals: src}, out}, Options{}); err != nil {
			t.Fatal(err)
		}
		missing := 0
		for i, v := range out.Vals {
			if v != src[i] {
				missing++
			}
		}
		if wait != (missing == 0) {
			t.Fatalf("wait=%v: %d of 16 words missing", wait, missing)
		}
	}
}
