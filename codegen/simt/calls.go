package simt

import (
	"math"
	"strings"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// argRef reads one call argument: a scalar slot, or a small vector packed
// into one word (mma's <2 x half> operands).
type argRef struct{ off, n, bits int }

func (c *compiler) arg(v value.Value) argRef {
	n := count(v.Type())
	a := argRef{off: c.val(v), n: n}
	if n > 1 {
		a.bits = bitsOf(elemType(v.Type(), 0))
		if n*a.bits > 64 {
			fail("a %s operand", v.Type())
		}
	}
	return a
}

func (w *warp) at(a argRef, l int) uint64 {
	if a.n == 1 {
		return w.regs[a.off+l]
	}
	var x uint64
	for e := 0; e < a.n; e++ {
		x |= maskBits(w.regs[a.off+32*e+l], a.bits) << (a.bits * e)
	}
	return x
}

// callSite is a compiled call's operands and result.
type callSite struct {
	args []argRef
	res  int // result slot offset (-1: void)
	nres int // result slots
	rbit int // the result's element bits
}

func (c *compiler) site(in *ir.InstCall) *callSite {
	s := &callSite{res: -1}
	for _, a := range in.Args {
		s.args = append(s.args, c.arg(a))
	}
	if !types.Equal(in.Type(), types.Void) {
		s.res, s.nres = c.slots[in], count(in.Type())
		s.rbit = bitsOf(elemType(in.Type(), 0))
	}
	return s
}

// set writes result element e of lane l.
func (w *warp) set(s *callSite, e, l int, x uint64) {
	w.regs[s.res+32*e+l] = maskBits(x, s.rbit)
}

// perLane is an op running f for each lane.
func perLane(f func(w *warp, l int)) op {
	return op{run: func(w *warp, m uint32) {
		for mm := m; mm != 0; mm &= mm - 1 {
			f(w, lane(mm))
		}
	}}
}

// f32Fn is an op computing a float function of the arguments.
func f32Fn(s *callSite, f func(x []float64) float64) op {
	n := len(s.args)
	return op{run: func(w *warp, m uint32) {
		var x [4]float64
		for mm := m; mm != 0; mm &= mm - 1 {
			l := lane(mm)
			for i := 0; i < n; i++ {
				x[i] = float64(f32(w.at(s.args[i], l)))
			}
			w.set(s, 0, l, uf32(float32(f(x[:n]))))
		}
	}}
}

func ftz(f float32) float32 {
	if f != 0 && math.Abs(float64(f)) < math.SmallestNonzeroFloat32*(1<<23) {
		return 0
	}
	return f
}

func (c *compiler) call(in *ir.InstCall) op {
	s := c.site(in)
	if ia, ok := in.Callee.(*ir.InlineAsm); ok {
		return c.asm(in, ia.Asm, s)
	}
	callee, ok := in.Callee.(*ir.Func)
	if !ok {
		fail("indirect call")
	}
	name := callee.Name()
	a := s.args
	switch {
	case name == "llvm.nvvm.read.ptx.sreg.tid.x":
		return perLane(func(w *warp, l int) { w.set(s, 0, l, uint64(32*w.id+l)) })
	case name == "llvm.nvvm.read.ptx.sreg.ntid.x":
		return perLane(func(w *warp, l int) { w.set(s, 0, l, uint64(w.cta.p.kernel.Threads)) })
	case name == "llvm.nvvm.read.ptx.sreg.laneid":
		return perLane(func(w *warp, l int) { w.set(s, 0, l, uint64(l)) })
	case name == "llvm.nvvm.read.ptx.sreg.warpid":
		return perLane(func(w *warp, l int) { w.set(s, 0, l, uint64(w.id)) })
	case strings.HasPrefix(name, "llvm.nvvm.read.ptx.sreg.ctaid."):
		k := name[len(name)-1] - 'x'
		return perLane(func(w *warp, l int) { w.set(s, 0, l, uint64(w.cta.id[k])) })
	case strings.HasPrefix(name, "llvm.nvvm.read.ptx.sreg.nctaid."):
		k := name[len(name)-1] - 'x'
		return perLane(func(w *warp, l int) { w.set(s, 0, l, uint64(w.cta.m.grid[k])) })
	case name == "llvm.nvvm.read.ptx.sreg.nsmid":
		return perLane(func(w *warp, l int) { w.set(s, 0, l, uint64(w.cta.m.sms)) })
	case name == "llvm.nvvm.cp.async.cg.shared.global.16.s", name == "llvm.nvvm.cp.async.cg.shared.global.16":
		sized := strings.HasSuffix(name, ".s")
		return perLane(func(w *warp, l int) {
			n := 16
			if sized {
				n = int(w.at(a[2], l))
			}
			w.cpAsync(l, cpCopy{dst: w.at(a[0], l), src: w.at(a[1], l), n: n})
		})
	case name == "llvm.nvvm.cp.async.commit.group":
		return perLane(func(w *warp, l int) { w.cpCommit(l) })
	case name == "llvm.nvvm.cp.async.wait.group":
		return perLane(func(w *warp, l int) { w.cpWait(l, int(w.at(a[0], l))) })
	case name == "llvm.nvvm.barrier0":
		return op{sync: true, block: func(w *warp, m uint32) bool { return w.sync(0, w.cta.p.kernel.Threads) }}
	case strings.HasPrefix(name, "llvm.nvvm.shfl.sync.bfly."):
		return op{sync: true, run: func(w *warp, m uint32) {
			var v [32]uint64
			for l := 0; l < 32; l++ {
				v[l] = w.at(a[1], l)
			}
			for l := 0; l < 32; l++ {
				src := l ^ int(w.at(a[2], l))
				if src < 0 || src > 31 {
					fail("shfl.sync.bfly lane mask %d", w.at(a[2], l))
				}
				w.set(s, 0, l, v[src])
			}
		}}
	case name == "llvm.nvvm.vote.any.sync":
		return op{sync: true, run: func(w *warp, m uint32) {
			var any uint64
			for l := 0; l < 32; l++ {
				any |= w.at(a[1], l) & 1
			}
			for l := 0; l < 32; l++ {
				w.set(s, 0, l, any)
			}
		}}
	case strings.HasPrefix(name, "llvm.nvvm.mma.m16n8k16.row.col."):
		f16 := !strings.HasSuffix(name, ".bf16")
		if len(a) != 10 || s.nres != 4 {
			fail("%s with %d arguments and %d results", name, len(a), s.nres)
		}
		return op{sync: true, run: func(w *warp, m uint32) {
			var A [32][4]uint64
			var B [32][2]uint64
			var C [32][4]uint64
			for l := 0; l < 32; l++ {
				for i := 0; i < 4; i++ {
					A[l][i] = w.at(a[i], l)
					C[l][i] = w.at(a[6+i], l)
				}
				B[l][0], B[l][1] = w.at(a[4], l), w.at(a[5], l)
			}
			d := mma(&A, &B, &C, f16)
			for l := 0; l < 32; l++ {
				for i := 0; i < 4; i++ {
					w.set(s, i, l, d[l][i])
				}
			}
		}}
	case strings.HasPrefix(name, "llvm.nvvm.ldmatrix.sync.aligned.m8n8."):
		n := 1
		switch {
		case strings.Contains(name, ".x2"):
			n = 2
		case strings.Contains(name, ".x4"):
			n = 4
		}
		trans := strings.Contains(name, ".trans")
		if s.nres != n {
			fail("%s with %d results", name, s.nres)
		}
		return op{sync: true, run: func(w *warp, m uint32) {
			var addrs [32]uint64
			for l := 0; l < 32; l++ {
				addrs[l] = w.at(a[0], l)
			}
			out := w.cta.ldmatrix(&addrs, n, trans)
			for l := 0; l < 32; l++ {
				for j := 0; j < n; j++ {
					w.set(s, j, l, out[l][j])
				}
			}
		}}
	case name == "llvm.nvvm.ex2.approx.ftz.f":
		return f32Fn(s, func(x []float64) float64 { return float64(ftz(float32(math.Exp2(x[0])))) })
	case name == "llvm.nvvm.ex2.approx.f", name == "llvm.exp2.f32":
		return f32Fn(s, func(x []float64) float64 { return math.Exp2(x[0]) })
	case name == "llvm.nvvm.lg2.approx.f", name == "llvm.nvvm.lg2.approx.ftz.f", name == "llvm.log2.f32":
		return f32Fn(s, func(x []float64) float64 { return math.Log2(x[0]) })
	case name == "llvm.maximum.f32":
		return f32Fn(s, func(x []float64) float64 { return max(x[0], x[1]) })
	case name == "llvm.minimum.f32":
		return f32Fn(s, func(x []float64) float64 { return min(x[0], x[1]) })
	case name == "llvm.maxnum.f32":
		return f32Fn(s, func(x []float64) float64 { return maxNum(x[0], x[1]) })
	case name == "llvm.minnum.f32":
		return f32Fn(s, func(x []float64) float64 { return -maxNum(-x[0], -x[1]) })
	case name == "llvm.fabs.f32":
		return f32Fn(s, func(x []float64) float64 { return math.Abs(x[0]) })
	case name == "llvm.sqrt.f32":
		return f32Fn(s, func(x []float64) float64 { return math.Sqrt(x[0]) })
	case name == "llvm.fma.f32", name == "llvm.fmuladd.f32":
		return f32Fn(s, func(x []float64) float64 { return math.FMA(x[0], x[1], x[2]) })
	case name == "llvm.floor.f32":
		return f32Fn(s, func(x []float64) float64 { return math.Floor(x[0]) })
	case strings.HasPrefix(name, "llvm.fptosi.sat."):
		rb := s.rbit
		lo, hi := -math.Ldexp(1, rb-1), math.Ldexp(1, rb-1)-1
		return perLane(func(w *warp, l int) {
			v := float64(f32(w.at(a[0], l)))
			switch {
			case v != v:
				v = 0
			case v < lo:
				v = lo
			case v > hi:
				v = hi
			}
			w.set(s, 0, l, uint64(int64(math.Trunc(v))))
		})
	}
	fail("unknown function %s", name)
	return op{}
}

// maxNum is IEEE maxNum: a NaN operand gives the other.
func maxNum(a, b float64) float64 {
	switch {
	case a != a:
		return b
	case b != b:
		return a
	}
	return max(a, b)
}
