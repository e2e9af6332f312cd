package tir

import (
	"fmt"
	"math"
)

// Kind names an operation. Each constant's comment shows the printed form;
// `T` is the result type, operands come before the attributes in braces.
type Kind uint8

const (
	OpInvalid Kind = iota

	// OpConst is a constant, splatted when T is a tensor. value is an int,
	// a float (`1.5`, `-inf`, `inf`, `nan`) or a bool.
	//   %0 = const {value = 1.5} : tensor<64xf32>
	OpConst
	// OpProgramID is the program's index along grid axis 0, 1 or 2.
	//   %0 = program_id {axis = 0} : i32
	OpProgramID
	// OpNumPrograms is the launch grid's size along axis 0, 1 or 2.
	//   %0 = num_programs {axis = 1} : i32
	OpNumPrograms
	// OpNumSMs is the device's multiprocessor count (GPU: %nsmid; the CPU
	// device: 1), a hint for prefetching what the programs of the next
	// wave read; results must not depend on it.
	//   %0 = num_sms : i32
	OpNumSMs
	// OpGroupID is the program's consumer group: a kernel whose
	// compile-time argument consumer_groups is G runs each program as G
	// groups of its num_warps warps, on tiles of their own, sharing the
	// copies a producer warpgroup issues (sm_90a); 0 to G-1, and 0 without.
	//   %0 = group_id : i32
	OpGroupID
	// OpArange is the tensor [start, start+1, ..., end-1].
	//   %0 = arange {start = 0, end = 64} : tensor<64xi32>
	OpArange
	// OpSplat fills a tensor with a scalar.
	//   %1 = splat %0 : tensor<64x64xf32>
	OpSplat
	// OpBroadcast repeats size-1 dimensions of a tensor of the same rank.
	//   %1 = broadcast %0 : tensor<64x64xf32>
	OpBroadcast
	// OpReshape reinterprets a tensor's elements (row-major) in a new shape
	// with the same element count; the lowering uses it to add unit axes.
	//   %1 = reshape %0 : tensor<64x1xi32>
	OpReshape
	// OpTrans transposes a 2-D tensor.
	//   %1 = trans %0 : tensor<128x64xbf16>
	OpTrans

	// Elementwise binary ops: both operands and the result have type T.
	//   %2 = add %0, %1 : tensor<64x64xf32>
	OpAdd
	OpSub
	OpMul
	OpDiv // integer division truncates toward zero
	OpRem // integer remainder has the sign of the dividend
	OpMin
	OpMax
	OpAnd // i1 and integers
	OpOr
	OpXor

	// OpCmp compares elementwise; pred is eq, ne, lt, le, gt or ge (signed
	// for integers, ordered for floats except ne, which is unordered).
	//   %2 = cmp %0, %1 {pred = lt} : tensor<64x64xi1>
	OpCmp
	// OpSelect picks from its second or third operand by an i1 condition.
	//   %3 = select %0, %1, %2 : tensor<64x64xf32>
	OpSelect

	// Elementwise unary ops; the operand has type T.
	//   %1 = exp2 %0 : tensor<64x64xf32>
	OpNeg
	OpNot // logical not on i1, bitwise on integers
	OpAbs
	OpExp
	OpExp2
	OpLog
	OpLog2
	OpTanh
	OpSqrt

	// OpCast converts elements to T's element type (same shape): float<->float
	// rounds to nearest even, float->int truncates, i1->int gives 0/1.
	//   %1 = cast %0 : tensor<64x64xbf16>
	OpCast

	// OpAddPtr offsets pointers by an integer number of elements.
	//   %2 = addptr %0, %1 : tensor<64x128xptr<f32>>
	OpAddPtr
	// OpLoad reads global memory; with a mask, masked-off lanes read nothing
	// and yield the third operand.
	//   %1 = load %0 : tensor<64xf32>
	//   %3 = load %0, %1, %2 : tensor<64x128xbf16>
	OpLoad
	// OpStore writes global memory, only where the optional mask is true.
	//   store %0, %1
	//   store %0, %1, %2
	OpStore
	// OpAtomicAdd adds f32 values to global memory atomically (relaxed
	// order, one read-modify-write per element), only where the optional
	// mask is true; lanes with equal addresses each add. It has no result
	// (PTX red.global.add.f32). Reductions from many programs, such as the
	// backward pass's dQ and aux gradients, use it.
	//   atomic_add %0, %1
	//   atomic_add %0, %1, %2
	OpAtomicAdd
	// OpPrefetch asks for global memory to be brought into the L2 cache,
	// only where the optional mask is true; it has no result and no effect
	// on results (PTX prefetch.global.L2; the CPU device checks the
	// addresses as a load's and reads nothing). A program warms what a
	// later program will load.
	//   prefetch %0
	//   prefetch %0, %1
	OpPrefetch
	// OpLastArrival takes a ticket on a counter in global memory (a scalar
	// ptr<i32>, zero before the first of n programs calls it) and is true
	// in exactly one of the n programs that call it on that counter: the
	// last to arrive, which then sees every global store the n programs
	// made before their call, and sets the counter back to 0 (so the next
	// launch needs no reset). The result is the same in all of a program's
	// threads. It writes the counter and orders memory like a store that
	// is also a barrier: no load or store moves across it. A reduction
	// across programs merges in the last one (the "last block" pattern:
	// PTX fence.acq_rel.gpu, a CTA barrier, one thread's acq_rel
	// atom.add, the flag through shared memory, a fence again).
	//   %2 = last_arrival %0, %1 : i1
	OpLastArrival

	// OpDot is a matrix product with accumulator: a[M,K] x b[K,N] + c[M,N],
	// accumulating in c's element type. k_extent = n (optional) says that
	// a's columns and b's rows from n on are zero (pad-dims' padded lanes),
	// so a target may skip them. n_extent = n (optional) says that the
	// result's columns from n on equal c's (b's columns from n on are zero
	// or never seen), so a target may skip computing them.
	//   %3 = dot %0, %1, %2 : tensor<64x64xf32>
	//   %3 = dot %0, %1, %2 {k_extent = 96} : tensor<64x64xf32>
	//   %3 = dot %0, %1, %2 {n_extent = 96} : tensor<64x128xf32>
	OpDot
	// OpReduce reduces one axis with kind max, min or sum.
	//   %1 = reduce %0 {kind = max, axis = 1} : tensor<64xf32>
	OpReduce

	// OpFor is a counted loop over [lo, hi) by step, carrying values. Its
	// region's arguments are the induction variable and the carried values;
	// the region ends with yield, and the results are the last carried values.
	//   %3, %4 = for %lo, %hi, %step, %a, %b : f32, tensor<64xf32> {
	//   ^(%5: i32, %6: f32, %7: tensor<64xf32>):
	//     ...
	//     yield %8, %9
	//   }
	OpFor
	// OpIf runs its then or else region; each ends with yield.
	//   %1 = if %0 : f32 {
	//     yield %a
	//   } else {
	//     yield %b
	//   }
	OpIf
	// OpYield ends a for or if region.
	//   yield %0, %1
	OpYield
	// OpCall calls another function of the module (mods before inlining).
	//   %4 = call %0, %1, %2, %3 {callee = @mask} : tensor<64x64xi1>
	OpCall
	// OpReturn ends a function.
	//   return %0
	OpReturn

	numKinds
)

var kindNames = [...]string{
	OpConst: "const", OpProgramID: "program_id", OpNumPrograms: "num_programs", OpNumSMs: "num_sms", OpGroupID: "group_id", OpArange: "arange", OpSplat: "splat",
	OpBroadcast: "broadcast", OpReshape: "reshape", OpTrans: "trans",
	OpAdd: "add", OpSub: "sub", OpMul: "mul", OpDiv: "div", OpRem: "rem", OpMin: "min", OpMax: "max",
	OpAnd: "and", OpOr: "or", OpXor: "xor", OpCmp: "cmp", OpSelect: "select",
	OpNeg: "neg", OpNot: "not", OpAbs: "abs", OpExp: "exp", OpExp2: "exp2", OpLog: "log", OpLog2: "log2",
	OpTanh: "tanh", OpSqrt: "sqrt", OpCast: "cast", OpAddPtr: "addptr", OpLoad: "load", OpStore: "store",
	OpAtomicAdd: "atomic_add", OpPrefetch: "prefetch", OpLastArrival: "last_arrival", OpDot: "dot", OpReduce: "reduce", OpFor: "for", OpIf: "if", OpYield: "yield",
	OpCall: "call", OpReturn: "return",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("op(%d)", k)
}

// KindByName maps a printed op name to its Kind.
func KindByName(s string) (Kind, bool) {
	for i, n := range kindNames {
		if n == s && n != "" {
			return Kind(i), true
		}
	}
	return OpInvalid, false
}

// IsBinary reports elementwise binary arithmetic/logic ops (not cmp/select).
func (k Kind) IsBinary() bool { return k >= OpAdd && k <= OpXor }

// IsUnary reports elementwise unary math ops.
func (k Kind) IsUnary() bool { return k >= OpNeg && k <= OpSqrt }

// IsElementwise reports ops that apply lane by lane on same-shaped operands.
func (k Kind) IsElementwise() bool {
	return k.IsBinary() || k.IsUnary() || k == OpCmp || k == OpSelect || k == OpCast || k == OpAddPtr
}

// IsTerminator reports ops that end a region.
func (k Kind) IsTerminator() bool { return k == OpYield || k == OpReturn }

// HasSideEffects reports ops that DCE and CSE must keep as they are.
func (k Kind) HasSideEffects() bool {
	return k.IsMemWrite() || k == OpPrefetch || k == OpLastArrival || k == OpCall || k.IsTerminator() || k == OpFor || k == OpIf
}

// OrdersMemory reports the ops that write global memory or order its
// accesses across programs (stores, atomics and last_arrival): a pass or
// target that moves loads or stores must not move them across one.
func (k Kind) OrdersMemory() bool { return k.IsMemWrite() || k == OpLastArrival }

// IsMemWrite reports the ops that write global memory through their first
// operand (pointers), with the value second and an optional mask third.
func (k Kind) IsMemWrite() bool { return k == OpStore || k == OpAtomicAdd }

// Pos is a source position carried from the tile language for errors.
type Pos struct {
	File      string
	Line, Col int
}

func (p Pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Value is an SSA value: an op result, a region argument or a function parameter.
type Value struct {
	Type Type
	Def  *Op    // defining op, nil for arguments
	Name string // parameter name (function parameters only); others print as numbers
}

// Attr is one named attribute. Val is int64, float64, bool, or Ident.
type Attr struct {
	Key string
	Val any
}

// Ident is an attribute value printed bare (`max`, `lt`) or as a symbol (`@mask`).
type Ident string

// Op is one operation.
type Op struct {
	Kind    Kind
	Args    []*Value
	Results []*Value
	Attrs   []Attr
	Regions []*Block
	Pos     Pos
}

// Block is a region body: arguments and a list of ops ending in a terminator.
type Block struct {
	Args []*Value
	Ops  []*Op
}

// Func is a kernel (entry point, no results) or a device function.
type Func struct {
	Name   string
	Kernel bool
	Params []*Value
	Result []Type
	Attrs  []Attr
	Body   *Block
	Pos    Pos
}

// GridParams are the parameters a persistent kernel (the persistent
// pass) takes after its own, in order: the logical grid, which
// program_id ranges over (the grid its launch contract asks for), and
// the number of programs launched along axis 0, each of which runs the
// logical grid's tiles pid, pid + grid.programs, … A launcher that finds
// them launches grid.programs programs instead of the logical grid.
var GridParams = []string{"grid.x", "grid.y", "grid.z", "grid.programs"}

// GridOrder is the pointer parameter (ptr<i32>) a persistent kernel takes
// after GridParams: the tile each slot runs. Program pid runs slots pid,
// pid + grid.programs, … and slot s the tile order[s] (linearized x
// fastest); the launch fills it with a permutation of the tiles, which it
// may choose from their expected lengths.
const GridOrder = "grid.order"

// Module is a compilation unit: kernels and the functions they call.
type Module struct {
	Funcs []*Func
}

// Func returns the function named name, or nil.
func (m *Module) Func(name string) *Func {
	for _, f := range m.Funcs {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Result is the op's single result (panics when it has none; callers know).
func (o *Op) Result() *Value { return o.Results[0] }

// Attr returns the attribute named key, or nil.
func (o *Op) Attr(key string) any { return findAttr(o.Attrs, key) }

// IntAttr returns an int attribute (0 when absent).
func (o *Op) IntAttr(key string) int64 {
	v, _ := o.Attr(key).(int64)
	return v
}

// IdentAttr returns an identifier attribute ("" when absent).
func (o *Op) IdentAttr(key string) string {
	v, _ := o.Attr(key).(Ident)
	return string(v)
}

// SetAttr sets or replaces an attribute.
func (o *Op) SetAttr(key string, val any) { o.Attrs = setAttr(o.Attrs, key, val) }

// Attr returns the function attribute named key, or nil.
func (f *Func) Attr(key string) any { return findAttr(f.Attrs, key) }

// SetAttr sets or replaces a function attribute.
func (f *Func) SetAttr(key string, val any) { f.Attrs = setAttr(f.Attrs, key, val) }

func findAttr(as []Attr, key string) any {
	for _, a := range as {
		if a.Key == key {
			return a.Val
		}
	}
	return nil
}

func setAttr(as []Attr, key string, val any) []Attr {
	for i := range as {
		if as[i].Key == key {
			as[i].Val = val
			return as
		}
	}
	return append(as, Attr{key, val})
}

// NewOp makes an op with results of the given types, linking them back to it.
func NewOp(k Kind, args []*Value, results ...Type) *Op {
	op := &Op{Kind: k, Args: args}
	for _, t := range results {
		op.Results = append(op.Results, &Value{Type: t, Def: op})
	}
	return op
}

// Walk calls fn for every op in b and nested regions, pre-order. Returning
// false from fn skips that op's regions.
func (b *Block) Walk(fn func(*Op) bool) {
	for _, op := range b.Ops {
		if fn(op) {
			for _, r := range op.Regions {
				r.Walk(fn)
			}
		}
	}
}

// Any reports whether pred holds for some op in b or its nested regions,
// stopping at the first.
func (b *Block) Any(pred func(*Op) bool) bool {
	for _, op := range b.Ops {
		if pred(op) {
			return true
		}
		for _, r := range op.Regions {
			if r.Any(pred) {
				return true
			}
		}
	}
	return false
}

// ReplaceAllUses replaces every use of old by new in b and nested regions.
func (b *Block) ReplaceAllUses(old, new *Value) {
	b.Walk(func(op *Op) bool {
		for i, a := range op.Args {
			if a == old {
				op.Args[i] = new
			}
		}
		return true
	})
}

// ReplaceUses applies a value substitution map to every operand in b.
func (b *Block) ReplaceUses(sub map[*Value]*Value) {
	if len(sub) == 0 {
		return
	}
	b.Walk(func(op *Op) bool {
		for i, a := range op.Args {
			for {
				n, ok := sub[a]
				if !ok {
					break
				}
				a = n
			}
			op.Args[i] = a
		}
		return true
	})
}

// SelectsConst reports whether o is select(c, x, k) with k a constant, and
// k's value: masks select that way (-inf for attention's scores, 0 for the
// backward's probabilities; the mask-range pass takes both).
func (o *Op) SelectsConst() (any, bool) {
	if o.Kind != OpSelect {
		return nil, false
	}
	f := o.Args[2].Def
	if f == nil || f.Kind != OpConst {
		return nil, false
	}
	return f.Attr("value"), true
}

// SelectsNegInf reports whether o is select(c, x, -inf) with -inf a
// constant: scores masked the way attention masks them (the code
// generator's one-select-per-element rule takes only these).
func (o *Op) SelectsNegInf() bool {
	v, ok := o.SelectsConst()
	f, isFloat := v.(float64)
	return ok && isFloat && math.IsInf(f, -1)
}
