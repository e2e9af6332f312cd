// Package codegen lowers verified, fully inlined tile-IR kernels to LLVM IR
// for the NVPTX back end (llc), in the manner of Triton's TTGIR → LLVM
// stage: a layout-assignment step gives every tensor value a distributed
// layout (blocked, mma accumulator, mma operand, slice), tensors become
// per-thread lists of LLVM scalars, and layout changes go through shared
// memory only where registers cannot be re-indexed. See docs/codegen.md.
package codegen

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

// Options controls code generation.
type Options struct {
	// Arch is the GPU target: sm_80 or newer (sm_80, sm_86, sm_89, sm_90,
	// sm_90a, ...). Empty means sm_80.
	Arch string
	// NumWarps is the number of warps per CTA; 0 takes the kernel's
	// num_warps attribute, else 4.
	NumWarps int
}

// ParamKind says how the runtime passes one kernel argument.
type ParamKind string

const (
	ParamU64 ParamKind = "u64" // a device pointer (ptr<T>)
	ParamI32 ParamKind = "i32" // i32, and i1 as 0/1
	ParamI64 ParamKind = "i64" // i64
	ParamF32 ParamKind = "f32" // f32, and f16/bf16 scalars (rounded in the kernel)
)

// Param is one kernel parameter, in order.
type Param struct {
	Name string   // tile-IR name, e.g. "q" or "mask.doc"
	Type tir.Type // tile-IR type
	Kind ParamKind
}

// Result is a lowered kernel.
type Result struct {
	LL          string // LLVM IR text (LLVM 14 syntax, typed pointers), no datalayout
	Name        string // the PTX .entry name
	Threads     int    // threads per CTA (block x dimension); blockDim = (Threads, 1, 1)
	SharedBytes int    // dynamic shared memory to request at launch
	Params      []Param
	// Conversions counts layout conversions through shared memory emitted
	// (a cost indicator; register re-indexing is not counted).
	Conversions int
}

// lateConversions counts conversions the demand analysis missed.
var lateConversions atomic.Int64

type lowerError struct{ msg string }

func (e lowerError) Error() string { return e.msg }

func fail(format string, args ...any) {
	panic(lowerError{fmt.Sprintf(format, args...)})
}

var archRE = regexp.MustCompile(`^sm_(\d+)[af]?$`)

// Lower lowers kernel of m to LLVM IR. m must be verified and fully
// inlined (no call ops); tensor shapes must be powers of two.
func Lower(m *tir.Module, kernel string, opts Options) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			le, ok := r.(lowerError)
			if !ok {
				panic(r)
			}
			res, err = nil, fmt.Errorf("codegen @%s: %s", kernel, le.msg)
		}
	}()
	f := m.Func(kernel)
	if f == nil {
		return nil, fmt.Errorf("codegen: no function @%s in module", kernel)
	}
	if !f.Kernel {
		return nil, fmt.Errorf("codegen: @%s is a func, not a kernel", kernel)
	}
	if opts.Arch == "" {
		opts.Arch = "sm_80"
	}
	am := archRE.FindStringSubmatch(opts.Arch)
	if am == nil {
		return nil, fmt.Errorf("codegen: bad arch %q (want sm_80, sm_90a, ...)", opts.Arch)
	}
	if n, _ := strconv.Atoi(am[1]); n < 80 {
		return nil, fmt.Errorf("codegen: arch %s not supported: need sm_80 or newer (bf16 mma, cvt.rn.bf16)", opts.Arch)
	}
	nw := opts.NumWarps
	if nw == 0 {
		if v, ok := f.Attr("num_warps").(int64); ok {
			nw = int(v)
		} else {
			nw = 4
		}
	}
	if !isPow2(nw) || nw > 32 {
		return nil, fmt.Errorf("codegen: num_warps = %d: want a power of two from 1 to 32", nw)
	}
	if err := precheck(f); err != nil {
		return nil, fmt.Errorf("codegen @%s: %v", kernel, err)
	}
	l := newLowerer(f, nw)
	l.a.assign(f)
	l.f.Body.Walk(func(op *tir.Op) bool {
		if at := l.a.async[op]; at != nil {
			m, _ := l.a.mmaDot(at.dot)
			if l.a.fuseOperand(at.dot, m, at.operand) {
				l.asyncOrder = append(l.asyncOrder, op)
			} else {
				delete(l.a.async, op)
			}
		}
		return true
	})
	l.scratchBase = l.planAsync()
	l.smemBytes = l.scratchBase
	l.lowerKernel()
	res = &Result{
		LL:          l.text(),
		Name:        l.fn.Name(),
		Threads:     nw * 32,
		SharedBytes: l.smemBytes,
		Params:      l.params,
		Conversions: l.conversions,
	}
	return res, nil
}

// precheck rejects what codegen cannot lower with a clear message.
func precheck(f *tir.Func) error {
	var err error
	check := func(v *tir.Value, op *tir.Op) {
		if err != nil {
			return
		}
		for _, d := range v.Type.Shape {
			if !isPow2(d) {
				where := "value"
				if op != nil {
					where = fmt.Sprintf("%s: result of %s", op.Pos, op.Kind)
				}
				err = fmt.Errorf("%s has shape %v: codegen needs power-of-two dimensions", where, v.Type.Shape)
				return
			}
		}
	}
	f.Body.Walk(func(op *tir.Op) bool {
		if op.Kind == tir.OpCall && err == nil {
			err = fmt.Errorf("%s: call to %s not inlined (run the inline pass before codegen)", op.Pos, op.IdentAttr("callee"))
		}
		for _, r := range op.Results {
			check(r, op)
		}
		for _, rg := range op.Regions {
			for _, a := range rg.Args {
				check(a, op)
			}
		}
		return true
	})
	return err
}

type lowerer struct {
	f  *tir.Func
	nw int
	a  *assigner

	mod   *ir.Module
	fn    *ir.Func
	entry *ir.Block // run-time constants (thread ids, layout bases); branches to the body
	b     *ir.Block // current insertion block

	env     map[*tir.Value]map[string][]value.Value
	lins    map[string]*linear
	bases   map[string][]value.Value
	flats   map[string]value.Value
	smemPtr map[string]value.Value
	decls   map[string]*ir.Func

	tid, lane, warp value.Value
	smem            *ir.Global
	smemBytes       int
	conversions     int
	nblocks         int
	params          []Param

	// Staged (cp.async) tiles: they sit at the start of shared memory, the
	// scratch area of conversions and reductions starts at scratchBase.
	asyncOrder     []*tir.Op
	smemTiles      map[*tir.Value]*asyncTile
	scratchBase    int
	asyncCommits   int
	regionsLowered int
	inFlight       int // staged tiles loaded and not yet consumed
	// smemDirty: shared memory may have been accessed since the last
	// barrier on some path to here (a staged load must then sync first).
	smemDirty bool
}

func newLowerer(f *tir.Func, nw int) *lowerer {
	return &lowerer{
		f: f, nw: nw, a: newAssigner(nw),
		mod:     ir.NewModule(),
		env:     map[*tir.Value]map[string][]value.Value{},
		lins:    map[string]*linear{},
		bases:   map[string][]value.Value{},
		flats:   map[string]value.Value{},
		smemPtr: map[string]value.Value{},
		decls:   map[string]*ir.Func{},

		smemTiles: map[*tir.Value]*asyncTile{},
	}
}

var nameRE = regexp.MustCompile(`[^A-Za-z0-9_]`)

func sanitize(s string) string {
	s = nameRE.ReplaceAllString(s, "_")
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		s = "_" + s
	}
	return s
}

func (l *lowerer) lowerKernel() {
	l.mod.TargetTriple = "nvptx64-nvidia-cuda"
	var params []*ir.Param
	for _, p := range l.f.Params {
		t := p.Type
		var lt types.Type
		var kind ParamKind
		switch {
		case t.Ptr:
			lt, kind = ptrType(t.Elem), ParamU64
		case t.Elem == tir.I32 || t.Elem == tir.I1:
			lt, kind = types.I32, ParamI32
		case t.Elem == tir.I64:
			lt, kind = types.I64, ParamI64
		case t.Elem.IsFloat():
			lt, kind = types.Float, ParamF32
		default:
			fail("kernel parameter %%%s: unsupported type %s", p.Name, t)
		}
		params = append(params, ir.NewParam(sanitize(p.Name), lt))
		l.params = append(l.params, Param{Name: p.Name, Type: t, Kind: kind})
	}
	l.fn = l.mod.NewFunc(sanitize(l.f.Name), types.Void, params...)
	l.fn.CallingConv = enum.CallingConvPTXKernel
	l.entry = l.fn.NewBlock("entry")
	body := l.newBlock("body")
	l.b = l.entry
	l.tid = l.call("llvm.nvvm.read.ptx.sreg.tid.x", types.I32)
	l.lane = l.entry.NewAnd(l.tid, ci32(31))
	l.warp = l.entry.NewLShr(l.tid, ci32(5))
	l.b = body
	for i, p := range l.f.Params {
		var v value.Value = params[i]
		switch t := p.Type; {
		case t.Ptr:
		case t.Elem == tir.I1:
			v = l.b.NewICmp(enum.IPredNE, v, ci32(0))
		case t.Elem == tir.F16 || t.Elem == tir.BF16:
			v = l.fromF32(v, t.Elem)
		}
		l.put(p, scalarL, []value.Value{v})
	}
	l.lowerBlock(l.f.Body)
	l.b.NewRet(nil)
	l.entry.NewBr(body)
}

func (l *lowerer) text() string {
	var b strings.Builder
	b.WriteString(l.mod.String())
	fmt.Fprintf(&b, "\n!nvvm.annotations = !{!0}\n!0 = !{%s %s, !\"maxntidx\", i32 %d}\n",
		l.fn.Type(), l.fn.Ident(), l.nw*32)
	return b.String()
}

func (l *lowerer) newBlock(name string) *ir.Block {
	l.nblocks++
	return l.fn.NewBlock(fmt.Sprintf("%s%d", name, l.nblocks))
}

// ---- value environment ----

func (l *lowerer) put(v *tir.Value, lay Layout, regs []value.Value) {
	m := l.env[v]
	if m == nil {
		m = map[string][]value.Value{}
		l.env[v] = m
	}
	m[lay.String()] = regs
}

// get returns v's registers in layout lay.
func (l *lowerer) get(v *tir.Value, lay Layout) []value.Value {
	if v.Type.IsScalar() {
		lay = scalarL
	}
	if regs, ok := l.env[v][lay.String()]; ok {
		return regs
	}
	in := l.a.info[v]
	if in != nil && !in.flex {
		if src, ok := l.env[v][in.lay.String()]; ok {
			// Not announced by the demand pass: convert here (correct, but
			// not hoisted to the definition). Tests check this never runs.
			lateConversions.Add(1)
			return l.convert(src, in.lay, lay, v.Type)
		}
	}
	fail("internal error: value of type %s not available in layout %s", v.Type, lay)
	return nil
}

func (l *lowerer) lin(lay Layout, shape []int) *linear {
	key := lay.String() + fmt.Sprint(shape)
	if x, ok := l.lins[key]; ok {
		return x
	}
	x := lay.linear(shape, l.nw)
	if err := x.check(); err != nil {
		fail("internal error: layout %s on %v: %v", lay, shape, err)
	}
	l.lins[key] = x
	return x
}

// ---- blocks and ops ----

// lowerBlock lowers b's ops and returns its terminator (or nil).
func (l *lowerer) lowerBlock(b *tir.Block) *tir.Op {
	for _, op := range b.Ops {
		if op.Kind.IsTerminator() {
			return op
		}
		l.lowerOp(op)
	}
	return nil
}

func (l *lowerer) lowerOp(op *tir.Op) {
	switch op.Kind {
	case tir.OpFor:
		l.lowerFor(op)
		return
	case tir.OpIf:
		l.lowerIf(op)
		return
	case tir.OpStore:
		l.lowerStore(op)
		return
	case tir.OpLoad:
		if at := l.a.async[op]; at != nil {
			l.lowerAsyncLoad(op, at)
			l.smemTiles[op.Result()] = at
			return
		}
	case tir.OpTrans:
		if at := l.smemTiles[op.Args[0]]; at != nil {
			l.smemTiles[op.Result()] = at // a transposed view of the staged tile
			return
		}
	}
	v := op.Result()
	in := l.a.get(v)
	if in.flex {
		for _, lay := range in.demands() {
			l.put(v, lay, l.lowerIn(op, lay))
		}
		return
	}
	l.put(v, in.lay, l.lowerIn(op, in.lay))
	l.convertDemands(v)
}

// convertDemands materializes an anchored value in every extra layout its
// consumers want, right after its definition.
func (l *lowerer) convertDemands(v *tir.Value) {
	in := l.a.get(v)
	if in.flex {
		return
	}
	src := l.env[v][in.lay.String()]
	for _, lay := range in.demands() {
		l.put(v, lay, l.convert(src, in.lay, lay, v.Type))
	}
}

// lowerIn produces op's result in layout lay.
func (l *lowerer) lowerIn(op *tir.Op, lay Layout) []value.Value {
	ws := l.a.operandWants(op, lay)
	arg := func(i int) []value.Value { return l.get(op.Args[i], ws[i]) }
	rt := op.Result().Type
	lout := l.lin(lay, rt.Shape)
	n := lout.numRegs()
	k := op.Kind
	switch {
	case k == tir.OpConst:
		c := l.constant(rt, op.Attr("value"))
		return repeat(c, n)
	case k == tir.OpSplat:
		return repeat(arg(0)[0], n)
	case k == tir.OpArange:
		base := l.baseCoords(lout)[0]
		start := op.IntAttr("start")
		out := make([]value.Value, n)
		for r := range out {
			out[r] = l.addOff(base, int64(lout.regOffset(r)[0])+start)
		}
		return out
	case k == tir.OpProgramID:
		axis := op.IntAttr("axis")
		if axis < 0 || axis > 2 {
			fail("%s: program_id axis %d", op.Pos, axis)
		}
		return []value.Value{l.call("llvm.nvvm.read.ptx.sreg.ctaid."+"xyz"[axis:axis+1], types.I32)}
	case k.IsElementwise():
		args := make([][]value.Value, len(op.Args))
		for i := range op.Args {
			args[i] = arg(i)
		}
		out := make([]value.Value, n)
		for r := range out {
			xs := make([]value.Value, len(args))
			for i := range args {
				xs[i] = args[i][r]
			}
			out[r] = l.elementwise(op, xs)
		}
		return out
	case k == tir.OpBroadcast, k == tir.OpReshape, k == tir.OpTrans:
		return l.shapeOp(op, ws[0], lay)
	case k == tir.OpLoad:
		return l.lowerLoad(op, lay, ws)
	case k == tir.OpDot:
		return l.lowerDot(op, lay, ws)
	case k == tir.OpReduce:
		return l.lowerReduce(op, lay, ws)
	}
	fail("%s: codegen does not support op %s", op.Pos, k)
	return nil
}

func repeat(v value.Value, n int) []value.Value {
	out := make([]value.Value, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// ---- control flow ----

func (l *lowerer) lowerFor(op *tir.Op) {
	l.regionsLowered++
	l.smemDirty = true
	defer func() { l.smemDirty = true }()
	lays := l.a.forLays[op]
	lo := l.get(op.Args[0], scalarL)[0]
	hi := l.get(op.Args[1], scalarL)[0]
	step := l.get(op.Args[2], scalarL)[0]
	inits := make([][]value.Value, len(lays))
	for i := range lays {
		inits[i] = l.get(op.Args[3+i], lays[i])
	}
	pre := l.b
	hdr, body, exit := l.newBlock("for.hdr"), l.newBlock("for.body"), l.newBlock("for.exit")
	pre.NewBr(hdr)
	iv := hdr.NewPhi(ir.NewIncoming(lo, pre))
	phis := make([][]*ir.InstPhi, len(lays))
	for i, regs := range inits {
		for _, r := range regs {
			phis[i] = append(phis[i], hdr.NewPhi(ir.NewIncoming(r, pre)))
		}
	}
	hdr.NewCondBr(hdr.NewICmp(enum.IPredSLT, iv, hi), body, exit)

	l.b = body
	rb := op.Regions[0]
	l.put(rb.Args[0], scalarL, []value.Value{iv})
	for i, a := range rb.Args[1:] {
		l.put(a, lays[i], phiValues(phis[i]))
		l.convertDemands(a)
	}
	y := l.lowerBlock(rb)
	if y == nil || y.Kind != tir.OpYield || len(y.Args) != len(lays) {
		fail("%s: for body must end with yield of %d values", op.Pos, len(lays))
	}
	yields := make([][]value.Value, len(lays))
	for i := range lays {
		yields[i] = l.get(y.Args[i], lays[i])
	}
	next := l.b.NewAdd(iv, step)
	latch := l.b
	latch.NewBr(hdr)
	iv.Incs = append(iv.Incs, ir.NewIncoming(next, latch))
	for i := range phis {
		for j, p := range phis[i] {
			p.Incs = append(p.Incs, ir.NewIncoming(yields[i][j], latch))
		}
	}
	l.b = exit
	for i, r := range op.Results {
		l.put(r, lays[i], phiValues(phis[i]))
		l.convertDemands(r)
	}
}

func phiValues(ps []*ir.InstPhi) []value.Value {
	out := make([]value.Value, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}

func (l *lowerer) lowerIf(op *tir.Op) {
	l.regionsLowered++
	defer func() { l.smemDirty = true }()
	lays := l.a.forLays[op]
	cond := l.get(op.Args[0], scalarL)[0]
	thenB, elseB, merge := l.newBlock("if.then"), l.newBlock("if.else"), l.newBlock("if.end")
	l.b.NewCondBr(cond, thenB, elseB)
	arm := func(i int, start *ir.Block) ([][]value.Value, *ir.Block) {
		l.b = start
		l.smemDirty = true
		var ys [][]value.Value
		if i < len(op.Regions) {
			y := l.lowerBlock(op.Regions[i])
			if len(lays) > 0 {
				if y == nil || y.Kind != tir.OpYield || len(y.Args) != len(lays) {
					fail("%s: if region must end with yield of %d values", op.Pos, len(lays))
				}
				for j := range lays {
					ys = append(ys, l.get(y.Args[j], lays[j]))
				}
			}
		} else if len(lays) > 0 {
			fail("%s: if with results needs an else region", op.Pos)
		}
		end := l.b
		end.NewBr(merge)
		return ys, end
	}
	ty, te := arm(0, thenB)
	ey, ee := arm(1, elseB)
	l.b = merge
	for i, r := range op.Results {
		regs := make([]value.Value, len(ty[i]))
		for j := range regs {
			regs[j] = merge.NewPhi(ir.NewIncoming(ty[i][j], te), ir.NewIncoming(ey[i][j], ee))
		}
		l.put(r, lays[i], regs)
		l.convertDemands(r)
	}
}

// ---- small helpers ----

func ci32(x int64) *constant.Int { return constant.NewInt(types.I32, x) }
func ci64(x int64) *constant.Int { return constant.NewInt(types.I64, x) }
