package core

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/fac-compiler/fac/tir"
)

var nameRE = regexp.MustCompile(`[^A-Za-z0-9_]`)

func sanitize(s string) string {
	s = nameRE.ReplaceAllString(s, "_")
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		s = "_" + s
	}
	return s
}

func (l *Lowerer) lowerKernel() {
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
			Fail("kernel parameter %%%s: unsupported type %s", p.Name, t)
		}
		params = append(params, ir.NewParam(sanitize(p.Name), lt))
		l.params = append(l.params, Param{Name: p.Name, Type: t, Kind: kind})
	}
	params = append(params, l.lowerExtraParams()...)
	l.fn = l.mod.NewFunc(sanitize(l.f.Name), types.Void, params...)
	l.fn.CallingConv = enum.CallingConvPTXKernel
	l.entry = l.fn.NewBlock("entry")
	body := l.newBlock("body")
	l.b = l.entry
	l.tid = l.Call("llvm.nvvm.read.ptx.sreg.tid.x", types.I32)
	if l.grp != nil {
		if l.ws == nil {
			Fail("consumer_groups = %d: the groups need a producer warpgroup (warp_specialize on sm_90a with TMA copies)", l.grp.n)
		}
		l.groupEntry()
	}
	l.lane = l.entry.NewAnd(l.tid, ConstI32(31))
	l.warp = l.entry.NewLShr(l.tid, ConstI32(5))
	l.b = body
	for i, p := range l.f.Params {
		var v value.Value = params[i]
		switch t := p.Type; {
		case t.Ptr:
		case t.Elem == tir.I1:
			v = l.b.NewICmp(enum.IPredNE, v, ConstI32(0))
		case t.Elem == tir.F16 || t.Elem == tir.BF16:
			v = l.fromF32(v, t.Elem)
		}
		l.put(p, scalarL, []value.Value{v})
	}
	if pt, ok := l.target.(PrologueTarget); ok {
		pt.Prologue(l)
	}
	if l.ws != nil {
		l.splitWarps()
	}
	l.lowerBlock(l.f.Body)
	if l.bulkUsed {
		// Shared memory must outlive the bulk reductions that read it.
		l.asm(types.Void, "cp.async.bulk.wait_group 0;", "~{memory}", true)
	} else if l.bulkStored {
		// Shared memory must outlive the tensor stores' reads of it.
		l.asm(types.Void, "cp.async.bulk.wait_group.read 0;", "~{memory}", true)
	}
	l.fusePhiPacks()
	if l.grp != nil {
		l.finishGroups()
	}
	l.b.NewRet(nil)
	l.entry.NewBr(body)
}

// CTAsPerSM is the CTAs a multiprocessor ptxas is asked to fit: the
// target's experiment (CTAsTarget, ctas-per-sm) where it sets one, else
// the kernel's ctas_per_sm argument; 0 or 1 leave ptxas its choice. A
// kernel with a producer warpgroup keeps one (text).
func (l *Lowerer) CTAsPerSM() int {
	if t, ok := l.target.(CTAsTarget); ok && t.CTAsPerSM() > 1 {
		return t.CTAsPerSM()
	}
	n, _ := l.f.Attr(CTAsPerSMArg).(int64)
	return int(n)
}

// CTAsPerSMArg is the schedule argument that asks ptxas to fit that many
// CTAs on a multiprocessor (1 to MaxCTAsPerSM).
const CTAsPerSMArg = "ctas_per_sm"

// MaxCTAsPerSM is the most CTAs a multiprocessor holds (sm_80 to sm_90).
const MaxCTAsPerSM = 32

func (l *Lowerer) text() string {
	var b strings.Builder
	b.WriteString(l.mod.String())
	fn := fmt.Sprintf("%s %s", l.fn.Type(), l.fn.Ident())
	notes := []string{fmt.Sprintf("!{%s, !\"maxntidx\", i32 %d}", fn, l.Threads())}
	gc := l.gridConstants()
	if gc != "" {
		notes = append(notes, "") // filled below: it names the node after the list
	}
	if l.ws != nil {
		// setmaxnreg needs the registers per thread at entry to be known:
		// the most threads and one CTA per multiprocessor fix them.
		notes = append(notes, fmt.Sprintf("!{%s, !\"minctasm\", i32 1}", fn))
	} else if n := l.CTAsPerSM(); n > 1 {
		notes = append(notes, fmt.Sprintf("!{%s, !\"minctasm\", i32 %d}", fn, n))
	}
	if gc != "" {
		notes[1] = fmt.Sprintf("!{%s, !\"grid_constant\", !%d}", fn, len(notes))
	}
	refs := make([]string, len(notes))
	for i := range notes {
		refs[i] = fmt.Sprintf("!%d", i)
	}
	fmt.Fprintf(&b, "\n!nvvm.annotations = !{%s}\n", strings.Join(refs, ", "))
	for i, n := range notes {
		fmt.Fprintf(&b, "!%d = %s\n", i, n)
	}
	if gc != "" {
		fmt.Fprintf(&b, "!%d = !%s\n", len(notes), gc)
	}
	return b.String()
}

func (l *Lowerer) newBlock(name string) *ir.Block {
	l.nblocks++
	if l.InProducer() {
		name = "producer." + name // the producer warp's blocks read as such
	}
	return l.fn.NewBlock(fmt.Sprintf("%s%d", name, l.nblocks))
}

// ---- value environment ----

func (l *Lowerer) put(v *tir.Value, lay Layout, regs []value.Value) {
	m := l.env[v]
	if m == nil {
		m = map[string][]value.Value{}
		l.env[v] = m
	}
	m[lay.String()] = regs
}

// Get returns v's registers in layout lay (converting it there, with a
// late conversion, if the assignment did not announce that layout).
func (l *Lowerer) Get(v *tir.Value, lay Layout) []value.Value {
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
	Fail("internal error: value of type %s not available in layout %s", v.Type, lay)
	return nil
}

// Lin is lay on shape (memoized), checked against Linear's invariants.
func (l *Lowerer) Lin(lay Layout, shape []int) *Linear {
	key := lay.String() + fmt.Sprint(shape)
	if x, ok := l.lins[key]; ok {
		return x
	}
	x := lay.Linear(shape, l.nw)
	if err := x.Check(); err != nil {
		Fail("internal error: layout %s on %v: %v", lay, shape, err)
	}
	l.lins[key] = x
	return x
}

// ---- blocks and ops ----

// lowerBlock lowers b's ops and returns its terminator (or nil).
func (l *Lowerer) lowerBlock(b *tir.Block) *tir.Op {
	defer l.awaitBlockEnd()
	defer l.runDeferred(l.depth)
	outer, outerIdx := l.curOps, l.curIdx
	defer func() { l.curOps, l.curIdx = outer, outerIdx }()
	for i, op := range b.Ops {
		if op.Kind.IsTerminator() {
			return op
		}
		l.curOps, l.curIdx = b.Ops, i
		l.lowerOp(op)
		if ws := l.ws; ws != nil && ws.consumer && ws.outer != nil && ws.pipe.tail != nil && op == ws.pipe.tail.branch {
			l.handBackTail()
		}
	}
	return nil
}

// Neighbor returns the op d places from the one being lowered in its block
// (d = -1: the one before), or nil past either end or at the terminator.
// Targets use it to group adjacent ops (sm90: one pingpong turn for the
// dots issued back to back).
func (l *Lowerer) Neighbor(d int) *tir.Op {
	i := l.curIdx + d
	if l.curOps == nil || i < 0 || i >= len(l.curOps) || l.curOps[i].Kind.IsTerminator() {
		return nil
	}
	return l.curOps[i]
}

func (l *Lowerer) lowerOp(op *tir.Op) {
	l.issueArmedPrefetch(op)
	l.awaitUses(op)
	if ws := l.ws; ws != nil && ws.consumer && !ws.producing && ws.copyOnly[op] {
		return // the producer's (copyOnlyOps)
	}
	if v, ok := l.bodyAhead[op]; ok && l.inSlice == 0 {
		// A block-list entry a pipelined loop read iterations ago.
		l.put(op.Result(), scalarL, []value.Value{v})
		return
	}
	switch op.Kind {
	case tir.OpFor:
		l.lowerFor(op)
		return
	case tir.OpIf:
		l.runDeferred(l.depth)
		l.lowerIf(op)
		return
	case tir.OpStore:
		l.lowerStore(op)
		return
	case tir.OpAtomicAdd:
		l.lowerAtomicAdd(op)
		return
	case tir.OpPrefetch:
		l.lowerPrefetch(op)
		return
	case tir.OpLoad:
		if st := l.a.async[op]; st != nil {
			l.lowerStaged(op, st)
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
func (l *Lowerer) convertDemands(v *tir.Value) {
	in := l.a.get(v)
	if in.flex {
		return
	}
	if len(in.demands()) > 0 {
		l.await(v)
	}
	src := l.env[v][in.lay.String()]
	for _, lay := range in.demands() {
		l.put(v, lay, l.convert(src, in.lay, lay, v.Type))
	}
}

// lowerIn produces op's result in layout lay.
func (l *Lowerer) lowerIn(op *tir.Op, lay Layout) []value.Value {
	ws := l.a.operandWants(op, lay)
	arg := func(i int) []value.Value { return l.Get(op.Args[i], ws[i]) }
	rt := op.Result().Type
	lout := l.Lin(lay, rt.Shape)
	n := lout.NumRegs()
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
			out[r] = l.AddOff(base, int64(lout.RegOffset(r)[0])+start)
		}
		return out
	case k == tir.OpProgramID:
		axis := op.IntAttr("axis")
		if axis < 0 || axis > 2 {
			Fail("%s: program_id axis %d", op.Pos, axis)
		}
		return []value.Value{l.Call("llvm.nvvm.read.ptx.sreg.ctaid."+"xyz"[axis:axis+1], types.I32)}
	case k == tir.OpNumPrograms:
		axis := op.IntAttr("axis")
		if axis < 0 || axis > 2 {
			Fail("%s: num_programs axis %d", op.Pos, axis)
		}
		return []value.Value{l.Call("llvm.nvvm.read.ptx.sreg.nctaid."+"xyz"[axis:axis+1], types.I32)}
	case k == tir.OpGroupID:
		return []value.Value{l.GroupID()}
	case k == tir.OpNumSMs:
		return []value.Value{l.Call("llvm.nvvm.read.ptx.sreg.nsmid", types.I32)}
	case k.IsElementwise():
		if out := l.indexCmp(op, lout, arg); out != nil {
			return out
		}
		if out := l.bitLogic(op, lout, ws); out != nil {
			return out
		}
		if out := l.unitScale(op, arg); out != nil {
			return out
		}
		args := make([][]value.Value, len(op.Args))
		for i := range op.Args {
			args[i] = arg(i)
		}
		poly := l.exp2PolyLanes(op)
		out := make([]value.Value, n)
		for r := range out {
			xs := make([]value.Value, len(args))
			for i := range args {
				xs[i] = args[i][r]
			}
			if r%Exp2PolyMax < poly {
				out[r] = l.exp2Poly(xs[0])
				continue
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
	Fail("%s: codegen does not support op %s", op.Pos, k)
	return nil
}

func repeat(v value.Value, n int) []value.Value {
	out := make([]value.Value, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// ---- small helpers ----

// ConstI32 and ci64 are integer constants.
func ConstI32(x int64) *constant.Int { return constant.NewInt(types.I32, x) }
func ci64(x int64) *constant.Int     { return constant.NewInt(types.I64, x) }

// ConstI64 is an i64 constant.
func ConstI64(x int64) *constant.Int { return ci64(x) }
