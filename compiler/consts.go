package compiler

import (
	"fmt"

	"github.com/fac-compiler/fac/codegen/async"
	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/stdlib/attention"
	"github.com/fac-compiler/fac/tir"
)

// constRange is the values an integer compile-time parameter takes.
type constRange struct {
	name   string
	lo, hi int64
	pow2   bool
	means  string // what the parameter is, for the error
}

// scheduleRanges are the schedule parameters the compiler reads in any
// kernel that declares them (docs/language.md, Schedule parameters), with
// the values they take. The code generator checks them too, but only a
// GPU build runs it: a tile-IR compile, or one for the CPU device, took
// num_stages = 0 or num_warps = 3 without a word.
var scheduleRanges = []constRange{
	{name: "num_warps", lo: 1, hi: 32, pow2: true, means: "warps per program"},
	{name: "num_stages", lo: 1, hi: async.MaxStages, means: "buffers per streamed tile (1: no prefetch)"},
	{name: "consumer_groups", lo: 1, hi: 4, means: "consumer groups (1: none)"},
	{name: "exp2_poly", lo: 0, hi: core.Exp2PolyMax, means: "exp2s of eight computed by a polynomial"},
	{name: core.CTAsPerSMArg, lo: 1, hi: core.MaxCTAsPerSM, means: "programs per multiprocessor"},
}

// attentionRanges are the ranges of the stdlib attention kernels' own
// compile-time parameters (kernels with a launch contract): tile and mask
// block sizes are counts of rows or columns (SPARSE_Q = 0 compiled, then
// divided by zero at run time), the head dims are 1 to 256.
var attentionRanges = []constRange{
	{name: "BLOCK_M", lo: 1, hi: 1 << 12, means: "rows of a tile"},
	{name: "BLOCK_N", lo: 1, hi: 1 << 12, means: "columns of a tile"},
	{name: "SPARSE_Q", lo: 1, hi: 1 << 30, means: "query rows of a block-mask block"},
	{name: "SPARSE_K", lo: 1, hi: 1 << 30, means: "key columns of a block-mask block"},
	{name: "HEAD_DIM", lo: 1, hi: 256, means: "the head dimension"},
	{name: "HEAD_DIM_V", lo: 1, hi: 256, means: "the head dimension of V and O"},
	{name: "heads_group", lo: 0, hi: 1 << 30, means: "heads walked together (0: every head)"},
	{name: "MAX_SPLITS", lo: 1, hi: 64, means: "split-KV splits merged"},
}

// attentionDTypes are the element types the stdlib attention kernels'
// DTYPE takes.
var attentionDTypes = []tir.Elem{tir.F32, tir.BF16, tir.F16}

// checkArgs checks a lowered instance's compile-time arguments against
// the ranges their parameters take (issue 46 item 12), so that a value no
// kernel can run with fails at compile time, naming the parameter, rather
// than at run time (SPARSE_Q = 0: an integer division by zero) or not at
// all (DTYPE = i32 on the CPU device). The values checked are the kernel
// function's attributes, which hold every integer argument, defaults
// included, and the DTYPE argument. The ranges are declared here, by
// parameter name: the language has no syntax to declare a compile-time
// parameter's range next to it (it would need one, e.g.
// `SPARSE_Q: i32 in 1..2^30 = 128`, checked where arguments are bound,
// for user kernels to declare theirs).
func checkArgs(res *Result) error {
	f := res.Func()
	if f == nil {
		return nil
	}
	return checkValues(res.Kernel, res.Args, func(name string) (int64, bool) {
		v, ok := f.Attr(name).(int64)
		return v, ok
	})
}

// checkGiven is checkArgs before lowering, on the arguments given (a bad
// BLOCK_M or HEAD_DIM otherwise fails inside the kernel's source, as
// `arange(0, 0)`).
func checkGiven(kernel string, args map[string]lang.Const) error {
	return checkValues(kernel, args, func(name string) (int64, bool) {
		c, ok := args[name]
		return c.I, ok && c.Kind == lang.CInt
	})
}

// checkValues checks the integer arguments value gives and the DTYPE
// argument of kernel.
func checkValues(kernel string, args map[string]lang.Const, value func(string) (int64, bool)) error {
	check := func(r constRange) error {
		v, ok := value(r.name)
		if !ok {
			return nil
		}
		if v < r.lo || v > r.hi || r.pow2 && v&(v-1) != 0 {
			want := fmt.Sprintf("%d to %d", r.lo, r.hi)
			if r.pow2 {
				want = "a power of two from " + want
			}
			return fmt.Errorf("kernel %s: %s = %d: want %s (%s)", kernel, r.name, v, want, r.means)
		}
		return nil
	}
	for _, r := range scheduleRanges {
		if err := check(r); err != nil {
			return err
		}
	}
	if _, ok := attention.Contract(kernel); !ok {
		return nil
	}
	for _, r := range attentionRanges {
		if err := check(r); err != nil {
			return err
		}
	}
	if c, ok := args["DTYPE"]; ok && c.Kind == lang.CType {
		for _, e := range attentionDTypes {
			if c.T == e {
				return nil
			}
		}
		return fmt.Errorf("kernel %s: DTYPE = %s: want f32, bf16 or f16 (the element type of q, k, v, o)", kernel, c.T)
	}
	return nil
}
