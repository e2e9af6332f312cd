package blockmask

// The analytic builder's compiler: the mask's scalar tile IR, after the
// mask-analysis pipeline, to a program of interval/affine instructions,
// split by what each instruction depends on.

import "github.com/fac-compiler/fac/tir"

type opcode uint8

const (
	opAff    opcode = iota // dst = range of form a over the rectangle
	opCmpAff               // dst = a pred b, both affine: exact on their difference
	opAdd
	opSub
	opMul
	opDiv
	opRem
	opMin
	opMax
	opNeg
	opAbs
	opIAnd // bitwise, i32
	opIOr
	opIXor
	opINot
	opBAnd // i1
	opBOr
	opBXor
	opBNot
	opCmp
	opSelect
	opLoad // dst = aux tensor aux at index x, where mask y holds (-1: always), else z (-1: none)
)

var predByName = map[string]uint8{"eq": predEQ, "ne": predNE, "lt": predLT, "le": predLE, "gt": predGT, "ge": predGE}

type instr struct {
	op        opcode
	pred      uint8
	safe      bool // affine forms cannot leave i32 anywhere in [0,SeqQ)×[0,SeqK)
	dst, x, y int32
	z         int32
	aux       int32 // opLoad: which aux tensor
	a, b      affine
	d         affine // a - b, for opCmpAff
}

// vinfo is what compile knows of an SSA value.
type vinfo struct {
	isAff bool   // an i32 affine form (constants included)
	aff   affine //
	slot  int32  // its slot, or -1 until materialized
	ptr   bool   // a pointer into aux tensor aux, at element slot off (-1: the start)
	aux   int32
	off   int32
}

type compiler struct {
	e          *evaluator
	vals       map[*tir.Value]*vinfo
	seqQ, seqK int64
	aux        []*auxTable // the aux tensors' data, when bound (else loads are refused)
}

// compile turns the mask function (scalar positions, after the pipeline)
// into an evaluator, or explains why it cannot. aux, when not nil, holds
// the data of each aux tensor (by position): loads from them are bounded by
// the data's range over the index interval (see auxTable).
func compile(f *tir.Func, seqQ, seqK int, aux []*auxTable) (*evaluator, error) {
	c := &compiler{e: &evaluator{bSlot: -1, hSlot: -1, aux: aux}, vals: map[*tir.Value]*vinfo{}, seqQ: int64(seqQ), seqK: int64(seqK), aux: aux}
	for i, p := range f.Params {
		if i >= numStdParams {
			// An aux tensor's pointer, when its data is bound (its length
			// is a constant by then); else a load of it is refused below.
			if j := i - numStdParams; j%2 == 0 && j/2 < len(aux) && aux[j/2] != nil {
				c.vals[p] = &vinfo{ptr: true, aux: int32(j / 2), off: -1, slot: -1}
			}
			continue
		}
		switch i {
		case paramQ:
			c.vals[p] = &vinfo{isAff: true, aff: affine{q: 1}, slot: -1}
		case paramKV:
			c.vals[p] = &vinfo{isAff: true, aff: affine{k: 1}, slot: -1}
		case paramSeqQ:
			c.vals[p] = &vinfo{isAff: true, aff: affine{c: int64(seqQ)}, slot: -1}
		case paramSeqK:
			c.vals[p] = &vinfo{isAff: true, aff: affine{c: int64(seqK)}, slot: -1}
		case paramB:
			c.e.bSlot = c.newSlot(ival{})
			c.vals[p] = &vinfo{slot: c.e.bSlot}
		case paramH:
			c.e.hSlot = c.newSlot(ival{})
			c.vals[p] = &vinfo{slot: c.e.hSlot}
		}
	}
	for _, op := range f.Body.Ops {
		if err := c.op(op); err != nil {
			return nil, err
		}
	}
	c.e.split()
	return c.e, nil
}

// Dependencies of a slot on the rectangle.
const (
	depQ uint8 = 1 << iota
	depK
)

func (a affine) deps() uint8 {
	var d uint8
	if a.q != 0 {
		d |= depQ
	}
	if a.k != 0 {
		d |= depK
	}
	return d
}

// split sorts the code by dependency (see evaluator).
func (e *evaluator) split() {
	deps := make([]uint8, len(e.slots))
	kRead := make([]bool, len(e.slots))
	for _, in := range e.code {
		var d uint8
		switch in.op {
		case opAff:
			d = in.a.deps()
		case opCmpAff:
			d = in.a.deps() | in.b.deps()
		default:
			for _, a := range in.operands() {
				d |= deps[a]
			}
		}
		deps[in.dst] = d
		switch d {
		case 0:
			e.constCode = append(e.constCode, in)
		case depQ:
			e.qCode = append(e.qCode, in)
		case depK:
			e.kCode = append(e.kCode, in)
		default:
			e.qkCode = append(e.qkCode, in)
			for _, a := range in.operands() {
				kRead[a] = kRead[a] || deps[a] == depK
			}
		}
	}
	kRead[e.result] = kRead[e.result] || deps[e.result] == depK
	for sl, r := range kRead {
		if r {
			e.kOut = append(e.kOut, int32(sl))
		}
	}
}

// operands lists the slots an instruction reads.
func (in *instr) operands() []int32 {
	switch in.op {
	case opAff, opCmpAff:
		return nil
	case opNeg, opAbs, opINot, opBNot:
		return []int32{in.x}
	case opSelect:
		return []int32{in.x, in.y, in.z}
	case opLoad:
		ops := []int32{in.x}
		if in.y >= 0 {
			ops = append(ops, in.y, in.z)
		}
		return ops
	}
	return []int32{in.x, in.y}
}

// memOp compiles addptr and load of a bound aux tensor: a pointer is the
// tensor and an element index; a load is bounded by the data.
func (c *compiler) memOp(op *tir.Op) error {
	refuse := func() error {
		return notAnalyzable("it reads memory (%s): its blocks depend on data", describeOp(op))
	}
	if c.aux == nil || len(op.Results) != 1 || len(op.Args) == 0 {
		return refuse()
	}
	base := c.vals[op.Args[0]]
	if base == nil || !base.ptr {
		return refuse()
	}
	rt := op.Result().Type
	if op.Kind == tir.OpAddPtr {
		if base.off >= 0 || len(op.Args) != 2 || !rt.IsScalar() {
			return notAnalyzable("unsupported pointer arithmetic (%s)", describeOp(op))
		}
		idx := c.vals[op.Args[1]]
		if idx == nil || idx.ptr || op.Args[1].Type.Elem != tir.I32 {
			return notAnalyzable("unsupported pointer offset (%s)", describeOp(op))
		}
		c.def(op, &vinfo{ptr: true, aux: base.aux, off: c.slot(op.Args[1]), slot: -1})
		return nil
	}
	if !rt.IsScalar() || rt.Ptr || (rt.Elem != tir.I32 && rt.Elem != tir.I1) {
		return notAnalyzable("it loads %s values (%s); only i32 and bool are bounded", rt, describeOp(op))
	}
	if len(op.Args) != 1 && len(op.Args) != 3 {
		return notAnalyzable("unsupported load (%s)", describeOp(op))
	}
	in := instr{op: opLoad, aux: base.aux, x: base.off, y: -1, z: -1}
	if in.x < 0 { // the first element
		in.x = c.newSlot(ival{})
	}
	if len(op.Args) == 3 {
		for _, a := range op.Args[1:] {
			if v := c.vals[a]; v == nil || v.ptr {
				return notAnalyzable("operand of %s is not bounded", describeOp(op))
			}
		}
		in.y, in.z = c.slot(op.Args[1]), c.slot(op.Args[2])
	}
	c.emit(op, in)
	return nil
}

func (c *compiler) newSlot(v ival) int32 {
	c.e.slots = append(c.e.slots, v)
	return int32(len(c.e.slots) - 1)
}

// slot materializes v into a slot.
func (c *compiler) slot(v *tir.Value) int32 {
	vi := c.vals[v]
	if vi.slot >= 0 {
		return vi.slot
	}
	a := vi.aff
	if a.q == 0 && a.k == 0 {
		vi.slot = c.newSlot(ival{a.c, a.c})
		return vi.slot
	}
	vi.slot = c.newSlot(ival{})
	c.e.code = append(c.e.code, instr{op: opAff, dst: vi.slot, a: a, safe: c.safe(a)})
	return vi.slot
}

// safe reports whether form a stays inside i32 over all positions.
func (c *compiler) safe(a affine) bool {
	r := affRange(a, rect{0, c.seqQ - 1, 0, c.seqK - 1})
	return r.lo >= minI32 && r.hi <= maxI32
}

func (c *compiler) def(op *tir.Op, vi *vinfo) { c.vals[op.Result()] = vi }

func (c *compiler) emit(op *tir.Op, in instr) {
	in.dst = c.newSlot(ival{})
	c.e.code = append(c.e.code, in)
	c.def(op, &vinfo{slot: in.dst})
}

func (c *compiler) op(op *tir.Op) error {
	if op.Kind == tir.OpReturn {
		if len(op.Args) != 1 {
			return notAnalyzable("mask returns %d values", len(op.Args))
		}
		c.e.result = c.slot(op.Args[0])
		return nil
	}
	switch op.Kind {
	case tir.OpLoad, tir.OpAddPtr:
		return c.memOp(op)
	case tir.OpFor, tir.OpIf:
		return notAnalyzable("it has run-time control flow (%s) left after folding", describeOp(op))
	}
	if len(op.Results) != 1 || len(op.Regions) != 0 {
		return notAnalyzable("unsupported op %s", describeOp(op))
	}
	rt := op.Result().Type
	if !rt.IsScalar() || rt.Ptr || (rt.Elem != tir.I32 && rt.Elem != tir.I1) {
		return notAnalyzable("it computes %s values (%s); only i32 and bool are bounded", rt, describeOp(op))
	}
	for _, a := range op.Args {
		if c.vals[a] == nil || c.vals[a].ptr {
			return notAnalyzable("operand of %s is not bounded", describeOp(op))
		}
	}
	isBool := rt.Elem == tir.I1
	args := op.Args
	aff := func(i int) (affine, bool) {
		vi := c.vals[args[i]]
		return vi.aff, vi.isAff
	}
	switch op.Kind {
	case tir.OpConst:
		switch v := op.Attr("value").(type) {
		case int64:
			if isBool {
				break
			}
			c.def(op, &vinfo{isAff: true, aff: affine{c: wrap(v)}, slot: -1})
			return nil
		case bool:
			if !isBool {
				break
			}
			b := int64(0)
			if v {
				b = 1
			}
			c.def(op, &vinfo{slot: c.newSlot(ival{b, b})})
			return nil
		}
		return notAnalyzable("unsupported constant %s", describeOp(op))
	case tir.OpAdd, tir.OpSub, tir.OpMul:
		if isBool {
			return notAnalyzable("arithmetic on bools (%s)", describeOp(op))
		}
		x, xa := aff(0)
		y, ya := aff(1)
		if xa && ya {
			switch {
			case op.Kind == tir.OpAdd:
				c.def(op, &vinfo{isAff: true, aff: affine{wrap(x.q + y.q), wrap(x.k + y.k), wrap(x.c + y.c)}, slot: -1})
				return nil
			case op.Kind == tir.OpSub:
				c.def(op, &vinfo{isAff: true, aff: affine{wrap(x.q - y.q), wrap(x.k - y.k), wrap(x.c - y.c)}, slot: -1})
				return nil
			case x.q == 0 && x.k == 0:
				c.def(op, &vinfo{isAff: true, aff: affine{wrap(x.c * y.q), wrap(x.c * y.k), wrap(x.c * y.c)}, slot: -1})
				return nil
			case y.q == 0 && y.k == 0:
				c.def(op, &vinfo{isAff: true, aff: affine{wrap(y.c * x.q), wrap(y.c * x.k), wrap(y.c * x.c)}, slot: -1})
				return nil
			}
		}
		k := map[tir.Kind]opcode{tir.OpAdd: opAdd, tir.OpSub: opSub, tir.OpMul: opMul}[op.Kind]
		c.emit(op, instr{op: k, x: c.slot(args[0]), y: c.slot(args[1])})
		return nil
	case tir.OpNeg:
		if isBool {
			break
		}
		if x, ok := aff(0); ok {
			c.def(op, &vinfo{isAff: true, aff: affine{wrap(-x.q), wrap(-x.k), wrap(-x.c)}, slot: -1})
			return nil
		}
		c.emit(op, instr{op: opNeg, x: c.slot(args[0])})
		return nil
	case tir.OpDiv, tir.OpRem, tir.OpMin, tir.OpMax:
		if isBool {
			break
		}
		k := map[tir.Kind]opcode{tir.OpDiv: opDiv, tir.OpRem: opRem, tir.OpMin: opMin, tir.OpMax: opMax}[op.Kind]
		c.emit(op, instr{op: k, x: c.slot(args[0]), y: c.slot(args[1])})
		return nil
	case tir.OpAbs:
		if isBool {
			break
		}
		c.emit(op, instr{op: opAbs, x: c.slot(args[0])})
		return nil
	case tir.OpAnd, tir.OpOr, tir.OpXor:
		k := map[tir.Kind]opcode{tir.OpAnd: opIAnd, tir.OpOr: opIOr, tir.OpXor: opIXor}[op.Kind]
		if isBool {
			k = map[tir.Kind]opcode{tir.OpAnd: opBAnd, tir.OpOr: opBOr, tir.OpXor: opBXor}[op.Kind]
		}
		c.emit(op, instr{op: k, x: c.slot(args[0]), y: c.slot(args[1])})
		return nil
	case tir.OpNot:
		k := opINot
		if isBool {
			k = opBNot
		}
		c.emit(op, instr{op: k, x: c.slot(args[0])})
		return nil
	case tir.OpCmp:
		at := args[0].Type
		if !at.IsScalar() || at.Ptr || (at.Elem != tir.I32 && at.Elem != tir.I1) {
			return notAnalyzable("it compares %s values (%s)", at, describeOp(op))
		}
		p, ok := predByName[op.IdentAttr("pred")]
		if !ok {
			return notAnalyzable("unknown predicate in %s", describeOp(op))
		}
		x, xa := aff(0)
		y, ya := aff(1)
		if xa && ya {
			d := affine{x.q - y.q, x.k - y.k, x.c - y.c}
			c.emit(op, instr{op: opCmpAff, pred: p, a: x, b: y, d: d, safe: c.safe(x) && c.safe(y)})
			return nil
		}
		c.emit(op, instr{op: opCmp, pred: p, x: c.slot(args[0]), y: c.slot(args[1])})
		return nil
	case tir.OpSelect:
		c.emit(op, instr{op: opSelect, x: c.slot(args[0]), y: c.slot(args[1]), z: c.slot(args[2])})
		return nil
	case tir.OpCast:
		from := args[0].Type.Elem
		if (from == tir.I1 || from == tir.I32) && rt.Elem == tir.I32 || from == tir.I1 && isBool {
			vi := *c.vals[args[0]]
			c.def(op, &vi) // i1 -> i32 is 0/1: the same interval
			return nil
		}
		return notAnalyzable("it converts %s to %s (%s)", from, rt.Elem, describeOp(op))
	}
	return notAnalyzable("unsupported op %s", describeOp(op))
}
