// Package core is the target-independent part of codegen: layouts and
// their assignment, the lowering of tile IR to LLVM IR (elementwise ops,
// reductions, global memory, layout conversions through shared memory,
// control flow, the FMA dot) and the phases every target shares.
//
// One kernel's lowering (Lowerer) goes through phases that each own a
// part of it: assign-layouts the Assignment (assign.go), the planning
// phases the Plan (plan.go: staged tiles, shared memory, added
// parameters), lower-llvm the Emitter (emit.go, and a file per family of
// ops). What depends on the GPU generation (tensor-core dots, operand
// staging) is asked of a Target (codegen/sm80, codegen/sm90), which
// imports this package; asynchronous machinery across a kernel's
// structure (pipelined loops, a producer warpgroup, deferred reductions:
// codegen/async) plugs in through the hooks of target.go. This package
// imports neither. See docs/codegen.md.
package core

import (
	"fmt"
	"sync/atomic"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/tir"
)

// ParamKind says how the runtime passes one kernel argument.
type ParamKind string

const (
	ParamU64       ParamKind = "u64"  // a device pointer (ptr<T>)
	ParamI32       ParamKind = "i32"  // i32, and i1 as 0/1
	ParamI64       ParamKind = "i64"  // i64
	ParamF32       ParamKind = "f32"  // f32, and f16/bf16 scalars (rounded in the kernel)
	ParamTensorMap ParamKind = "tmap" // a CUtensorMap by value (TMA)
)

// Param is one kernel parameter, in order.
type Param struct {
	Name string   // tile-IR name, e.g. "q" or "mask.doc"
	Type tir.Type // tile-IR type
	Kind ParamKind
	TMA  *artifact.TMA // ParamTensorMap: what the runtime encodes
}

// lateConversions counts conversions the demand analysis missed.
var lateConversions atomic.Int64

// LateConversions is the number of layout conversions emitted so far (in
// this process) that the assignment's demand pass did not announce; tests
// check it stays 0.
func LateConversions() int64 { return lateConversions.Load() }

type lowerError struct{ msg string }

func (e lowerError) Error() string { return e.msg }

// Fail aborts the lowering of the kernel with an error; the phase driver
// (Run) turns it into the error it returns.
func Fail(format string, args ...any) {
	panic(lowerError{fmt.Sprintf(format, args...)})
}

// kernel is what every phase reads: the kernel and its target, the warps
// of its program, facts about its values (axis.go), the layouts on shapes
// (Lin), the options and the notes. Lowerer, Assignment, Plan and Emitter
// embed it.
type kernel struct {
	f      *tir.Func
	nw     int
	arch   string
	target Target
	lins   map[string]*Linear
	// axes and affines memoize the facts about values (axis.go).
	axes       map[*tir.Value]axisInfo
	affines    map[*tir.Value][]int64
	noCoalesce bool     // SetCoalesceStores(false)
	notes      []string // remarks on code generation choices (Note)
}

// Lowerer is one kernel's lowering: the kernel, and what the phases decided
// so far, one part each, which the later phases read and the target's hooks
// are handed:
//
//	Assignment  every value's layouts              assign-layouts (Layouts)
//	Plan        the staged loads, shared memory    select-async, plan-async,
//	            and added parameters               pipeline-loads, tma-loads (Plan)
//	Emitter     the LLVM module being emitted      lower-llvm (embedded: its helpers)
//
// A part is nil until its phase runs (the Plan is there from the start:
// the target's first phases select the staged loads). Print shows what
// the parts hold.
type Lowerer struct {
	*kernel
	layouts *Assignment
	plan    *Plan
	*Emitter
}

// NewLowerer starts the lowering of kernel f for arch on target with nw
// warps per CTA. f must be verified; the phases do the rest.
func NewLowerer(f *tir.Func, arch string, t Target, nw int) *Lowerer {
	k := &kernel{f: f, nw: nw, arch: arch, target: t, lins: map[string]*Linear{},
		axes: map[*tir.Value]axisInfo{}, affines: map[*tir.Value][]int64{}}
	l := &Lowerer{kernel: k}
	l.plan = newPlan(l)
	return l
}

// Target is the GPU target lowering the kernel.
func (k *kernel) Target() Target { return k.target }

// Func is the kernel being lowered.
func (k *kernel) Func() *tir.Func { return k.f }

// Arch is the GPU arch lowered for, e.g. "sm_90a".
func (k *kernel) Arch() string { return k.arch }

// NumWarps is the number of warps per CTA.
func (k *kernel) NumWarps() int { return k.nw }

// SetCoalesceStores allows (the default) or forbids converting stored
// tiles into 16-byte vectors through shared memory (coalesceStore).
func (k *kernel) SetCoalesceStores(on bool) { k.noCoalesce = !on }

// CoalesceStores reports whether stored tiles may go through shared
// memory (SetCoalesceStores): a target's bulk tensor stores do too.
func (k *kernel) CoalesceStores() bool { return !k.noCoalesce }

// Lin is lay on shape (memoized), checked against Linear's invariants.
func (k *kernel) Lin(lay Layout, shape []int) *Linear {
	key := lay.String() + fmt.Sprint(shape)
	if x, ok := k.lins[key]; ok {
		return x
	}
	x := lay.Linear(shape, k.nw)
	if err := x.Check(); err != nil {
		Fail("internal error: layout %s on %v: %v", lay, shape, err)
	}
	k.lins[key] = x
	return x
}

// Note records a remark about a code generation choice (why a load is not
// on TMA, ...), which fac compile -v prints.
func (k *kernel) Note(s string) { k.notes = append(k.notes, s) }

// Notes are the remarks recorded so far.
func (k *kernel) Notes() []string { return k.notes }

// Layouts is what assign-layouts decided (nil before it runs).
func (l *Lowerer) Layouts() *Assignment { return l.layouts }

// Plan is the plan of staged loads and shared memory.
func (l *Lowerer) Plan() *Plan { return l.plan }

// Threads is the CTA's size: num_warps warps, or what the target's
// program takes (ProgramTarget.Threads: a producer warpgroup more).
func (l *Lowerer) Threads() int {
	if t, ok := l.target.(ProgramTarget); ok {
		if n := t.Threads(l); n > 0 {
			return n
		}
	}
	return l.nw * 32
}

// CTAsPerSM is the CTAs a multiprocessor ptxas is asked to fit: the
// target's experiment (CTAsTarget, ctas-per-sm) where it sets one, else
// the kernel's ctas_per_sm argument; 0 or 1 leave ptxas its choice. A
// program that counts on one (ProgramTarget.OneCTA: a producer
// warpgroup's setmaxnreg) keeps one (text).
func (l *Lowerer) CTAsPerSM() int {
	if t, ok := l.target.(CTAsTarget); ok && t.CTAsPerSM() > 1 {
		return t.CTAsPerSM()
	}
	n, _ := l.f.Attr(CTAsPerSMArg).(int64)
	return int(n)
}
