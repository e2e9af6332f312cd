package blockmask

import (
	"errors"
	"fmt"
	"math"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/tir"
)

// ErrNotAnalyzable is returned (wrapped, with the reason) by Analytic and
// NewAnalyzer when they cannot classify every block of a mask exactly:
// the mask reads aux tensors, computes in floats, loops, may divide by zero,
// or is too intricate for interval and affine bounds. Callers then fall back
// to an evaluating builder (EvaluateCPU); Build does so itself.
var ErrNotAnalyzable = errors.New("blockmask: cannot bound the mask analytically")

func notAnalyzable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotAnalyzable, fmt.Sprintf(format, args...))
}

// Analytic classifies every block by abstract interpretation of the mask's
// tile IR over the block's rectangle of positions, without evaluating the
// mask element by element. It is exact or it declines: it returns an error
// wrapping ErrNotAnalyzable when some block cannot be decided.
func Analytic(prog *lang.Program, inst *lang.ModInst, sh Shape, opts Options) (*BlockMask, error) {
	a, err := NewAnalyzer(prog, inst, sh)
	if err != nil {
		return nil, err
	}
	g, err := a.Grid(opts)
	if err != nil {
		return nil, err
	}
	return FromClasses(g)
}

// Analyzer is a mask compiled for analytic classification: one small
// program of interval/affine instructions per distinct (b, h) (just one when
// the mask reads neither). It is not safe for concurrent use.
type Analyzer struct {
	B, H       int // of the block masks it makes: 1 where the mask ignores b (h)
	SeqQ, SeqK int
	progs      []*evaluator // [B*H]
	mask       string
	// Budget bounds the abstract evaluations spent refining one undecided
	// block (bisecting it until each part is decided or both a true and a
	// false position are found); past it the analyzer declines.
	Budget int
}

// NewAnalyzer compiles inst for sh. It fails with ErrNotAnalyzable (wrapped)
// when the mask uses operations the analysis does not bound.
func NewAnalyzer(prog *lang.Program, inst *lang.ModInst, sh Shape) (*Analyzer, error) {
	sh = sh.withDefaults()
	if err := checkGeometry(sh.B, sh.H, sh.SeqQ, sh.SeqK, 1, 1); err != nil {
		return nil, err
	}
	consts := map[int]int64{paramSeqQ: int64(sh.SeqQ), paramSeqK: int64(sh.SeqK)}
	_, f, err := modFunc(prog, inst, 0, 0, consts)
	if err != nil {
		return nil, err
	}
	for i, a := range inst.AuxParams() {
		if hasUses(f, f.Params[numStdParams+2*i]) || hasUses(f, f.Params[numStdParams+2*i+1]) {
			return nil, notAnalyzable("mask %s reads aux tensor %s: its blocks depend on the data", inst, a.Name)
		}
	}
	usesB, usesH := hasUses(f, f.Params[paramB]), hasUses(f, f.Params[paramH])
	a := &Analyzer{B: 1, H: 1, SeqQ: sh.SeqQ, SeqK: sh.SeqK, Budget: 1024, mask: inst.String()}
	if usesB {
		a.B = sh.B
	}
	if usesH {
		a.H = sh.H
	}
	if !usesB && !usesH {
		e, err := compile(f, sh.SeqQ, sh.SeqK)
		if err != nil {
			return nil, fmt.Errorf("%w (mask %s)", err, inst)
		}
		a.progs = []*evaluator{e}
		return a, nil
	}
	// Specialize per (b, h): with b and h constants, products like h * q_idx
	// become affine and conditions on h fold.
	for b := range a.B {
		for h := range a.H {
			c := map[int]int64{paramSeqQ: int64(sh.SeqQ), paramSeqK: int64(sh.SeqK)}
			if usesB {
				c[paramB] = int64(b)
			}
			if usesH {
				c[paramH] = int64(h)
			}
			_, f, err := modFunc(prog, inst, 0, 0, c)
			if err != nil {
				return nil, err
			}
			e, err := compile(f, sh.SeqQ, sh.SeqK)
			if err != nil {
				return nil, fmt.Errorf("%w (mask %s)", err, inst)
			}
			e.b, e.h = int64(b), int64(h)
			a.progs = append(a.progs, e)
		}
	}
	return a, nil
}

// Grid classifies every block for the given block sizes.
func (a *Analyzer) Grid(opts Options) (*Grid, error) {
	opts = opts.withDefaults()
	g, err := NewGrid(a.B, a.H, a.SeqQ, a.SeqK, opts.BlockQ, opts.BlockK)
	if err != nil {
		return nil, err
	}
	if err := a.Fill(g); err != nil {
		return nil, err
	}
	return g, nil
}

// Fill classifies every block of g, whose geometry must match the
// analyzer's. It allocates nothing.
func (a *Analyzer) Fill(g *Grid) error {
	if g.B != a.B || g.H != a.H || g.SeqQ != a.SeqQ || g.SeqK != a.SeqK {
		return fmt.Errorf("blockmask: grid is B=%d H=%d %d×%d, analyzer B=%d H=%d %d×%d", g.B, g.H, g.SeqQ, g.SeqK, a.B, a.H, a.SeqQ, a.SeqK)
	}
	if err := checkGeometry(g.B, g.H, g.SeqQ, g.SeqK, g.BlockQ, g.BlockK); err != nil {
		return err
	}
	if g.NumQ != cdiv(g.SeqQ, g.BlockQ) || g.NumK != cdiv(g.SeqK, g.BlockK) || len(g.Classes) != g.B*g.H*g.NumQ*g.NumK {
		return fmt.Errorf("blockmask: grid of %d×%d blocks with %d classes does not fit SeqQ=%d SeqK=%d in %d×%d blocks (use NewGrid)",
			g.NumQ, g.NumK, len(g.Classes), g.SeqQ, g.SeqK, g.BlockQ, g.BlockK)
	}
	for m, e := range a.progs {
		e.budget = a.Budget
		// All refinements together may cost about an eighth of evaluating
		// every element: past that, an evaluating builder is as fast.
		e.total = max(1<<12, int64(a.SeqQ)*int64(a.SeqK)/8)
		if err := e.fill(g, g.Classes[m*g.NumQ*g.NumK:][:g.NumQ*g.NumK]); err != nil {
			return fmt.Errorf("%w (mask %s)", err, a.mask)
		}
	}
	return nil
}

// fill classifies the blocks of one (b, h) mask into out ([NumQ, NumK]).
//
// Each block row is classified top-down over a binary tree of column spans:
// a span whose rectangle the bounds decide is filled at once, an undecided
// one is split, and an undecided single block is refined. The kv-only
// values of a span are the hulls of its columns' (sound for the union), kept
// per tree level. A row of a causal or windowed mask thus costs a few
// evaluations per class boundary instead of one per block.
func (e *evaluator) fill(g *Grid, out []Class) error {
	e.fail = nil
	s := e.slots
	e.setBH()
	e.run(e.constCode, rect{})
	if e.fail != nil { // values of no position are single values: a real division by zero
		return notAnalyzable("it divides by zero (in a value that depends on neither q_idx nor kv_idx)")
	}
	nk, nout := g.NumK, len(e.kOut)
	// Tree levels: level l has ceil(nk / 2^l) nodes; the top has one.
	levels := 1
	for (1 << (levels - 1)) < nk {
		levels++
	}
	e.levelOff = e.levelOff[:0]
	nodes := 0
	for l := range levels {
		e.levelOff = append(e.levelOff, nodes)
		nodes += (nk + (1 << l) - 1) >> l
	}
	if cap(e.kTab) < nodes*nout {
		e.kTab = make([]ival, nodes*nout)
	}
	if cap(e.kBad) < nodes {
		e.kBad = make([]bool, nodes)
	}
	kTab, kBad := e.kTab[:nodes*nout], e.kBad[:nodes]
	for kb := range nk {
		k0 := int64(kb * g.BlockK)
		e.fail = nil
		e.run(e.kCode, rect{k0: k0, k1: min(k0+int64(g.BlockK), int64(g.SeqK)) - 1})
		// A column whose kv-only values may divide by zero is not
		// bounded: its spans are refined from scratch.
		kBad[kb] = e.fail != nil
		for i, sl := range e.kOut {
			kTab[kb*nout+i] = s[sl]
		}
	}
	e.fail = nil
	for l := 1; l < levels; l++ {
		prev, cur := e.levelOff[l-1], e.levelOff[l]
		nPrev := (nk + (1 << (l - 1)) - 1) >> (l - 1)
		for j := 0; 2*j < nPrev; j++ {
			bad := kBad[prev+2*j]
			for i := range nout {
				a := kTab[(prev+2*j)*nout+i]
				if 2*j+1 < nPrev {
					b := kTab[(prev+2*j+1)*nout+i]
					a = ival{min(a.lo, b.lo), max(a.hi, b.hi)}
				}
				kTab[(cur+j)*nout+i] = a
			}
			if 2*j+1 < nPrev {
				bad = bad || kBad[prev+2*j+1]
			}
			kBad[cur+j] = bad
		}
	}
	e.grid = g
	for qb := range g.NumQ {
		q0 := int64(qb * g.BlockQ)
		q1 := min(q0+int64(g.BlockQ), int64(g.SeqQ)) - 1
		e.runRow(q0, q1)
		if err := e.span(out[qb*nk:][:nk], q0, q1, levels-1, 0); err != nil {
			e.grid = nil
			return err
		}
	}
	e.grid = nil
	return nil
}

// span classifies node j of tree level l of a block row.
func (e *evaluator) span(row []Class, q0, q1 int64, l, j int) error {
	g, s := e.grid, e.slots
	c0, c1 := j<<l, min((j+1)<<l, len(row))-1
	r := rect{q0, q1, int64(c0 * g.BlockK), min(int64((c1+1)*g.BlockK), int64(g.SeqK)) - 1}
	node := e.levelOff[l] + j
	v, failed := bMaybe, e.kBad[node] || e.rowFailed
	if !failed {
		for i, sl := range e.kOut {
			s[sl] = e.kTab[node*len(e.kOut)+i]
		}
		e.run(e.qkCode, r)
		if e.fail != nil { // the bounds may divide by zero: not decided here
			e.fail, failed = nil, true
		} else {
			v = s[e.result]
		}
	}
	switch {
	case v.lo == 1:
		fillClass(row[c0:c1+1], Full)
		return nil
	case v.hi == 0:
		fillClass(row[c0:c1+1], Empty)
		return nil
	}
	if l > 0 {
		if err := e.span(row, q0, q1, l-1, 2*j); err != nil {
			return err
		}
		if (2*j+1)<<(l-1) < len(row) {
			return e.span(row, q0, q1, l-1, 2*j+1)
		}
		return nil
	}
	c, err := e.refine(r, failed)
	if err != nil {
		return fmt.Errorf("%w (block q=%d kv=%d of b=%d h=%d)", err, int(q0)/g.BlockQ, c0, e.b, e.h)
	}
	row[c0] = c
	// refine ran the whole program on other rectangles: recompute the
	// row's q values.
	e.runRow(q0, q1)
	return nil
}

// runRow computes the q-only values of a block row.
func (e *evaluator) runRow(q0, q1 int64) {
	e.fail = nil
	e.run(e.qCode, rect{q0: q0, q1: q1})
	e.rowFailed, e.fail = e.fail != nil, nil
}

func fillClass(xs []Class, c Class) {
	for i := range xs {
		xs[i] = c
	}
}

// ClassifyRect classifies the rectangle q∈[q0,q1], kv∈[k0,k1] (inclusive)
// of mask (b, h), b and h taken modulo the analyzer's B and H.
func (a *Analyzer) ClassifyRect(b, h, q0, q1, k0, k1 int) (Class, error) {
	if q0 < 0 || k0 < 0 || q1 < q0 || k1 < k0 || q1 >= a.SeqQ || k1 >= a.SeqK {
		return 0, fmt.Errorf("blockmask: rectangle q∈[%d,%d] kv∈[%d,%d] is not inside [0,%d)×[0,%d)", q0, q1, k0, k1, a.SeqQ, a.SeqK)
	}
	e := a.progs[(b%a.B)*a.H+h%a.H]
	e.budget = a.Budget
	e.total = math.MaxInt64
	return e.classify(rect{int64(q0), int64(q1), int64(k0), int64(k1)})
}

// ---- the compiled program ----

// ival is an abstract value: an integer interval [lo, hi] of i32 values, or
// a bool as [0,0] (false), [1,1] (true), [0,1] (unknown).
type ival struct{ lo, hi int64 }

// affine is q*q_idx + k*kv_idx + c, coefficients wrapped to i32: since i32
// add, sub and mul wrap modulo 2^32, the run-time value is the form's value
// wrapped, and equals it exactly wherever the form stays inside i32.
type affine struct{ q, k, c int64 }

type rect struct{ q0, q1, k0, k1 int64 }

func (r rect) point() bool { return r.q0 == r.q1 && r.k0 == r.k1 }

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
)

const (
	predEQ uint8 = iota
	predNE
	predLT
	predLE
	predGT
	predGE
)

var predByName = map[string]uint8{"eq": predEQ, "ne": predNE, "lt": predLT, "le": predLE, "gt": predGT, "ge": predGE}

type instr struct {
	op        opcode
	pred      uint8
	safe      bool // affine forms cannot leave i32 anywhere in [0,SeqQ)×[0,SeqK)
	dst, x, y int32
	z         int32
	a, b      affine
	d         affine // a - b, for opCmpAff
}

// evaluator runs one compiled program over rectangles.
//
// For whole grids the code is also split by what each instruction depends
// on: nothing (constCode, once), q only (qCode, once per block row), kv
// only (kCode, once per block column, results kept in kTab) and both
// (qkCode, once per block). Most masks compare a function of q with a
// function of kv, so a block costs an instruction or two.
type evaluator struct {
	code   []instr
	slots  []ival // constants preset; the rest written before read
	result int32
	bSlot  int32 // -1 unless b (h) survived specialization
	hSlot  int32
	b, h   int64
	fail   error
	budget int   // abstract evaluations per undecided block
	total  int64 // abstract evaluations left for all blocks
	stack  [160]pending

	constCode, qCode, kCode, qkCode []instr
	kOut                            []int32 // slots of kCode that qkCode or the result read
	kTab                            []ival  // per tree node (level by level): len(kOut) hulls; grown on demand
	kBad                            []bool  // per tree node: a column's kv values may divide by zero
	levelOff                        []int   // the first node of each tree level
	grid                            *Grid   // during fill
	rowFailed                       bool    // the row's q-only values may divide by zero
}

const (
	minI32 = math.MinInt32
	maxI32 = math.MaxInt32
)

var fullI32 = ival{minI32, maxI32}

// vinfo is what compile knows of an SSA value.
type vinfo struct {
	isAff bool   // an i32 affine form (constants included)
	aff   affine //
	slot  int32  // its slot, or -1 until materialized
}

type compiler struct {
	e          *evaluator
	vals       map[*tir.Value]*vinfo
	seqQ, seqK int64
}

func wrap(x int64) int64 { return int64(int32(x)) }

// compile turns the mask function (scalar positions, after the pipeline)
// into an evaluator, or explains why it cannot.
func compile(f *tir.Func, seqQ, seqK int) (*evaluator, error) {
	c := &compiler{e: &evaluator{bSlot: -1, hSlot: -1}, vals: map[*tir.Value]*vinfo{}, seqQ: int64(seqQ), seqK: int64(seqK)}
	for i, p := range f.Params {
		if i >= numStdParams {
			break // aux tensors: a load of them is refused below
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
	}
	return []int32{in.x, in.y}
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
		return notAnalyzable("it reads memory (%s): its blocks depend on data", describeOp(op))
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
		if c.vals[a] == nil {
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

// ---- evaluation ----

// affRange is the exact range of form a over r (in int64: with coefficients
// in i32 and positions below 2^30 nothing overflows).
func affRange(a affine, r rect) ival {
	lo, hi := a.c, a.c
	if a.q >= 0 {
		lo += a.q * r.q0
		hi += a.q * r.q1
	} else {
		lo += a.q * r.q1
		hi += a.q * r.q0
	}
	if a.k >= 0 {
		lo += a.k * r.k0
		hi += a.k * r.k1
	} else {
		lo += a.k * r.k1
		hi += a.k * r.k0
	}
	return ival{lo, hi}
}

// norm maps an int64 interval of exact results to the i32 results: a point
// wraps exactly; a range that leaves i32 becomes all of i32.
func norm(lo, hi int64) ival {
	if lo == hi {
		w := wrap(lo)
		return ival{w, w}
	}
	if lo < minI32 || hi > maxI32 {
		return fullI32
	}
	return ival{lo, hi}
}

var (
	bFalse = ival{0, 0}
	bTrue  = ival{1, 1}
	bMaybe = ival{0, 1}
)

func boolOf(t, f bool) ival {
	switch {
	case t:
		return bTrue
	case f:
		return bFalse
	}
	return bMaybe
}

// cmp compares intervals: true if it holds for every pair, false if for none.
func cmp(p uint8, x, y ival) ival {
	switch p {
	case predEQ:
		return boolOf(x.lo == x.hi && y.lo == y.hi && x.lo == y.lo, x.hi < y.lo || y.hi < x.lo)
	case predNE:
		return boolOf(x.hi < y.lo || y.hi < x.lo, x.lo == x.hi && y.lo == y.hi && x.lo == y.lo)
	case predLT:
		return boolOf(x.hi < y.lo, x.lo >= y.hi)
	case predLE:
		return boolOf(x.hi <= y.lo, x.lo > y.hi)
	case predGT:
		return boolOf(x.lo > y.hi, x.hi <= y.lo)
	case predGE:
		return boolOf(x.lo >= y.hi, x.hi < y.lo)
	}
	return bMaybe
}

// cmpZero is cmp(p, d, [0,0]).
func cmpZero(p uint8, d ival) ival {
	switch p {
	case predLT:
		return boolOf(d.hi < 0, d.lo >= 0)
	case predLE:
		return boolOf(d.hi <= 0, d.lo > 0)
	case predGT:
		return boolOf(d.lo > 0, d.hi <= 0)
	case predGE:
		return boolOf(d.lo >= 0, d.hi < 0)
	}
	return cmp(p, d, ival{})
}

var errDivZero = notAnalyzable("it may divide by zero")

func divZeroAt(p rect) error {
	return notAnalyzable("it divides by zero at q_idx=%d, kv_idx=%d", p.q0, p.k0)
}

func (e *evaluator) setBH() {
	if e.bSlot >= 0 {
		e.slots[e.bSlot] = ival{e.b, e.b}
	}
	if e.hSlot >= 0 {
		e.slots[e.hSlot] = ival{e.h, e.h}
	}
}

// eval runs the whole program on r and returns the mask's abstract value.
func (e *evaluator) eval(r rect) ival {
	e.setBH()
	e.run(e.code, r)
	return e.slots[e.result]
}

// run runs code on r; a possible division by zero sets e.fail.
func (e *evaluator) run(code []instr, r rect) {
	s := e.slots
	for i := range code {
		in := &code[i]
		if in.op == opCmpAff && in.safe {
			s[in.dst] = cmpZero(in.pred, affRange(in.d, r))
			continue
		}
		x, y := s[in.x], s[in.y]
		var v ival
		switch in.op {
		case opAff:
			v = affRange(in.a, r)
			if !in.safe {
				v = norm(v.lo, v.hi)
			}
		case opCmpAff:
			if !in.safe {
				ra, rb := affRange(in.a, r), affRange(in.b, r)
				if r.point() || ra.lo < minI32 || ra.hi > maxI32 || rb.lo < minI32 || rb.hi > maxI32 {
					v = cmp(in.pred, norm(ra.lo, ra.hi), norm(rb.lo, rb.hi))
					break
				}
			}
			v = cmpZero(in.pred, affRange(in.d, r))
		case opAdd:
			v = norm(x.lo+y.lo, x.hi+y.hi)
		case opSub:
			v = norm(x.lo-y.hi, x.hi-y.lo)
		case opMul:
			p1, p2, p3, p4 := x.lo*y.lo, x.lo*y.hi, x.hi*y.lo, x.hi*y.hi
			v = norm(min(p1, p2, p3, p4), max(p1, p2, p3, p4))
		case opDiv:
			if y.lo <= 0 && y.hi >= 0 {
				e.fail = errDivZero
				y = ival{1, 1}
			}
			// Truncation is monotone and x/y is monotone in each operand
			// on a box avoiding y = 0: the extremes are at the corners.
			p1, p2, p3, p4 := x.lo/y.lo, x.lo/y.hi, x.hi/y.lo, x.hi/y.hi
			v = norm(min(p1, p2, p3, p4), max(p1, p2, p3, p4))
		case opRem:
			if y.lo <= 0 && y.hi >= 0 {
				e.fail = errDivZero
				y = ival{1, 1}
			}
			v = remRange(x, y)
		case opMin:
			v = ival{min(x.lo, y.lo), min(x.hi, y.hi)}
		case opMax:
			v = ival{max(x.lo, y.lo), max(x.hi, y.hi)}
		case opNeg:
			v = norm(-x.hi, -x.lo)
		case opAbs:
			switch {
			case x.lo >= 0:
				v = x
			case x.hi <= 0:
				v = norm(-x.hi, -x.lo)
			default:
				v = norm(0, max(-x.lo, x.hi))
			}
		case opIAnd, opIOr, opIXor:
			if x.lo != x.hi || y.lo != y.hi {
				v = fullI32
				break
			}
			a, b := int32(x.lo), int32(y.lo)
			w := a & b
			if in.op == opIOr {
				w = a | b
			} else if in.op == opIXor {
				w = a ^ b
			}
			v = ival{int64(w), int64(w)}
		case opINot:
			if x.lo != x.hi {
				v = fullI32
				break
			}
			v = ival{int64(^int32(x.lo)), int64(^int32(x.lo))}
		case opBAnd:
			v = ival{min(x.lo, y.lo), min(x.hi, y.hi)}
		case opBOr:
			v = ival{max(x.lo, y.lo), max(x.hi, y.hi)}
		case opBXor:
			if x.lo != x.hi || y.lo != y.hi {
				v = bMaybe
				break
			}
			v = ival{x.lo ^ y.lo, x.lo ^ y.lo}
		case opBNot:
			v = ival{1 - x.hi, 1 - x.lo}
		case opCmp:
			v = cmp(in.pred, x, y)
		case opSelect:
			switch {
			case x.lo == 1:
				v = y
			case x.hi == 0:
				v = s[in.z]
			default:
				z := s[in.z]
				v = ival{min(y.lo, z.lo), max(y.hi, z.hi)}
			}
		}
		s[in.dst] = v
	}
}

// remRange bounds x % y (truncated, sign of the dividend) for y not
// containing 0.
func remRange(x, y ival) ival {
	if x.lo == x.hi && y.lo == y.hi {
		w := int64(int32(x.lo) % int32(y.lo)) // Go: MinInt32 % -1 == 0, like the interpreter
		return ival{w, w}
	}
	m := max(abs64(y.lo), abs64(y.hi)) // |x % y| <= m-1
	if y.lo == y.hi {
		// One divisor: a run of dividends with one quotient maps in order.
		if x.lo >= 0 && x.lo/m == x.hi/m {
			return ival{x.lo % m, x.hi % m}
		}
		if x.hi <= 0 && x.lo/m == x.hi/m {
			return ival{-((-x.lo) % m), -((-x.hi) % m)}
		}
	}
	switch {
	case x.lo >= 0:
		return ival{0, min(x.hi, m-1)}
	case x.hi <= 0:
		return ival{max(x.lo, -(m - 1)), 0}
	}
	return ival{max(x.lo, -(m - 1)), min(x.hi, m-1)}
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// classify decides a rectangle. The abstract result is sound: true means
// true everywhere, false false everywhere. An unknown result is refined:
// corners first, then bisection (each half evaluated abstractly) until both
// a true and a false part are found (partial) or every part is decided.
func (e *evaluator) classify(r rect) (Class, error) {
	e.fail = nil
	v := e.eval(r)
	failed := e.fail != nil
	if failed {
		v = bMaybe
	}
	if v.lo == 1 {
		return Full, nil
	}
	if v.hi == 0 {
		return Empty, nil
	}
	return e.refine(r, failed)
}

// refine decides a rectangle whose abstract value is unknown. failed says
// the bounds on r may divide by zero: then every part of r must be bounded
// without that (or a position found where the mask divides by zero), even
// after a true and a false position are found, so that a mask the
// evaluating builders would fail on is never classified.
func (e *evaluator) refine(r rect, failed bool) (Class, error) {
	e.fail = nil
	if r.point() {
		v := e.eval(r)
		if e.fail != nil {
			return 0, divZeroAt(r)
		}
		switch v {
		case bTrue:
			return Full, nil
		case bFalse:
			return Empty, nil
		}
		return 0, notAnalyzable("internal error: undecided at a single position")
	}
	var seenT, seenF bool
	for _, p := range [4]rect{{r.q1, r.q1, r.k0, r.k0}, {r.q0, r.q0, r.k1, r.k1}, {r.q0, r.q0, r.k0, r.k0}, {r.q1, r.q1, r.k1, r.k1}} {
		v := e.eval(p)
		if e.fail != nil {
			return 0, divZeroAt(p)
		}
		seenT = seenT || v.lo == 1
		seenF = seenF || v.hi == 0
		if seenT && seenF && !failed {
			return Partial, nil
		}
	}
	stack := e.stack[:0]
	stack = append(stack, pending{r, failed})
	nFailed := 0 // failed rectangles on the stack
	if failed {
		nFailed++
	}
	budget := e.budget
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if p.failed {
			nFailed--
		} else if seenT && seenF {
			continue // only failed parts still need looking at
		}
		r := p.r
		var halves [2]rect
		if r.q1-r.q0 >= r.k1-r.k0 {
			m := r.q0 + (r.q1-r.q0)/2
			halves = [2]rect{{r.q0, m, r.k0, r.k1}, {m + 1, r.q1, r.k0, r.k1}}
		} else {
			m := r.k0 + (r.k1-r.k0)/2
			halves = [2]rect{{r.q0, r.q1, r.k0, m}, {r.q0, r.q1, m + 1, r.k1}}
		}
		for _, h := range halves {
			if budget--; budget < 0 {
				return 0, notAnalyzable("the bounds stay undecided after %d refinements", e.budget)
			}
			if e.total--; e.total < 0 {
				return 0, notAnalyzable("refining undecided blocks costs more than evaluating the mask")
			}
			v := e.eval(h)
			hFailed := e.fail != nil
			if hFailed {
				if h.point() {
					return 0, divZeroAt(h)
				}
				e.fail, v = nil, bMaybe // undecided: split further
			}
			switch {
			case v.lo == 1:
				seenT = true
			case v.hi == 0:
				seenF = true
			case h.point():
				return 0, notAnalyzable("internal error: undecided at a single position")
			default:
				if len(stack) == cap(stack) {
					return 0, notAnalyzable("refinement too deep")
				}
				stack = append(stack, pending{h, hFailed})
				if hFailed {
					nFailed++
				}
			}
		}
		if seenT && seenF && nFailed == 0 {
			return Partial, nil
		}
	}
	switch {
	case seenT && seenF:
		return Partial, nil
	case seenT:
		return Full, nil
	}
	return Empty, nil
}

type pending struct {
	r      rect
	failed bool
}
