package tir

import (
	"strings"
	"testing"
)

func TestVerifySample(t *testing.T) {
	if err := Verify(sampleModule()); err != nil {
		t.Fatal(err)
	}
}

// nthOp returns the n-th op (1-based, pre-order) of function fn in m, the
// numbering Verify's messages use.
func nthOp(m *Module, fn string, n int) *Op {
	var found *Op
	m.Func(fn).Body.Walk(func(op *Op) bool {
		if n--; n == 0 {
			found = op
		}
		return true
	})
	return found
}

// firstOp returns the first op of kind k in fn, pre-order.
func firstOp(m *Module, fn string, k Kind) *Op {
	var found *Op
	m.Func(fn).Body.Walk(func(op *Op) bool {
		if found == nil && op.Kind == k {
			found = op
		}
		return true
	})
	return found
}

// tiny builds a module with one kernel @t(%p: ptr<f32>, %n: i32, %c: i1,
// %x: f32) whose body build fills before the return.
func tiny(build func(b *Builder, p []*Value)) func(*Module) {
	return func(m *Module) {
		f := &Func{Name: "t", Kernel: true, Body: &Block{}}
		f.Params = []*Value{{Type: PtrTo(F32), Name: "p"}, {Type: Scalar(I32), Name: "n"},
			{Type: Scalar(I1), Name: "c"}, {Type: Scalar(F32), Name: "x"}}
		b := &Builder{Block: f.Body}
		build(b, f.Params)
		b.Return()
		m.Funcs = append(m.Funcs, f)
	}
}

// lastArrivalFunc is a kernel of one last_arrival on an i32 counter, with
// a count and a result of the given types.
func lastArrivalFunc(count, res Type) func(*Module) {
	return func(m *Module) {
		f := &Func{Name: "t", Kernel: true, Body: &Block{}}
		c, n := &Value{Type: PtrTo(I32), Name: "c"}, &Value{Type: count, Name: "n"}
		f.Params = []*Value{c, n}
		b := &Builder{Block: f.Body}
		b.Emit(NewOp(OpLastArrival, []*Value{c, n}, res))
		b.Return()
		m.Funcs = append(m.Funcs, f)
	}
}

func TestVerifyErrors(t *testing.T) {
	// Kernel @sample op numbers (see testdata/sample.tir): 6 const %5,
	// 7 mul %6, 10 call, 28/29 casts, 31 dot, 36 for, 40 max, 41 yield,
	// 43 if, 48 else-yield, 53 store.
	tests := []struct {
		name   string
		mutate func(m *Module)
		want   string
	}{
		{"wrong operand type", func(m *Module) {
			mf := m.Func("mask")
			nthOp(m, "mask", 3).Args[1] = mf.Params[2]
		}, "verify: func @mask: op 3 (cmp): operand types differ: tensor<4x8xi32> vs tensor<4x1xi32>"},
		{"position", func(m *Module) {
			op := nthOp(m, "mask", 3)
			op.Args[1] = m.Func("mask").Params[2]
			op.Pos = Pos{File: "x.fa", Line: 3, Col: 7}
		}, "x.fa:3:7: verify: func @mask: op 3 (cmp): operand types differ"},
		{"use before def", func(m *Module) {
			ops := m.Func("sample").Body.Ops
			ops[5], ops[6] = ops[6], ops[5]
		}, "op 6 (mul): operand 1 is used before its definition"},
		{"value from another func", func(m *Module) {
			nthOp(m, "mask", 3).Args[0] = m.Func("sample").Params[2]
		}, "op 3 (cmp): operand 0 is used before its definition"},
		{"use outside region", func(m *Module) {
			nthOp(m, "sample", 53).Args[1] = nthOp(m, "sample", 40).Result()
		}, "op 53 (store): operand 1 is used outside the region that defines it"},
		{"region arg outside region", func(m *Module) {
			loop := firstOp(m, "sample", OpFor)
			nthOp(m, "sample", 53).Args[1] = loop.Regions[0].Args[1]
		}, "op 53 (store): operand 1 is used outside the region that defines it"},
		{"defined twice", func(m *Module) {
			b := m.Func("sample").Body
			b.Ops = append([]*Op{b.Ops[5]}, b.Ops...)
		}, "op 7 (const): result 0: value defined twice"},
		{"missing yield", func(m *Module) {
			r := firstOp(m, "sample", OpFor).Regions[0]
			r.Ops = r.Ops[:len(r.Ops)-1]
		}, "verify: func @sample: op 36 (for): region does not end with yield"},
		{"empty region", func(m *Module) {
			firstOp(m, "sample", OpIf).Regions[1].Ops = nil
		}, "op 43 (if): region does not end with yield"},
		{"missing return", func(m *Module) {
			b := m.Func("mask").Body
			b.Ops = b.Ops[:len(b.Ops)-1]
		}, "verify: func @mask: body does not end with return"},
		{"terminator mid-block", func(m *Module) {
			b := m.Func("sample").Body
			b.Ops = append([]*Op{NewOp(OpReturn, nil)}, b.Ops...)
		}, "op 1 (return): return must be the last op of its block"},
		{"yield in body", func(m *Module) {
			b := m.Func("mask").Body
			b.Ops[len(b.Ops)-1].Kind = OpYield
		}, "op 4 (yield): yield is not allowed here (this block ends with return)"},
		{"return in region", func(m *Module) {
			nthOp(m, "sample", 41).Kind = OpReturn
		}, "op 41 (return): return is not allowed here (this block ends with yield)"},
		{"bad yield arity", func(m *Module) {
			y := nthOp(m, "sample", 41)
			y.Args = append(y.Args, y.Args[0])
		}, "op 36 (for): region 0: 2 yielded values, want 1"},
		{"bad yield type", func(m *Module) {
			nthOp(m, "sample", 48).Args[0] = firstOp(m, "sample", OpDot).Result()
		}, "op 43 (if): region 1: yielded value 0 is tensor<4x4xf32>, want tensor<4xf32>"},
		{"call to missing func", func(m *Module) {
			nthOp(m, "sample", 10).SetAttr("callee", Ident("@nomask"))
		}, "op 10 (call): call to missing function @nomask"},
		{"call arg type", func(m *Module) {
			call := nthOp(m, "sample", 10)
			call.Args[2] = call.Args[3]
		}, "op 10 (call): @mask: argument 2 is tensor<1x8xi32>, want tensor<4x1xi32>"},
		{"call arity", func(m *Module) {
			call := nthOp(m, "sample", 10)
			call.Args = call.Args[:3]
		}, "op 10 (call): @mask: 3 arguments, want 4"},
		{"call a kernel", func(m *Module) {
			m.Func("mask").Kernel, m.Func("mask").Result = true, nil
			m.Func("mask").Body.Ops[3].Args = nil
		}, "op 10 (call): call to kernel @mask"},
		{"dot shape mismatch", func(m *Module) {
			firstOp(m, "sample", OpDot).Args[1] = nthOp(m, "sample", 28).Result()
		}, "op 31 (dot): shapes [4, 8] x [4, 8] + [4, 4] do not match [M,K] x [K,N] + [M,N]"},
		{"dot elem mismatch", func(m *Module) {
			firstOp(m, "sample", OpDot).Args[1] = nthOp(m, "sample", 27).Result()
		}, "op 31 (dot): types tensor<4x8xbf16>, tensor<8x4xf32>, tensor<4x4xf32>"},
		{"dot k_extent past K", func(m *Module) {
			firstOp(m, "sample", OpDot).SetAttr("k_extent", int64(9))
		}, "op 31 (dot): k_extent 9: want 1 to K = 8"},
		{"dot n_extent past N", func(m *Module) {
			firstOp(m, "sample", OpDot).SetAttr("n_extent", int64(5))
		}, "op 31 (dot): n_extent 5: want 1 to N = 4"},
		{"dot n_extent zero", func(m *Module) {
			firstOp(m, "sample", OpDot).SetAttr("n_extent", int64(0))
		}, "op 31 (dot): n_extent 0: want 1 to N = 4"},
		{"duplicate func", func(m *Module) {
			m.Func("sample").Name = "mask"
		}, "verify: func @mask: duplicate function name"},
		{"kernel with results", func(m *Module) {
			m.Func("sample").Result = []Type{Scalar(I32)}
		}, "func @sample: kernel has result types"},
		{"return arity", func(m *Module) {
			m.Func("mask").Body.Ops[3].Args = nil
		}, "op 4 (return): 0 values, want 1"},
		{"bad param name", func(m *Module) {
			m.Func("mask").Params[1].Name = "0"
		}, `func @mask: parameter 1: bad name "0"`},
		{"duplicate param", func(m *Module) {
			m.Func("mask").Params[1].Name = "b"
		}, "func @mask: duplicate parameter %b"},
		{"bad attr value", func(m *Module) {
			m.Func("sample").SetAttr("num_warps", 4)
		}, "func @sample: attribute num_warps: unsupported value type int"},
		{"ident looks like bool", func(m *Module) {
			nthOp(m, "mask", 3).SetAttr("pred", Ident("true"))
		}, `op 3 (cmp): attribute pred: bad identifier "true"`},
		{"bad pred", func(m *Module) {
			nthOp(m, "mask", 3).SetAttr("pred", Ident("lte"))
		}, `op 3 (cmp): bad pred "lte"`},
		{"const kind", func(m *Module) {
			nthOp(m, "sample", 6).SetAttr("value", 4.0)
		}, "op 6 (const): value 4.0 does not fit i32"},
		{"const missing", func(m *Module) {
			nthOp(m, "sample", 6).Attrs = nil
		}, "op 6 (const): missing value attribute"},
		{"program_id axis", func(m *Module) {
			nthOp(m, "sample", 1).SetAttr("axis", int64(3))
		}, "op 1 (program_id): axis must be 0, 1 or 2"},
		{"arange length", func(m *Module) {
			nthOp(m, "sample", 2).SetAttr("end", int64(5))
		}, "op 2 (arange): result type tensor<4xi32>, want tensor<5xi32>"},
		{"arange empty", func(m *Module) {
			nthOp(m, "sample", 2).SetAttr("end", int64(0))
		}, "op 2 (arange): needs int attributes start < end"},
		{"reduce axis", func(m *Module) {
			nthOp(m, "sample", 35).SetAttr("axis", int64(2))
		}, "op 35 (reduce): axis out of range for tensor<4x4xf32>"},
		{"reduce kind", func(m *Module) {
			nthOp(m, "sample", 35).SetAttr("kind", Ident("prod"))
		}, `op 35 (reduce): bad kind "prod"`},
		{"and on float", func(m *Module) {
			nthOp(m, "sample", 40).Kind = OpAnd
		}, "op 40 (and): operands are float, want i1 or integer"},
		{"exp2 on int", func(m *Module) {
			nthOp(m, "sample", 26).Args[0] = nthOp(m, "sample", 15).Result()
		}, "op 26 (exp2): operand tensor<4x8xi32> is not float"},
		{"binary result type", func(m *Module) {
			nthOp(m, "sample", 7).Results[0].Type = Scalar(I64)
		}, "op 7 (mul): result type i64, want i32"},
		{"op with region", func(m *Module) {
			nthOp(m, "sample", 7).Regions = []*Block{{}}
		}, "op 7 (mul): has 1 regions, want 0"},
		{"nil operand", func(m *Module) {
			nthOp(m, "sample", 7).Args[0] = nil
		}, "op 7 (mul): operand 0 is nil"},
		{"stale Def", func(m *Module) {
			nthOp(m, "sample", 7).Results[0].Def = nil
		}, "op 7 (mul): result 0 does not point back to its op"},
		{"for bound", func(m *Module) {
			firstOp(m, "sample", OpFor).Args[1] = m.Func("sample").Params[0]
		}, "op 36 (for): bound 1 is ptr<f32>, want i32"},
		{"for region args", func(m *Module) {
			firstOp(m, "sample", OpFor).Regions[0].Args[1].Type = Tensor(F32, 8)
		}, "op 36 (for): region argument 1, want tensor<4xf32>"},
		{"for result type", func(m *Module) {
			firstOp(m, "sample", OpFor).Results[0].Type = Tensor(F32, 8)
		}, "op 36 (for): result 0 is tensor<8xf32>, but its init is tensor<4xf32>"},
		{"if cond", func(m *Module) {
			firstOp(m, "sample", OpIf).Args[0] = nthOp(m, "sample", 21).Result()
		}, "op 43 (if): condition tensor<4x8xi1>, want i1"},
		{"if one region", func(m *Module) {
			op := firstOp(m, "sample", OpIf)
			op.Regions = op.Regions[:1]
		}, "op 43 (if): has 1 regions, want 2"},
		{"load mask shape", tiny(func(b *Builder, p []*Value) {
			b.Load(b.Splat(p[0], []int{4}), p[2], b.Splat(p[3], []int{4}))
		}), "func @t: op 3 (load): mask i1, want tensor<4xi1>"},
		{"load other type", func(m *Module) {
			nthOp(m, "sample", 23).Args[2] = nthOp(m, "sample", 15).Result()
		}, "op 23 (load): other tensor<4x8xi32>, want tensor<4x8xf32>"},
		{"load arity", func(m *Module) {
			op := nthOp(m, "sample", 23)
			op.Args = op.Args[:2]
		}, "op 23 (load): has 2 operands"},
		{"store value type", func(m *Module) {
			nthOp(m, "sample", 53).Args[1] = nthOp(m, "sample", 51).Result()
		}, "op 53 (store): value tensor<4xi32>, want tensor<4xf32>"},
		{"select cond", tiny(func(b *Builder, p []*Value) {
			b.Select(p[3], p[3], p[3])
		}), "func @t: op 1 (select): condition f32, want i1"},
		{"add on i1", tiny(func(b *Builder, p []*Value) {
			b.Binary(OpAdd, p[2], p[2])
		}), "func @t: op 1 (add): arithmetic on i1"},
		{"add on pointers", tiny(func(b *Builder, p []*Value) {
			b.Binary(OpAdd, p[0], p[0])
		}), "func @t: op 1 (add): operands are pointers (use addptr)"},
		{"not on float", tiny(func(b *Builder, p []*Value) {
			b.Unary(OpNot, p[3])
		}), "func @t: op 1 (not): operand f32 is float, want i1 or integer"},
		{"cast pointer", tiny(func(b *Builder, p []*Value) {
			b.Cast(p[0], I64)
		}), "func @t: op 1 (cast): cannot cast pointers"},
		{"splat tensor", tiny(func(b *Builder, p []*Value) {
			b.Splat(b.Splat(p[3], []int{4}), []int{4, 4})
		}), "func @t: op 2 (splat): operand tensor<4xf32> is not a scalar"},
		{"broadcast dims", tiny(func(b *Builder, p []*Value) {
			b.Broadcast(b.Splat(p[3], []int{4, 2}), []int{4, 8})
		}), "func @t: op 2 (broadcast): cannot broadcast tensor<4x2xf32> to tensor<4x8xf32>"},
		{"broadcast rank", tiny(func(b *Builder, p []*Value) {
			b.Broadcast(b.Splat(p[3], []int{4}), []int{4, 4})
		}), "ranks differ"},
		{"reshape count", tiny(func(b *Builder, p []*Value) {
			b.Reshape(b.Splat(p[3], []int{4}), []int{4, 2})
		}), "func @t: op 2 (reshape): cannot reshape tensor<4xf32> to tensor<4x2xf32>: element counts differ"},
		{"trans 1-D", tiny(func(b *Builder, p []*Value) {
			b.Emit(NewOp(OpTrans, []*Value{b.Splat(p[3], []int{4})}, Tensor(F32, 4)))
		}), "func @t: op 2 (trans): operand tensor<4xf32> is not 2-D"},
		{"addptr float offset", tiny(func(b *Builder, p []*Value) {
			b.AddPtr(p[0], p[3])
		}), "func @t: op 1 (addptr): offset f32, want integers shaped []"},
		{"load non-pointer", tiny(func(b *Builder, p []*Value) {
			b.Load(p[3], nil, nil)
		}), "func @t: op 1 (load): operand 0 f32 is not a pointer"},
		{"store mask shape", tiny(func(b *Builder, p []*Value) {
			b.Store(p[0], p[3], b.Splat(p[2], []int{4}))
		}), "func @t: op 2 (store): mask tensor<4xi1>, want i1"},
		{"atomic_add on i32", tiny(func(b *Builder, p []*Value) {
			p[0].Type = PtrTo(I32)
			b.AtomicAdd(p[0], p[1], nil)
		}), "func @t: op 1 (atomic_add): atomic_add on ptr<i32>, want f32"},
		{"atomic_add mask shape", tiny(func(b *Builder, p []*Value) {
			b.AtomicAdd(p[0], p[3], b.Splat(p[2], []int{4}))
		}), "func @t: op 2 (atomic_add): mask tensor<4xi1>, want i1"},
		{"atomic_add result", tiny(func(b *Builder, p []*Value) {
			b.Emit(NewOp(OpAtomicAdd, []*Value{p[0], p[3]}, Scalar(F32)))
		}), "func @t: op 1 (atomic_add): has 1 results, want 0"},
		{"prefetch non-pointer", tiny(func(b *Builder, p []*Value) {
			b.Prefetch(p[3], nil)
		}), "func @t: op 1 (prefetch): operand 0 f32 is not a pointer"},
		{"prefetch mask shape", tiny(func(b *Builder, p []*Value) {
			b.Prefetch(p[0], b.Splat(p[2], []int{4}))
		}), "func @t: op 2 (prefetch): mask tensor<4xi1>, want i1"},
		{"last_arrival counter type", tiny(func(b *Builder, p []*Value) {
			b.LastArrival(p[0], p[1])
		}), "func @t: op 1 (last_arrival): counter ptr<f32>, want ptr<i32>"},
		{"last_arrival count type", lastArrivalFunc(Scalar(F32), Scalar(I1)), "func @t: op 1 (last_arrival): count f32, want i32"},
		{"last_arrival result type", lastArrivalFunc(Scalar(I32), Scalar(I32)), "func @t: op 1 (last_arrival): result type i32, want i1"},
		{"num_programs axis", tiny(func(b *Builder, p []*Value) {
			b.NumPrograms(3)
		}), "func @t: op 1 (num_programs): axis must be 0, 1 or 2"},
		{"num_sms result", tiny(func(b *Builder, p []*Value) {
			b.Emit(NewOp(OpNumSMs, nil, Scalar(F32)))
		}), "func @t: op 1 (num_sms): result type f32, want i32"},
		{"cmp result", tiny(func(b *Builder, p []*Value) {
			b.Emit(NewOp(OpCmp, []*Value{p[3], p[3]}, Scalar(F32))).SetAttr("pred", Ident("eq"))
		}), "func @t: op 1 (cmp): result type f32, want i1"},
		{"invalid elem", tiny(func(b *Builder, p []*Value) {
			b.Const(Type{}, int64(0))
		}), "func @t: op 1 (const): result 0: invalid element type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := sampleModule()
			tt.mutate(m)
			err := Verify(m)
			if err == nil {
				t.Fatalf("no error; module:\n%s", m)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q\nwant   %q", err, tt.want)
			}
		})
	}
}

// TestVerifyParsedPos checks that errors in parsed text point at the op.
func TestVerifyParsedPos(t *testing.T) {
	src := "func @f(%a: i32, %b: f32) -> i32 {\n  %0 = add %a, %b : i32\n  return %0\n}\n"
	m, err := Parse("p.tir", src)
	if err != nil {
		t.Fatal(err)
	}
	want := "p.tir:2:3: verify: func @f: op 1 (add): operand types differ: i32 vs f32"
	if err := Verify(m); err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}
