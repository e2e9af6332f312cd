package core

import (
	"fmt"
	"maps"
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

func (em *Emitter) lowerKernel() {
	em.mod.TargetTriple = "nvptx64-nvidia-cuda"
	var params []*ir.Param
	for _, p := range em.f.Params {
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
		em.params = append(em.params, Param{Name: p.Name, Type: t, Kind: kind})
	}
	params = append(params, em.lowerExtraParams()...)
	em.fn = em.mod.NewFunc(sanitize(em.f.Name), types.Void, params...)
	em.fn.CallingConv = enum.CallingConvPTXKernel
	em.entry = em.fn.NewBlock("entry")
	body := em.newBlock("body")
	em.b = em.entry
	em.checkArrivals()
	em.tid = em.Call("llvm.nvvm.read.ptx.sreg.tid.x", types.I32)
	pt, _ := em.target.(ProgramTarget)
	if pt != nil {
		em.tid = pt.EntryThread(em.l, em.tid)
	} else if g, _ := em.f.Attr("consumer_groups").(int64); g > 1 {
		Fail("consumer_groups = %d: the groups need a producer warpgroup (warp_specialize on sm_90a with TMA copies)", g)
	}
	em.lane = em.entry.NewAnd(em.tid, ConstI32(31))
	em.warp = em.entry.NewLShr(em.tid, ConstI32(5))
	em.b = body
	for i, p := range em.f.Params {
		var v value.Value = params[i]
		switch t := p.Type; {
		case t.Ptr:
		case t.Elem == tir.I1:
			v = em.b.NewICmp(enum.IPredNE, v, ConstI32(0))
		case t.Elem == tir.F16 || t.Elem == tir.BF16:
			v = em.fromF32(v, t.Elem)
		}
		em.put(p, scalarL, []value.Value{v})
	}
	if t, ok := em.target.(PrologueTarget); ok {
		t.Prologue(em.l)
	}
	if pt != nil {
		pt.Start(em.l)
	}
	em.lowerBlock(em.f.Body)
	if em.bulkUsed {
		// Shared memory must outlive the bulk reductions that read it.
		em.asm(types.Void, "cp.async.bulk.wait_group 0;", "~{memory}", true)
	} else if em.bulkStored {
		// Shared memory must outlive the tensor stores' reads of it.
		em.asm(types.Void, "cp.async.bulk.wait_group.read 0;", "~{memory}", true)
	}
	em.fusePhiPacks()
	if pt != nil {
		pt.Finish(em.l)
	}
	em.b.NewRet(nil)
	em.entry.NewBr(body)
}

// CTAsPerSMArg is the schedule argument that asks ptxas to fit that many
// CTAs on a multiprocessor (1 to MaxCTAsPerSM).
const CTAsPerSMArg = "ctas_per_sm"

// MaxCTAsPerSM is the most CTAs a multiprocessor holds (sm_80 to sm_90).
const MaxCTAsPerSM = 32

func (em *Emitter) text() string {
	var b strings.Builder
	b.WriteString(em.mod.String())
	fn := fmt.Sprintf("%s %s", em.fn.Type(), em.fn.Ident())
	notes := []string{fmt.Sprintf("!{%s, !\"maxntidx\", i32 %d}", fn, em.l.Threads())}
	gc := em.gridConstants()
	if gc != "" {
		notes = append(notes, "") // filled below: it names the node after the list
	}
	if pt, ok := em.target.(ProgramTarget); ok && pt.OneCTA(em.l) {
		// setmaxnreg needs the registers per thread at entry to be known:
		// the most threads and one CTA per multiprocessor fix them.
		notes = append(notes, fmt.Sprintf("!{%s, !\"minctasm\", i32 1}", fn))
	} else if n := em.l.CTAsPerSM(); n > 1 {
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

func (em *Emitter) newBlock(name string) *ir.Block {
	em.nblocks++
	return em.fn.NewBlock(fmt.Sprintf("%s%s%d", em.blockPrefix, name, em.nblocks))
}

// NewBlock is a new basic block of the kernel, named after name (and the
// block prefix), not yet the current one.
func (em *Emitter) NewBlock(name string) *ir.Block { return em.newBlock(name) }

// SetBlock makes b the current insertion block.
func (em *Emitter) SetBlock(b *ir.Block) { em.b = b }

// SetBlockPrefix starts the names of the blocks made from now on with p
// ("producer.": a producer warp's blocks read as such; "" again after).
func (em *Emitter) SetBlockPrefix(p string) { em.blockPrefix = p }

// ---- value environment ----

func (em *Emitter) put(v *tir.Value, lay Layout, regs []value.Value) {
	m := em.env[v]
	if m == nil {
		m = map[string][]value.Value{}
		em.env[v] = m
	}
	m[lay.String()] = regs
}

// Bind makes x the register of scalar v (a value a target's program
// computes itself: a loop's induction variable, a value read ahead).
func (em *Emitter) Bind(v *tir.Value, x value.Value) { em.put(v, scalarL, []value.Value{x}) }

// Scope runs lower with the values defs forgotten, so that it lowers their
// ops again (for another iteration of a loop: a pipelined loop's slice),
// and restores them after.
func (em *Emitter) Scope(defs []*tir.Value, lower func()) {
	saved := make([]map[string][]value.Value, len(defs))
	for i, v := range defs {
		saved[i] = em.env[v]
		delete(em.env, v)
	}
	lower()
	for i, v := range defs {
		if saved[i] == nil {
			delete(em.env, v)
		} else {
			em.env[v] = saved[i]
		}
	}
}

// Isolated runs lower and forgets, after, the values it lowered that were
// not lowered before (another program's: a producer warp's).
func (em *Emitter) Isolated(lower func()) {
	saved := maps.Clone(em.env)
	defer func() { em.env = saved }()
	lower()
}

// Get returns v's registers in layout lay (converting it there, with a
// late conversion, if the assignment did not announce that layout).
func (em *Emitter) Get(v *tir.Value, lay Layout) []value.Value {
	if v.Type.IsScalar() {
		lay = scalarL
	}
	if regs, ok := em.env[v][lay.String()]; ok {
		return regs
	}
	in := em.lay.info[v]
	if in != nil && !in.flex {
		if src, ok := em.env[v][in.lay.String()]; ok {
			// Not announced by the demand pass: convert here (correct, but
			// not hoisted to the definition). Tests check this never runs.
			lateConversions.Add(1)
			return em.convert(src, in.lay, lay, v.Type)
		}
	}
	Fail("internal error: value of type %s not available in layout %s", v.Type, lay)
	return nil
}

// ---- blocks and ops ----

// lowerBlock lowers b's ops and returns its terminator (or nil).
func (em *Emitter) lowerBlock(b *tir.Block) *tir.Op {
	defer em.awaitBlockEnd()
	defer em.runDeferred(em.depth)
	outer, outerIdx := em.curOps, em.curIdx
	defer func() { em.curOps, em.curIdx = outer, outerIdx }()
	for i, op := range b.Ops {
		if op.Kind.IsTerminator() {
			return op
		}
		em.curOps, em.curIdx = b.Ops, i
		em.lowerOp(op)
		if t, ok := em.target.(ScheduleTarget); ok {
			t.AfterOp(em.l, op)
		}
	}
	return nil
}

// Neighbor returns the op d places from the one being lowered in its block
// (d = -1: the one before), or nil past either end or at the terminator.
// Targets use it to group adjacent ops (sm90: one pingpong turn for the
// dots issued back to back).
func (em *Emitter) Neighbor(d int) *tir.Op {
	i := em.curIdx + d
	if em.curOps == nil || i < 0 || i >= len(em.curOps) || em.curOps[i].Kind.IsTerminator() {
		return nil
	}
	return em.curOps[i]
}

// LowerOp lowers op as the walk of its block would (a target's program
// lowers ops again for other iterations, or for another program).
func (em *Emitter) LowerOp(op *tir.Op) { em.lowerOp(op) }

func (em *Emitter) lowerOp(op *tir.Op) {
	sched, _ := em.target.(ScheduleTarget)
	if sched != nil {
		sched.BeforeOp(em.l, op)
	}
	em.awaitUses(op)
	if sched != nil && sched.OwnsOp(em.l, op) {
		return
	}
	switch op.Kind {
	case tir.OpFor:
		em.lowerFor(op)
		return
	case tir.OpIf:
		em.runDeferred(em.depth)
		em.lowerIf(op)
		return
	case tir.OpStore:
		em.lowerStore(op)
		return
	case tir.OpAtomicAdd:
		em.lowerAtomicAdd(op)
		return
	case tir.OpPrefetch:
		em.lowerPrefetch(op)
		return
	case tir.OpLastArrival:
		em.lowerLastArrival(op)
		return
	case tir.OpLoad:
		if st := em.plan.staged[op]; st != nil {
			em.lowerStaged(op, st)
			return
		}
	case tir.OpTrans:
		if at := em.smemTiles[op.Args[0]]; at != nil {
			em.smemTiles[op.Result()] = at // a transposed view of the staged tile
			return
		}
	}
	em.lowerValue(op)
}

// lowerValue lowers op's result in its layout, or in each layout its uses
// want when it has none of its own.
func (em *Emitter) lowerValue(op *tir.Op) {
	v := op.Result()
	in := em.lay.get(v)
	if in.flex {
		for _, lay := range in.demands() {
			em.put(v, lay, em.lowerIn(op, lay))
		}
		return
	}
	em.put(v, in.lay, em.lowerIn(op, in.lay))
	em.convertDemands(v)
}

// LowerLoadVia lowers load op in every layout its value takes, as the walk
// would, except that read gives each layout's registers, from the layout
// of the pointers it would load from: a target that copied the elements
// elsewhere first (sm90's vectors riding with a TMA tile) reads them
// there.
func (em *Emitter) LowerLoadVia(op *tir.Op, read func(ptrs Layout) []value.Value) {
	em.loadVia = read
	defer func() { em.loadVia = nil }()
	em.lowerValue(op)
}

// convertDemands materializes an anchored value in every extra layout its
// consumers want, right after its definition.
func (em *Emitter) convertDemands(v *tir.Value) {
	in := em.lay.get(v)
	if in.flex {
		return
	}
	if len(in.demands()) > 0 {
		em.await(v)
	}
	src := em.env[v][in.lay.String()]
	for _, lay := range in.demands() {
		em.put(v, lay, em.convert(src, in.lay, lay, v.Type))
	}
}

// lowerIn produces op's result in layout lay.
func (em *Emitter) lowerIn(op *tir.Op, lay Layout) []value.Value {
	ws := em.lay.operandWants(op, lay)
	arg := func(i int) []value.Value { return em.Get(op.Args[i], ws[i]) }
	rt := op.Result().Type
	lout := em.Lin(lay, rt.Shape)
	n := lout.NumRegs()
	k := op.Kind
	switch {
	case k == tir.OpConst:
		c := em.constant(rt, op.Attr("value"))
		return repeat(c, n)
	case k == tir.OpSplat:
		return repeat(arg(0)[0], n)
	case k == tir.OpArange:
		base := em.baseCoords(lout)[0]
		start := op.IntAttr("start")
		out := make([]value.Value, n)
		for r := range out {
			out[r] = em.AddOff(base, int64(lout.RegOffset(r)[0])+start)
		}
		return out
	case k == tir.OpProgramID:
		axis := op.IntAttr("axis")
		if axis < 0 || axis > 2 {
			Fail("%s: program_id axis %d", op.Pos, axis)
		}
		return []value.Value{em.Call("llvm.nvvm.read.ptx.sreg.ctaid."+"xyz"[axis:axis+1], types.I32)}
	case k == tir.OpNumPrograms:
		axis := op.IntAttr("axis")
		if axis < 0 || axis > 2 {
			Fail("%s: num_programs axis %d", op.Pos, axis)
		}
		return []value.Value{em.Call("llvm.nvvm.read.ptx.sreg.nctaid."+"xyz"[axis:axis+1], types.I32)}
	case k == tir.OpGroupID:
		if t, ok := em.target.(ProgramTarget); ok {
			return []value.Value{t.GroupID(em.l)}
		}
		return []value.Value{ConstI32(0)}
	case k == tir.OpNumSMs:
		return []value.Value{em.Call("llvm.nvvm.read.ptx.sreg.nsmid", types.I32)}
	case k.IsElementwise():
		if out := em.indexCmp(op, lout, arg); out != nil {
			return out
		}
		if out := em.bitLogic(op, lout, ws); out != nil {
			return out
		}
		if out := em.unitScale(op, arg); out != nil {
			return out
		}
		args := make([][]value.Value, len(op.Args))
		for i := range op.Args {
			args[i] = arg(i)
		}
		poly := em.exp2PolyLanes(op)
		out := make([]value.Value, n)
		for r := range out {
			xs := make([]value.Value, len(args))
			for i := range args {
				xs[i] = args[i][r]
			}
			if r%Exp2PolyMax < poly {
				out[r] = em.exp2Poly(xs[0])
				continue
			}
			out[r] = em.elementwise(op, xs)
		}
		return out
	case k == tir.OpBroadcast, k == tir.OpReshape, k == tir.OpTrans:
		return em.shapeOp(op, ws[0], lay)
	case k == tir.OpLoad:
		return em.lowerLoad(op, lay, ws)
	case k == tir.OpDot:
		return em.lowerDot(op, lay, ws)
	case k == tir.OpReduce:
		return em.lowerReduce(op, lay, ws)
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
