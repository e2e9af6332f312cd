package tir

// sampleModule builds a small module that touches every op kind; tests of
// the printer, parser and verifier share it.
func sampleModule() *Module {
	m := &Module{}
	// func @mask(%b: i32, %h: i32, %q: tensor<4x1xi32>, %kv: tensor<1x8xi32>) -> tensor<4x8xi1>
	mf := &Func{Name: "mask", Result: []Type{Tensor(I1, 4, 8)}, Body: &Block{}}
	mf.Params = []*Value{{Type: Scalar(I32), Name: "b"}, {Type: Scalar(I32), Name: "h"},
		{Type: Tensor(I32, 4, 1), Name: "q"}, {Type: Tensor(I32, 1, 8), Name: "kv"}}
	mb := &Builder{Block: mf.Body}
	q := mb.Broadcast(mf.Params[2], []int{4, 8})
	kv := mb.Broadcast(mf.Params[3], []int{4, 8})
	mb.Return(mb.Cmp("ge", q, kv))
	m.Funcs = append(m.Funcs, mf)

	k := &Func{Name: "sample", Kernel: true, Body: &Block{}}
	k.Params = []*Value{{Type: PtrTo(F32), Name: "x"}, {Type: PtrTo(F32), Name: "out"}, {Type: Scalar(I32), Name: "n"}}
	k.SetAttr("num_warps", int64(4))
	b := &Builder{Block: k.Body}
	pid := b.ProgramID(0)
	r := b.Arange(0, 4)
	r2 := b.Reshape(r, []int{4, 1})
	c := b.Arange(0, 8)
	c2 := b.Reshape(c, []int{1, 8})
	four := b.Const(Scalar(I32), int64(4))
	base := b.Binary(OpMul, pid, four)
	rows := b.Binary(OpAdd, b.Splat(base, []int{4, 1}), r2)
	mask := b.Call("mask", []*Value{pid, pid, rows, c2}, Tensor(I1, 4, 8)).Result()
	eight := b.Const(Tensor(I32, 4, 8), int64(8))
	off := b.Binary(OpAdd, b.Binary(OpMul, b.Broadcast(rows, []int{4, 8}), eight), b.Broadcast(c2, []int{4, 8}))
	ptrs := b.AddPtr(b.Splat(k.Params[0], []int{4, 8}), off)
	inb := b.Cmp("lt", off, b.Splat(b.Binary(OpMul, k.Params[2], b.Const(Scalar(I32), int64(8))), []int{4, 8}))
	zero := b.Const(Tensor(F32, 4, 8), 0.0)
	x := b.Load(ptrs, inb, zero)
	xm := b.Select(mask, x, b.Const(Tensor(F32, 4, 8), -1.5))
	xt := b.Trans(b.Unary(OpExp2, xm))
	acc := b.Dot(b.Cast(xm, BF16), b.Cast(xt, BF16), b.Const(Tensor(F32, 4, 4), 0.0))
	lo, hi, st := b.Const(Scalar(I32), int64(0)), b.Const(Scalar(I32), int64(3)), b.Const(Scalar(I32), int64(1))
	loop, body := b.For(lo, hi, st, []*Value{b.Reduce("max", acc, 1)})
	iv := body.Unary(OpNeg, body.Cast(body.Block.Args[0], F32))
	body.Yield(body.Binary(OpMax, body.Block.Args[1], body.Splat(iv, []int{4})))
	cond := b.Cmp("gt", k.Params[2], lo)
	ifop, th, el := b.If(cond, []Type{Tensor(F32, 4)})
	th.Yield(th.Unary(OpSqrt, th.Unary(OpAbs, loop.Result())))
	el.Yield(el.Reduce("sum", acc, 0))
	outp := b.AddPtr(b.Splat(k.Params[1], []int{4}), b.Binary(OpAdd, b.Splat(base, []int{4}), r))
	b.Store(outp, ifop.Result(), nil)
	b.Return()
	m.Funcs = append(m.Funcs, k)
	return m
}
