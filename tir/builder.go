package tir

// Builder appends ops to a block. It does no type checking beyond computing
// result types: the front end checks user code, and the verifier checks
// everything after each pass.
type Builder struct {
	Block *Block
	Pos   Pos
}

// Emit appends op to the block and returns it.
func (b *Builder) Emit(op *Op) *Op {
	if op.Pos.Line == 0 {
		op.Pos = b.Pos
	}
	b.Block.Ops = append(b.Block.Ops, op)
	return op
}

func (b *Builder) emit1(k Kind, t Type, args []*Value, attrs ...Attr) *Value {
	op := NewOp(k, args, t)
	op.Attrs = attrs
	return b.Emit(op).Result()
}

// Const makes a constant of type t; val is int64, float64 or bool.
func (b *Builder) Const(t Type, val any) *Value {
	return b.emit1(OpConst, t, nil, Attr{"value", val})
}

// ProgramID is the program index along axis.
func (b *Builder) ProgramID(axis int) *Value {
	return b.emit1(OpProgramID, Scalar(I32), nil, Attr{"axis", int64(axis)})
}

// NumPrograms is the launch grid's size along axis.
func (b *Builder) NumPrograms(axis int) *Value {
	return b.emit1(OpNumPrograms, Scalar(I32), nil, Attr{"axis", int64(axis)})
}

// NumSMs is the device's multiprocessor count (a prefetching hint).
func (b *Builder) NumSMs() *Value {
	return b.emit1(OpNumSMs, Scalar(I32), nil)
}

// GroupID is the program's consumer group.
func (b *Builder) GroupID() *Value {
	return b.emit1(OpGroupID, Scalar(I32), nil)
}

// Arange is [start, end) as tensor<(end-start)xi32>.
func (b *Builder) Arange(start, end int) *Value {
	return b.emit1(OpArange, Tensor(I32, end-start), nil, Attr{"start", int64(start)}, Attr{"end", int64(end)})
}

// Splat fills shape with the scalar x.
func (b *Builder) Splat(x *Value, shape []int) *Value {
	return b.emit1(OpSplat, x.Type.WithShape(shape), []*Value{x})
}

// Broadcast expands x's size-1 dims (same rank) to shape.
func (b *Builder) Broadcast(x *Value, shape []int) *Value {
	return b.emit1(OpBroadcast, x.Type.WithShape(shape), []*Value{x})
}

// Reshape gives x a new shape with the same element count.
func (b *Builder) Reshape(x *Value, shape []int) *Value {
	return b.emit1(OpReshape, x.Type.WithShape(shape), []*Value{x})
}

// Trans transposes a 2-D tensor.
func (b *Builder) Trans(x *Value) *Value {
	s := x.Type.Shape
	return b.emit1(OpTrans, x.Type.WithShape([]int{s[1], s[0]}), []*Value{x})
}

// Binary applies an elementwise binary op to same-typed operands.
func (b *Builder) Binary(k Kind, x, y *Value) *Value {
	return b.emit1(k, x.Type, []*Value{x, y})
}

// Unary applies an elementwise unary op.
func (b *Builder) Unary(k Kind, x *Value) *Value {
	return b.emit1(k, x.Type, []*Value{x})
}

// Cmp compares same-typed operands; pred is eq, ne, lt, le, gt, ge.
func (b *Builder) Cmp(pred string, x, y *Value) *Value {
	return b.emit1(OpCmp, Type{Elem: I1, Shape: x.Type.Shape}, []*Value{x, y}, Attr{"pred", Ident(pred)})
}

// Select picks x where c holds, else y.
func (b *Builder) Select(c, x, y *Value) *Value {
	return b.emit1(OpSelect, x.Type, []*Value{c, x, y})
}

// Cast converts x's elements to e.
func (b *Builder) Cast(x *Value, e Elem) *Value {
	if x.Type.Elem == e && !x.Type.Ptr {
		return x
	}
	return b.emit1(OpCast, x.Type.WithElem(e), []*Value{x})
}

// AddPtr offsets pointer(s) p by integer(s) off of the same shape.
func (b *Builder) AddPtr(p, off *Value) *Value {
	return b.emit1(OpAddPtr, p.Type, []*Value{p, off})
}

// Load reads memory at p; mask and other are both nil or both set.
func (b *Builder) Load(p, mask, other *Value) *Value {
	args := []*Value{p}
	if mask != nil {
		args = append(args, mask, other)
	}
	return b.emit1(OpLoad, Type{Elem: p.Type.Elem, Shape: p.Type.Shape}, args)
}

// Store writes v at p where mask (may be nil) holds.
func (b *Builder) Store(p, v, mask *Value) *Op {
	args := []*Value{p, v}
	if mask != nil {
		args = append(args, mask)
	}
	return b.Emit(NewOp(OpStore, args))
}

// AtomicAdd adds f32 v to memory at p where mask (may be nil) holds.
func (b *Builder) AtomicAdd(p, v, mask *Value) *Op {
	args := []*Value{p, v}
	if mask != nil {
		args = append(args, mask)
	}
	return b.Emit(NewOp(OpAtomicAdd, args))
}

// Prefetch brings memory at p into the L2 cache where mask (may be nil)
// holds.
func (b *Builder) Prefetch(p, mask *Value) *Op {
	args := []*Value{p}
	if mask != nil {
		args = append(args, mask)
	}
	return b.Emit(NewOp(OpPrefetch, args))
}

// LastArrival takes a ticket on counter (a scalar ptr<i32>) shared by n
// programs: true in the last of them to arrive (OpLastArrival).
func (b *Builder) LastArrival(counter, n *Value) *Value {
	return b.emit1(OpLastArrival, Scalar(I1), []*Value{counter, n})
}

// Dot is a[M,K] x b[K,N] + c[M,N].
func (b *Builder) Dot(x, y, acc *Value) *Value {
	return b.emit1(OpDot, acc.Type, []*Value{x, y, acc})
}

// Reduce reduces axis of x with kind max, min or sum.
func (b *Builder) Reduce(kind string, x *Value, axis int) *Value {
	shape := append(append([]int(nil), x.Type.Shape[:axis]...), x.Type.Shape[axis+1:]...)
	return b.emit1(OpReduce, x.Type.WithShape(shape), []*Value{x}, Attr{"kind", Ident(kind)}, Attr{"axis", int64(axis)})
}

// Call calls the function named callee with result types res.
func (b *Builder) Call(callee string, args []*Value, res ...Type) *Op {
	op := NewOp(OpCall, args, res...)
	op.Attrs = []Attr{{"callee", Ident("@" + callee)}}
	return b.Emit(op)
}

// Yield ends a for or if region.
func (b *Builder) Yield(vals ...*Value) *Op { return b.Emit(NewOp(OpYield, vals)) }

// Return ends a function.
func (b *Builder) Return(vals ...*Value) *Op { return b.Emit(NewOp(OpReturn, vals)) }

// For starts a loop over [lo, hi) by step carrying inits. It returns the op
// (whose results are the final carried values) and a builder for the body,
// whose block arguments are the induction variable then the carried values.
// The caller must end the body with Yield.
func (b *Builder) For(lo, hi, step *Value, inits []*Value) (*Op, *Builder) {
	types := make([]Type, len(inits))
	for i, v := range inits {
		types[i] = v.Type
	}
	op := NewOp(OpFor, append([]*Value{lo, hi, step}, inits...), types...)
	body := &Block{Args: []*Value{{Type: Scalar(I32)}}}
	for _, t := range types {
		body.Args = append(body.Args, &Value{Type: t})
	}
	op.Regions = []*Block{body}
	b.Emit(op)
	return op, &Builder{Block: body, Pos: b.Pos}
}

// If starts a two-armed conditional with results of the given types. The
// caller must end both regions with Yield.
func (b *Builder) If(cond *Value, types []Type) (*Op, *Builder, *Builder) {
	op := NewOp(OpIf, []*Value{cond}, types...)
	then, els := &Block{}, &Block{}
	op.Regions = []*Block{then, els}
	b.Emit(op)
	return op, &Builder{Block: then, Pos: b.Pos}, &Builder{Block: els, Pos: b.Pos}
}
