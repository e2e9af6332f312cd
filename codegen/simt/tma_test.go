package simt

// The simulator's TMA against hand-written kernels: the placement of a
// box, and the misuses it must reject rather than compute or hang.

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/internal/half"
	"github.com/fac-compiler/fac/tir"
)

// The inline asm sm_90a emits for TMA (operands as the comments say; all
// void, constraints "r,...,~{memory}").
const (
	// $0: the mbarrier's i32 shared address.
	asmMbarInit = "mbarrier.init.shared::cta.b64 [$0], 1;"
	// no operands: orders the inits before the async proxy uses them.
	asmMbarInitFence = "fence.mbarrier_init.release.cluster;"
	// $0: the mbarrier, $1: the bytes the phase's copies will complete.
	asmMbarArriveTx = "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;"
	// $0: the mbarrier, $1: the parity (0/1) of the phase to wait for.
	asmMbarWait = "{\n.reg .pred P1;\nLAB_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P1, [$0], $1;\n@!P1 bra LAB_WAIT;\n}"
)

// asmTMALoad is the n-d tensor copy: $0 the shared destination, $1 the
// tensor map's generic address (i64), $2..$n+1 the coordinates (innermost
// first), $n+2 the mbarrier.
func asmTMALoad(n int) string {
	cs := make([]string, n)
	for i := range cs {
		cs[i] = fmt.Sprintf("$%d", i+2)
	}
	return fmt.Sprintf("cp.async.bulk.tensor.%dd.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {%s}], [$%d];",
		n, strings.Join(cs, ", "), n+2)
}

// llQuote is s as an LLVM IR string literal.
func llQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '"' || ch == '\\' || ch < 0x20 || ch >= 0x7f:
			fmt.Fprintf(&b, "\\%02X", ch)
		default:
			b.WriteByte(ch)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tmaTestKernel is a 64-thread kernel: thread 0 initialises the mbarrier
// at shared 1024, and (with arrive) expects the box's 1024 bytes on it,
// (with copy) loads the [64 x 8] bf16 box at (0, row0) of the tensor map
// %tm into shared 0; then (with wait) every thread waits for phase 0 and
// copies its 16 bytes of the shared box (as laid out, swizzled) to out.
func tmaTestKernel(arrive, copyBox, wait bool) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p(`target triple = "nvptx64-nvidia-cuda"`)
	p(`@smem = external addrspace(3) global [0 x i8], align 1024`)
	p(`define ptx_kernel void @tma_test(i16 addrspace(1)* %%src, i16 addrspace(1)* %%out, i32 %%rows, i32 %%stride, i32 %%row0, [128 x i8]* byval([128 x i8]) align 64 %%tm) {`)
	p(`entry:`)
	p(`	%%tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()`)
	p(`	%%sp0 = bitcast [0 x i8] addrspace(3)* @smem to i8 addrspace(3)*`)
	p(`	%%s0 = ptrtoint i8 addrspace(3)* %%sp0 to i32`)
	p(`	%%bar = add i32 %%s0, 1024`)
	p(`	%%tmi = ptrtoint [128 x i8]* %%tm to i64`)
	p(`	%%is0 = icmp eq i32 %%tid, 0`)
	p(`	br i1 %%is0, label %%init, label %%sync`)
	p(`init:`)
	p(`	call void asm sideeffect %s, "r,~{memory}"(i32 %%bar)`, llQuote(asmMbarInit))
	p(`	call void asm sideeffect %s, "~{memory}"()`, llQuote(asmMbarInitFence))
	p(`	br label %%sync`)
	p(`sync:`)
	p(`	call void @llvm.nvvm.barrier0()`)
	p(`	br i1 %%is0, label %%issue, label %%wait`)
	p(`issue:`)
	if arrive {
		p(`	call void asm sideeffect %s, "r,r,~{memory}"(i32 %%bar, i32 1024)`, llQuote(asmMbarArriveTx))
	}
	if copyBox {
		p(`	call void asm sideeffect %s, "r,l,r,r,r,~{memory}"(i32 %%s0, i64 %%tmi, i32 0, i32 %%row0, i32 %%bar)`, llQuote(asmTMALoad(2)))
	}
	p(`	br label %%wait`)
	p(`wait:`)
	if wait {
		p(`	call void asm sideeffect %s, "r,r,~{memory}"(i32 %%bar, i32 0)`, llQuote(asmMbarWait))
	}
	p(`	%%off = mul i32 %%tid, 16`)
	p(`	%%sa = add i32 %%s0, %%off`)
	p(`	%%sp = inttoptr i32 %%sa to <8 x i16> addrspace(3)*`)
	p(`	%%v = load <8 x i16>, <8 x i16> addrspace(3)* %%sp, align 16`)
	p(`	%%ei = mul i32 %%tid, 8`)
	p(`	%%gp = getelementptr i16, i16 addrspace(1)* %%out, i32 %%ei`)
	p(`	%%gv = bitcast i16 addrspace(1)* %%gp to <8 x i16> addrspace(1)*`)
	p(`	store <8 x i16> %%v, <8 x i16> addrspace(1)* %%gv, align 16`)
	p(`	ret void`)
	p(`}`)
	p(`declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()`)
	p(`declare void @llvm.nvvm.barrier0()`)
	return b.String()
}

// tmaTestKernelDesc describes tmaTestKernel's parameters: src is a [rows x
// stride] bf16 tensor of 64 columns, mapped with a [64 x 8] box.
func tmaTestKernelDesc() *Kernel {
	return &Kernel{Name: "tma_test", Threads: 64, SharedBytes: 1024 + 8, Params: []Param{
		{Name: "src", Elem: tir.BF16, Kind: Ptr},
		{Name: "out", Elem: tir.BF16, Kind: Ptr},
		{Name: "rows", Kind: I32},
		{Name: "stride", Kind: I32},
		{Name: "row0", Kind: I32},
		{Name: "tm", Kind: TensorMap, TMA: &artifact.TMA{
			Tensor:  "src",
			Dims:    []artifact.TMADim{{Extent: 64}, {Stride: "stride", Bound: "rows"}},
			Box:     []int{64, 8},
			Swizzle: 128,
		}},
	}}
}

const tmaTestRows, tmaTestStride = 10, 72

// tmaTestArgs are tmaTestKernel's arguments: distinct bf16 values.
func tmaTestArgs(row0 int) []any {
	src := make([]float64, tmaTestRows*tmaTestStride)
	for i := range src {
		src[i] = float64(half.BF16ToF32(uint16(0x3f80 + i)))
	}
	return []any{
		&Buffer{Elem: tir.BF16, Vals: src},
		&Buffer{Elem: tir.BF16, Vals: make([]float64, 512)},
		tmaTestRows, tmaTestStride, row0,
	}
}

// runWithin runs ll on one CTA, failing the test when it takes longer
// than d (a hang).
func runWithin(t *testing.T, d time.Duration, ll string, k *Kernel, args []any, misalign bool) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- Run(ll, k, [3]int{1, 1, 1}, args, Options{Misalign: misalign}) }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("simulate still running after %v: a hang", d)
	}
	return nil
}

// TestSimTMA loads a [64 x 8] bf16 box with a 128-byte swizzle through a
// tensor map of a [10 x 64] (row stride 72) tensor, with rows out of
// bounds on either side, and checks every byte of shared memory the
// threads copy out: the swizzled placement, and zeros past the bounds.
func TestSimTMA(t *testing.T) {
	for _, row0 := range []int{5, -3, 0} {
		t.Run(fmt.Sprintf("row0=%d", row0), func(t *testing.T) {
			args := tmaTestArgs(row0)
			if err := runWithin(t, time.Minute, tmaTestKernel(true, true, true), tmaTestKernelDesc(), args, false); err != nil {
				t.Fatal(err)
			}
			src, out := args[0].(*Buffer).Vals, args[1].(*Buffer).Vals
			zeros := 0
			for k, got := range out {
				// out holds shared bytes 2k, 2k+1: the element whose
				// unswizzled offset is o below.
				o := 2 * k
				o ^= (o >> 7 & 7) << 4
				r, c := o/128, o%128/2
				want := 0.0
				if y := row0 + r; y >= 0 && y < tmaTestRows {
					want = src[y*tmaTestStride+c]
				} else {
					zeros++
				}
				if got != want {
					t.Fatalf("shared element %d (box row %d, col %d): got %v, want %v", k, r, c, got, want)
				}
			}
			wantZeros := 0
			for r := 0; r < 8; r++ {
				if y := row0 + r; y < 0 || y >= tmaTestRows {
					wantZeros += 64
				}
			}
			if zeros != wantZeros {
				t.Fatalf("%d out-of-bounds elements, want %d", zeros, wantZeros)
			}
		})
	}
}

// TestSimTMAErrors checks that the simulator rejects broken uses rather
// than compute (or hang).
func TestSimTMAErrors(t *testing.T) {
	for _, c := range []struct {
		name               string
		arrive, copy, wait bool
		misalign           bool
		stride, rows       int                 // argument overrides
		edit               func(string) string // of the LLVM IR
		want               string
	}{
		{name: "no wait", arrive: true, copy: true, want: "no wait has seen land"},
		{name: "no arrive", copy: true, wait: true, want: "wait for parity 0 never completes"},
		{name: "no copy", arrive: true, wait: true, want: "wait for parity 0 never completes"},
		{name: "misaligned", arrive: true, copy: true, wait: true, misalign: true, want: "not 16-byte aligned"},
		{name: "odd stride", arrive: true, copy: true, wait: true, stride: 68, want: "not a multiple of 16"},
		// A bound past the buffer: global memory's bounds catch the read.
		{name: "past the buffer", arrive: true, copy: true, wait: true, rows: 20, want: "outside every buffer"},
		{name: "no init", arrive: true, copy: true, wait: true, edit: func(ll string) string {
			return strings.Replace(ll, llQuote(asmMbarInit), llQuote(""), 1)
		}, want: "used before mbarrier.init"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := tmaTestArgs(5)
			if c.stride != 0 {
				args[3] = c.stride
			}
			if c.rows != 0 {
				args[2] = c.rows
			}
			ll := tmaTestKernel(c.arrive, c.copy, c.wait)
			if c.edit != nil {
				ll = c.edit(ll)
			}
			err := runWithin(t, time.Minute, ll, tmaTestKernelDesc(), args, c.misalign)
			t.Logf("%v", err)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestSimTMAPrecedingParity checks that a wait for the parity of the
// phase before the current one (1 before the first completes) returns at
// once: every thread waits for it (between two bar.syncs) before thread 0
// arrives. (Without the second bar.sync, a thread could wait for parity 1
// after the first phase completed: a wait for the second phase, which
// never completes, on the hardware as here.)
func TestSimTMAPrecedingParity(t *testing.T) {
	ll := tmaTestKernel(true, true, true)
	ll = strings.Replace(ll, "\tbr i1 %is0, label %issue, label %wait\n",
		"\tcall void asm sideeffect "+llQuote(asmMbarWait)+", \"r,r,~{memory}\"(i32 %bar, i32 1)\n"+
			"\tcall void @llvm.nvvm.barrier0()\n"+
			"\tbr i1 %is0, label %issue, label %wait\n", 1)
	args := tmaTestArgs(0)
	if err := runWithin(t, time.Minute, ll, tmaTestKernelDesc(), args, false); err != nil {
		t.Fatal(err)
	}
}

// TestSimTMALand3D checks land's placement of a 3-d box against the PTX
// ISA's layout written out per coordinate, and that it clears the
// generic-proxy marks of the bytes it writes.
func TestSimTMALand3D(t *testing.T) {
	m := &machine{}
	const d0, d1, d2 = 32, 5, 3 // f32: 32 x 4 bytes = one 128-byte row
	base := m.alloc(d0 * d1 * d2 * 4)
	for i := 0; i < d0*d1*d2; i++ {
		binary.LittleEndian.PutUint32(m.global[base+uint64(4*i):], uint32(i+1))
	}
	tm := &tmap{name: "t", base: base, elem: 4, dims: []int64{d0, d1, d2},
		strides: []uint64{4, d0 * 4, d0 * d1 * 4}, box: []int{32, 4, 2}, swizzle: 128}
	c := &cta{m: m, shared: make([]byte, 2048), marks: make([]int32, 2048), inflight: make([]int32, 2048)}
	for i := range c.marks {
		c.marks[i] = 7
	}
	coords := []int64{0, 3, 1}
	c.land(&bulkCopy{tm: tm, dst: 1024, coords: coords})
	for c2 := 0; c2 < 2; c2++ {
		for c1 := 0; c1 < 4; c1++ {
			for c0 := 0; c0 < 32; c0++ {
				a := (c2*4+c1)*128 + c0*4
				a ^= (a >> 7 & 7) << 4
				x1, x2 := 3+c1, 1+c2
				want := uint32(0)
				if x1 < d1 && x2 < d2 {
					want = uint32(x2*d0*d1+x1*d0+c0) + 1
				}
				if got := binary.LittleEndian.Uint32(c.shared[1024+a:]); got != want {
					t.Fatalf("box (%d, %d, %d) at byte %d: got %d, want %d", c0, c1, c2, a, got, want)
				}
			}
		}
	}
	for i, mk := range c.marks {
		if (i >= 1024) == (mk != 0) {
			t.Fatalf("proxy mark of byte %d is %d after the copy", i, mk)
		}
	}
}

// tmaStoreTestKernel is a 64-thread kernel: every thread copies 16 bytes
// of src (512 bf16) to shared memory at tid·16, (with fence) fences them
// for the async proxy, and after a barrier thread 0 stores the [64 x 8]
// box of shared 0 (as laid out, swizzled) at (0, row0) of the tensor map
// %tm over dst, commits the bulk group, (with overwrite) writes shared
// byte 0 and (with wait) waits for the store's read.
func tmaStoreTestKernel(fence, overwrite, wait bool) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p(`target triple = "nvptx64-nvidia-cuda"`)
	p(`@smem = external addrspace(3) global [0 x i8], align 1024`)
	p(`define ptx_kernel void @tma_store_test(i16 addrspace(1)* %%src, i16 addrspace(1)* %%dst, i32 %%rows, i32 %%stride, i32 %%row0, [128 x i8]* byval([128 x i8]) align 64 %%tm) {`)
	p(`entry:`)
	p(`	%%tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()`)
	p(`	%%sp0 = bitcast [0 x i8] addrspace(3)* @smem to i8 addrspace(3)*`)
	p(`	%%s0 = ptrtoint i8 addrspace(3)* %%sp0 to i32`)
	p(`	%%tmi = ptrtoint [128 x i8]* %%tm to i64`)
	p(`	%%ei = mul i32 %%tid, 8`)
	p(`	%%gp = getelementptr i16, i16 addrspace(1)* %%src, i32 %%ei`)
	p(`	%%gv = bitcast i16 addrspace(1)* %%gp to <8 x i16> addrspace(1)*`)
	p(`	%%v = load <8 x i16>, <8 x i16> addrspace(1)* %%gv, align 16`)
	p(`	%%off = mul i32 %%tid, 16`)
	p(`	%%sa = add i32 %%s0, %%off`)
	p(`	%%sp = inttoptr i32 %%sa to <8 x i16> addrspace(3)*`)
	p(`	store <8 x i16> %%v, <8 x i16> addrspace(3)* %%sp, align 16`)
	if fence {
		p(`	call void asm sideeffect "fence.proxy.async.shared::cta;", "~{memory}"()`)
	}
	p(`	call void @llvm.nvvm.barrier0()`)
	p(`	%%is0 = icmp eq i32 %%tid, 0`)
	p(`	br i1 %%is0, label %%issue, label %%done`)
	p(`issue:`)
	p(`	call void asm sideeffect %s, "l,r,r,r,~{memory}"(i64 %%tmi, i32 0, i32 %%row0, i32 %%s0)`,
		llQuote("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];"))
	p(`	call void asm sideeffect "cp.async.bulk.commit_group;", "~{memory}"()`)
	if overwrite {
		p(`	%%h0 = bitcast i8 addrspace(3)* %%sp0 to i16 addrspace(3)*`)
		p(`	store i16 7, i16 addrspace(3)* %%h0, align 2`)
	}
	if wait {
		p(`	call void asm sideeffect "cp.async.bulk.wait_group.read 0;", "~{memory}"()`)
	}
	p(`	br label %%done`)
	p(`done:`)
	p(`	ret void`)
	p(`}`)
	p(`declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()`)
	p(`declare void @llvm.nvvm.barrier0()`)
	return b.String()
}

// tmaStoreTestKernelDesc describes tmaStoreTestKernel's parameters: dst is a
// [rows x stride] bf16 tensor of 64 columns, mapped with a [64 x 8] box.
func tmaStoreTestKernelDesc() *Kernel {
	r := tmaTestKernelDesc()
	r.Name = "tma_store_test"
	r.SharedBytes = 1024
	r.Params[0].Name, r.Params[1].Name = "src", "dst"
	r.Params[5].TMA.Tensor = "dst"
	return r
}

// tmaStoreTestArgs are tmaStoreTestKernel's arguments: 512 distinct bf16
// values, and dst filled with 0.5.
func tmaStoreTestArgs(row0 int) []any {
	src := make([]float64, 512)
	for i := range src {
		src[i] = float64(half.BF16ToF32(uint16(0x3f80 + i)))
	}
	dst := make([]float64, tmaTestRows*tmaTestStride)
	for i := range dst {
		dst[i] = 0.5
	}
	return []any{
		&Buffer{Elem: tir.BF16, Vals: src},
		&Buffer{Elem: tir.BF16, Vals: dst},
		tmaTestRows, tmaTestStride, row0,
	}
}

// TestSimTMAStoreBox stores a [64 x 8] bf16 box with a 128-byte swizzle
// through a tensor map of a [10 x 64] (row stride 72) tensor, with rows out
// of bounds on either side, and checks every element of the tensor: the
// box's rows inside the bounds unswizzled, nothing else written.
func TestSimTMAStoreBox(t *testing.T) {
	for _, row0 := range []int{5, -3, 0} {
		t.Run(fmt.Sprintf("row0=%d", row0), func(t *testing.T) {
			args := tmaStoreTestArgs(row0)
			if err := runWithin(t, time.Minute, tmaStoreTestKernel(true, false, true), tmaStoreTestKernelDesc(), args, false); err != nil {
				t.Fatal(err)
			}
			src, dst := args[0].(*Buffer).Vals, args[1].(*Buffer).Vals
			written := 0
			for y := 0; y < tmaTestRows; y++ {
				for c := 0; c < tmaTestStride; c++ {
					want := 0.5
					if r := y - row0; r >= 0 && r < 8 && c < 64 {
						o := r*128 + 2*c
						o ^= (o >> 7 & 7) << 4
						want = src[o/2]
						written++
					}
					if got := dst[y*tmaTestStride+c]; got != want {
						t.Fatalf("dst row %d col %d: got %v, want %v", y, c, got, want)
					}
				}
			}
			wantRows := 0
			for r := 0; r < 8; r++ {
				if y := row0 + r; y >= 0 && y < tmaTestRows {
					wantRows++
				}
			}
			if written != 64*wantRows {
				t.Fatalf("%d elements written, want %d", written, 64*wantRows)
			}
		})
	}
}

// TestSimTMAStoreErrors checks that the simulator rejects a store whose
// source was not fenced, one not waited for, and one whose source is
// written before the wait.
func TestSimTMAStoreErrors(t *testing.T) {
	for _, c := range []struct {
		name                   string
		fence, overwrite, wait bool
		want                   string
	}{
		{name: "no fence", wait: true, want: "without fence.proxy.async"},
		{name: "no wait", fence: true, want: "in flight"},
		{name: "overwrite", fence: true, overwrite: true, wait: true, want: "changed before its cp.async.bulk.wait_group.read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := runWithin(t, time.Minute, tmaStoreTestKernel(c.fence, c.overwrite, c.wait), tmaStoreTestKernelDesc(), tmaStoreTestArgs(5), false)
			t.Logf("%v", err)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestSimTMAReduceBox adds a [32 x 8] f32 box with a 128-byte swizzle
// through a tensor map whose contiguous dim has a bound parameter (40 of
// the 64 columns of each row), at column col0 and row row0: the box's
// elements inside both bounds are added, nothing else changes.
func TestSimTMAReduceBox(t *testing.T) {
	ll := strings.NewReplacer(
		"i16 addrspace(1)* %src, i16 addrspace(1)* %dst, i32 %rows, i32 %stride, i32 %row0,",
		"float addrspace(1)* %src, float addrspace(1)* %dst, i32 %rows, i32 %stride, i32 %row0, i32 %cols, i32 %col0,",
		"%ei = mul i32 %tid, 8", "%ei = mul i32 %tid, 4",
		"getelementptr i16, i16 addrspace(1)* %src", "getelementptr float, float addrspace(1)* %src",
		"bitcast i16 addrspace(1)* %gp to <8 x i16> addrspace(1)*", "bitcast float addrspace(1)* %gp to <4 x float> addrspace(1)*",
		"load <8 x i16>, <8 x i16> addrspace(1)* %gv", "load <4 x float>, <4 x float> addrspace(1)* %gv",
		"inttoptr i32 %sa to <8 x i16> addrspace(3)*", "inttoptr i32 %sa to <4 x float> addrspace(3)*",
		"store <8 x i16> %v, <8 x i16> addrspace(3)* %sp", "store <4 x float> %v, <4 x float> addrspace(3)* %sp",
		`(i64 %tmi, i32 0, i32 %row0, i32 %s0)`, `(i64 %tmi, i32 %col0, i32 %row0, i32 %s0)`,
		llQuote("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];"),
		llQuote("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [$0, {$1, $2}], [$3];"),
	).Replace(tmaStoreTestKernel(true, false, true))
	k := &Kernel{Name: "tma_store_test", Threads: 64, SharedBytes: 1024, Params: []Param{
		{Name: "src", Elem: tir.F32, Kind: Ptr},
		{Name: "dst", Elem: tir.F32, Kind: Ptr},
		{Name: "rows", Kind: I32},
		{Name: "stride", Kind: I32},
		{Name: "row0", Kind: I32},
		{Name: "cols", Kind: I32},
		{Name: "col0", Kind: I32},
		{Name: "tm", Kind: TensorMap, TMA: &artifact.TMA{
			Tensor:  "dst",
			Dims:    []artifact.TMADim{{Bound: "cols"}, {Stride: "stride", Bound: "rows"}},
			Box:     []int{32, 8},
			Swizzle: 128,
		}},
	}}
	const rows, stride, cols = 10, 64, 40
	for _, c := range [][2]int{{5, 20}, {-3, 0}, {0, 8}} {
		row0, col0 := c[0], c[1]
		src := make([]float64, 256)
		for i := range src {
			src[i] = float64(i + 1)
		}
		dst := make([]float64, rows*stride)
		for i := range dst {
			dst[i] = 0.5
		}
		out := &Buffer{Elem: tir.F32, Vals: append([]float64(nil), dst...)}
		args := []any{&Buffer{Elem: tir.F32, Vals: src}, out, rows, stride, row0, cols, col0}
		if err := Run(ll, k, [3]int{1, 1, 1}, args, Options{}); err != nil {
			t.Fatal(err)
		}
		for y := 0; y < rows; y++ {
			for x := 0; x < stride; x++ {
				want := 0.5
				if r, cc := y-row0, x-col0; r >= 0 && r < 8 && cc >= 0 && cc < 32 && x < cols {
					o := r*128 + 4*cc
					o ^= (o >> 7 & 7) << 4
					want += src[o/4]
				}
				if got := out.Vals[y*stride+x]; got != want {
					t.Fatalf("row0 %d col0 %d: dst[%d][%d] = %v, want %v", row0, col0, y, x, got, want)
				}
			}
		}
	}
}
