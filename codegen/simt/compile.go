package simt

import (
	"fmt"
	"math"
	"math/big"

	"github.com/llir/llvm/asm"
	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/internal/half"
)

// Program is a kernel's LLVM IR compiled for the simulator.
type Program struct {
	kernel *Kernel
	nslots int
	consts []constInit // slots every warp starts with
	params []int       // each parameter's slot offset
	blocks []*block
	entry  int
	// usesProxy: the kernel uses wgmma or TMA, so generic-proxy writes to
	// shared memory are tracked; usesTMA: shared bytes in flight are.
	usesProxy, usesTMA bool
}

// A slot offset is a value's first slot times 32: lane l of element e of
// the value at offset o is regs[o + 32e + l].

type constInit struct {
	off  int
	bits uint64
}

// laneFn runs one instruction for the lanes in m.
type laneFn func(w *warp, m uint32)

// op is one compiled instruction.
type op struct {
	run laneFn
	// block: run reports whether the instruction completed; a blocked
	// warp retries it later (barriers, waits, warpgroup rendezvous).
	block func(w *warp, m uint32) bool
	// sync: the whole warp must execute it, converged.
	sync bool
	inst ir.Instruction
}

type block struct {
	name  string
	index int
	rank  int // position in reverse postorder: lanes at the lowest rank run first
	ops   []op
	cond  int     // the condition's slot (conditional branch)
	succ  []int   // successors: [target] or [true, false]
	edges []*edge // phi copies per successor
	ret   bool    // a return
	trap  string  // non-empty: executing the terminator fails with this
}

// edge is the parallel copy of a branch's phis.
type edge struct {
	dst, src []int
	temp     bool // a source is also a destination: read them all first
}

type compiler struct {
	p     *Program
	slots map[value.Value]int
}

// Compile parses ll and compiles the function k.Name.
func Compile(ll string, k *Kernel) (*Program, error) {
	mod, err := asm.ParseString("kernel.ll", ll)
	if err != nil {
		return nil, fmt.Errorf("parse LLVM IR: %v", err)
	}
	for _, f := range mod.Funcs {
		if f.Name() == k.Name {
			return CompileFunc(f, k)
		}
	}
	return nil, fmt.Errorf("no function %s", k.Name)
}

// CompileFunc compiles fn, the function of kernel k.
func CompileFunc(fn *ir.Func, k *Kernel) (p *Program, err error) {
	if len(fn.Params) != len(k.Params) {
		return nil, fmt.Errorf("function %s has %d parameters, the kernel %d", k.Name, len(fn.Params), len(k.Params))
	}
	if k.Threads <= 0 || k.Threads%32 != 0 {
		return nil, fmt.Errorf("%d threads: want a positive multiple of 32", k.Threads)
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(simError)
			if !ok {
				panic(r)
			}
			p, err = nil, fmt.Errorf("compile %s: %s", k.Name, e.msg)
		}
	}()
	c := &compiler{p: &Program{kernel: k}, slots: map[value.Value]int{}}
	c.compile(fn)
	return c.p, nil
}

func (c *compiler) alloc(n int) int {
	off := c.p.nslots * 32
	c.p.nslots += n
	return off
}

// count is the number of slots of a value of type t: 1 for a scalar, one
// per element of a vector or field of a struct of scalars.
func count(t types.Type) int {
	switch t := t.(type) {
	case *types.VectorType:
		return int(t.Len)
	case *types.StructType:
		for _, f := range t.Fields {
			if _, ok := f.(*types.StructType); ok {
				fail("nested struct %s", t)
			}
			if _, ok := f.(*types.VectorType); ok {
				fail("struct of vectors %s", t)
			}
		}
		return len(t.Fields)
	case *types.ArrayType:
		fail("array value %s", t)
	}
	return 1
}

// elemType is the type of element i of a value of type t.
func elemType(t types.Type, i int) types.Type {
	switch t := t.(type) {
	case *types.VectorType:
		return t.ElemType
	case *types.StructType:
		return t.Fields[i]
	}
	return t
}

func (c *compiler) compile(fn *ir.Func) {
	p := c.p
	for _, par := range fn.Params {
		off := c.alloc(1)
		c.slots[par] = off
		p.params = append(p.params, off)
	}
	for _, b := range fn.Blocks {
		for _, inst := range b.Insts {
			if v, ok := inst.(value.Value); ok && !types.Equal(v.Type(), types.Void) {
				c.slots[v] = c.alloc(count(v.Type()))
			}
		}
	}
	index := map[*ir.Block]int{}
	for i, b := range fn.Blocks {
		index[b] = i
		p.blocks = append(p.blocks, &block{name: b.Ident(), index: i})
	}
	for i, rank := range rpo(fn, index) {
		p.blocks[i].rank = rank
	}
	for i, b := range fn.Blocks {
		blk := p.blocks[i]
		for _, inst := range b.Insts {
			if _, ok := inst.(*ir.InstPhi); ok {
				continue
			}
			o := c.inst(inst)
			o.inst = inst
			blk.ops = append(blk.ops, o)
		}
		c.term(b, blk, index)
	}
}

// rpo ranks fn's blocks in reverse postorder from the entry (unreachable
// blocks last).
func rpo(fn *ir.Func, index map[*ir.Block]int) []int {
	n := len(fn.Blocks)
	rank := make([]int, n)
	seen := make([]bool, n)
	var post []int
	var visit func(i int)
	visit = func(i int) {
		seen[i] = true
		for _, s := range succs(fn.Blocks[i].Term) {
			if j, ok := index[s]; ok && !seen[j] {
				visit(j)
			}
		}
		post = append(post, i)
	}
	visit(0)
	for i := range rank {
		rank[i] = n
	}
	for k, i := range post {
		rank[i] = len(post) - 1 - k
	}
	return rank
}

func succs(t ir.Terminator) []*ir.Block {
	switch t := t.(type) {
	case *ir.TermBr:
		return []*ir.Block{t.Target.(*ir.Block)}
	case *ir.TermCondBr:
		return []*ir.Block{t.TargetTrue.(*ir.Block), t.TargetFalse.(*ir.Block)}
	}
	return nil
}

func (c *compiler) term(b *ir.Block, blk *block, index map[*ir.Block]int) {
	switch t := b.Term.(type) {
	case *ir.TermRet:
		blk.ret = true
	case *ir.TermBr, *ir.TermCondBr:
		if cb, ok := t.(*ir.TermCondBr); ok {
			blk.cond = c.val(cb.Cond)
		}
		for _, s := range succs(t) {
			blk.succ = append(blk.succ, index[s])
			blk.edges = append(blk.edges, c.edge(b, s))
		}
	case *ir.TermUnreachable:
		blk.trap = "unreachable executed in " + b.Ident()
	default:
		fail("terminator %T in %s", t, b.Ident())
	}
}

// edge compiles the phis of to for the branch from from.
func (c *compiler) edge(from, to *ir.Block) *edge {
	e := &edge{}
	dsts := map[int]bool{}
	for _, inst := range to.Insts {
		phi, ok := inst.(*ir.InstPhi)
		if !ok {
			break
		}
		var inc value.Value
		for _, in := range phi.Incs {
			if in.Pred.(*ir.Block) == from {
				inc = in.X
				break
			}
		}
		if inc == nil {
			fail("phi %s in %s without an incoming value from %s", phi.Ident(), to.Ident(), from.Ident())
		}
		d, s := c.slots[phi], c.val(inc)
		for k := 0; k < count(phi.Type()); k++ {
			e.dst = append(e.dst, d+32*k)
			e.src = append(e.src, s+32*k)
			dsts[d+32*k] = true
		}
	}
	for _, s := range e.src {
		if dsts[s] {
			e.temp = true
		}
	}
	return e
}

// val is the slot offset of v: an instruction's or parameter's, or a
// constant's (made on first use).
func (c *compiler) val(v value.Value) int {
	if off, ok := c.slots[v]; ok {
		return off
	}
	bits := c.constBits(v)
	off := c.alloc(len(bits))
	for i, b := range bits {
		c.p.consts = append(c.p.consts, constInit{off + 32*i, b})
	}
	c.slots[v] = off
	return off
}

// constBits are the element bits of constant v.
func (c *compiler) constBits(v value.Value) []uint64 {
	switch k := v.(type) {
	case *constant.Int:
		bits := int(k.Typ.BitSize)
		var x big.Int
		x.Set(k.X)
		if x.Sign() < 0 {
			return []uint64{maskBits(uint64(x.Int64()), bits)}
		}
		return []uint64{maskBits(x.Uint64(), bits)}
	case *constant.Float:
		var f float32
		if k.NaN {
			f = float32(math.NaN())
		} else {
			f, _ = k.X.Float32()
		}
		switch k.Typ.Kind {
		case types.FloatKindHalf:
			return []uint64{uint64(half.F32ToF16(f))}
		case types.FloatKindFloat:
			return []uint64{uint64(math.Float32bits(f))}
		}
		fail("constant of type %s", k.Typ)
	case *constant.Undef, *constant.ZeroInitializer, *constant.Null, *constant.Poison:
		return make([]uint64, count(v.Type()))
	case *constant.Vector:
		var out []uint64
		for _, e := range k.Elems {
			out = append(out, c.constBits(e)...)
		}
		return out
	case *ir.Global:
		return []uint64{0} // @smem: shared address 0
	}
	fail("operand %s (%T) is neither a value nor a supported constant", v.Ident(), v)
	return nil
}

func maskBits(x uint64, bits int) uint64 {
	if bits >= 64 {
		return x
	}
	return x & (1<<bits - 1)
}

func sext(x uint64, bits int) int64 {
	if bits >= 64 {
		return int64(x)
	}
	s := 64 - bits
	return int64(x<<s) >> s
}

// bitsOf is the bit width of a scalar or vector type.
func bitsOf(t types.Type) int {
	switch t := t.(type) {
	case *types.IntType:
		return int(t.BitSize)
	case *types.FloatType:
		switch t.Kind {
		case types.FloatKindHalf:
			return 16
		case types.FloatKindFloat:
			return 32
		case types.FloatKindDouble:
			return 64
		}
	case *types.PointerType:
		return 64
	case *types.VectorType:
		return int(t.Len) * bitsOf(t.ElemType)
	}
	fail("bits of %s", t)
	return 0
}

// sizeOf is the bytes a value of type t occupies in memory.
func sizeOf(t types.Type) int {
	switch t := t.(type) {
	case *types.ArrayType:
		return int(t.Len) * sizeOf(t.ElemType)
	case *types.VectorType:
		return int(t.Len) * sizeOf(t.ElemType)
	}
	return (bitsOf(t) + 7) / 8
}

// space is the address space of pointer type t.
func space(t types.Type) int {
	pt, ok := t.(*types.PointerType)
	if !ok {
		fail("%s is not a pointer", t)
	}
	return int(pt.AddrSpace)
}

func isFloat(t types.Type) bool {
	_, ok := t.(*types.FloatType)
	return ok
}

func isHalf(t types.Type) bool {
	f, ok := t.(*types.FloatType)
	return ok && f.Kind == types.FloatKindHalf
}

func isF32(t types.Type) bool {
	f, ok := t.(*types.FloatType)
	return ok && f.Kind == types.FloatKindFloat
}
