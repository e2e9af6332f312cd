// Package codegen lowers verified, fully inlined tile-IR kernels to LLVM IR
// for the NVPTX back end (llc), in the manner of Triton's TTGIR → LLVM
// stage: a layout-assignment phase gives every tensor value a distributed
// layout (blocked, mma accumulator, mma operand, slice), tensors become
// per-thread lists of LLVM scalars, and layout changes go through shared
// memory only where registers cannot be re-indexed.
//
// The work is split like wazevo's backend: codegen/core is the
// target-independent lowering, codegen/sm80 and codegen/sm90 are the
// targets (core.Target), and this package picks the target from
// Options.Target and runs its phase table (Phases). See docs/codegen.md.
package codegen

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/llir/llvm/ir"

	"github.com/fac-compiler/fac/codegen/async"
	"github.com/fac-compiler/fac/codegen/core"
	"github.com/fac-compiler/fac/tir"
)

// Options controls code generation.
type Options struct {
	// Target is the GPU target: its arch, sm_80 or newer (sm_80, sm_86,
	// sm_89, sm_90, sm_90a, ...; empty means sm_80), picks the target
	// package (see Target), and its switches shape the code (wgmma, TMA,
	// ...; the zero values are the defaults).
	Target TargetConfig
	// NumWarps is the number of warps per CTA; 0 takes the kernel's
	// num_warps attribute, else 4.
	NumWarps int
	// PrintAfter names a phase (see PhaseNames) after which the kernel is
	// printed to Out, or "all" for after every phase: the tile IR
	// annotated with layouts and staged loads, and after lower-llvm the
	// LLVM IR.
	PrintAfter string
	// Out receives PrintAfter's output; nil means os.Stderr.
	Out io.Writer
	// Disable names optional phases to skip. Naming a required or unknown
	// phase is an error.
	Disable map[string]bool
}

// ParamKind says how the runtime passes one kernel argument.
type ParamKind = core.ParamKind

const (
	ParamU64       = core.ParamU64       // a device pointer (ptr<T>)
	ParamI32       = core.ParamI32       // i32, and i1 as 0/1
	ParamI64       = core.ParamI64       // i64
	ParamF32       = core.ParamF32       // f32, and f16/bf16 scalars (rounded in the kernel)
	ParamTensorMap = core.ParamTensorMap // a CUtensorMap by value (TMA)
)

// Param is one kernel parameter, in order.
type Param = core.Param

// Result is a lowered kernel.
type Result struct {
	LL string // LLVM IR text (LLVM 14 syntax, typed pointers), no datalayout
	// Func is the kernel's function in LL, for tools that run the IR
	// without parsing LL again (codegen/simt).
	Func        *ir.Func
	Name        string // the PTX .entry name
	Threads     int    // threads per CTA (block x dimension); blockDim = (Threads, 1, 1)
	SharedBytes int    // dynamic shared memory to request at launch
	Params      []Param
	// Conversions counts layout conversions through shared memory emitted
	// (a cost indicator; register re-indexing is not counted).
	Conversions int
	// CoalescedStores counts stored tiles converted through shared memory
	// into 16-byte vectors first (the attention epilogues; not counted in
	// Conversions).
	CoalescedStores int
	// Target is the target package that lowered the kernel ("sm80", "sm90").
	Target string
	// Phases are the phases that ran, with their times.
	Phases []PhaseTime
	// Notes are the target's remarks on its choices (e.g. which staged
	// loads stayed on cp.async instead of TMA, and why).
	Notes []string
}

// PhaseTime is how long one phase took.
type PhaseTime struct {
	Name string
	Took time.Duration
}

// scheduleRanges are the integer schedule arguments the code generator
// reads, with the values it takes (lo's meaning for the error).
var scheduleRanges = []struct {
	name    string
	lo, hi  int64
	loMeans string
}{
	{"num_stages", 1, async.MaxStages, "no prefetch"},
	{"exp2_poly", 0, core.Exp2PolyMax, "every exp2 on the MUFU"},
	{core.CTAsPerSMArg, 1, core.MaxCTAsPerSM, "ptxas's choice"},
}

// Lower lowers kernel of m to LLVM IR: it picks the target for opts.Target
// and runs the target's phases in order. m must be verified and fully
// inlined (no call ops); tensor shapes must be powers of two.
func Lower(m *tir.Module, kernel string, opts Options) (*Result, error) {
	f := m.Func(kernel)
	if f == nil {
		return nil, fmt.Errorf("codegen: no function @%s in module", kernel)
	}
	if !f.Kernel {
		return nil, fmt.Errorf("codegen: @%s is a func, not a kernel", kernel)
	}
	if opts.Target.Arch == "" {
		opts.Target.Arch = "sm_80"
	}
	tg, err := targetFor(opts.Target)
	if err != nil {
		return nil, err
	}
	nw := opts.NumWarps
	if nw == 0 {
		if v, ok := f.Attr("num_warps").(int64); ok {
			nw = int(v)
		} else {
			nw = 4
		}
	}
	if nw <= 0 || nw&(nw-1) != 0 || nw > 32 {
		return nil, fmt.Errorf("codegen: num_warps = %d: want a power of two from 1 to 32", nw)
	}
	for _, r := range scheduleRanges {
		if v, ok := f.Attr(r.name).(int64); ok && (v < r.lo || v > r.hi) {
			return nil, fmt.Errorf("codegen: %s = %d: want %d (%s) to %d", r.name, v, r.lo, r.loMeans, r.hi)
		}
	}
	phases := tg.t.Phases()
	if err := checkPhaseOptions(phases, opts); err != nil {
		return nil, err
	}
	out := opts.Out
	if out == nil {
		out = os.Stderr
	}
	// The stores' exchange through shared memory (coalesceStore) is an
	// optimization: where it would take the kernel past the shared memory a
	// CTA may have (a persistent kernel, whose exchange cannot overlap the
	// tiles, at three stages), the kernel stores from registers instead.
	var printed bytes.Buffer
	res, err := lowerOnce(f, kernel, opts, tg, nw, true, &printed)
	if err == nil && res.CoalescedStores > 0 && res.SharedBytes > tg.maxShared {
		// A fresh target: a target keeps per-kernel state (its mbarriers,
		// tensor maps, layout bases) while it lowers.
		if tg, err = targetFor(opts.Target); err != nil {
			return nil, err
		}
		var again bytes.Buffer
		direct, err2 := lowerOnce(f, kernel, opts, tg, nw, false, &again)
		if err2 == nil && direct.SharedBytes <= tg.maxShared {
			direct.Notes = append(direct.Notes, fmt.Sprintf("stores from registers: through shared memory into 16-byte vectors the kernel would need %d bytes of shared memory, over the %d a CTA may have on %s", res.SharedBytes, tg.maxShared, opts.Target.Arch))
			res, printed = direct, again
		}
	}
	if _, werr := out.Write(printed.Bytes()); werr != nil && err == nil {
		err = werr
	}
	return res, err
}

// lowerOnce runs the target's phases on f, printing what opts asks for to
// out; coalesce allows stores through shared memory (coalesceStore).
func lowerOnce(f *tir.Func, kernel string, opts Options, tg target, nw int, coalesce bool, out io.Writer) (*Result, error) {
	l := core.NewLowerer(f, opts.Target.Arch, tg.t, nw)
	l.SetCoalesceStores(coalesce)
	var times []PhaseTime
	for _, p := range tg.t.Phases() {
		if opts.Disable[p.Name] {
			continue
		}
		start := time.Now()
		err := l.Run(p)
		times = append(times, PhaseTime{p.Name, time.Since(start)})
		if err != nil {
			return nil, fmt.Errorf("codegen @%s: %v", kernel, err)
		}
		if opts.PrintAfter == "all" || opts.PrintAfter == p.Name {
			fmt.Fprintf(out, "// ---- @%s %s (%s) after %s ----\n", kernel, opts.Target.Arch, tg.name, p.Name)
			if err := l.Print(out); err != nil {
				return nil, fmt.Errorf("codegen @%s: printing after %s: %v", kernel, p.Name, err)
			}
		}
	}
	return &Result{
		LL:              l.Text(),
		Func:            l.LLFunc(),
		Name:            l.EntryName(),
		Threads:         l.Threads(),
		SharedBytes:     l.SharedBytes(),
		Params:          l.Params(),
		Conversions:     l.Conversions(),
		CoalescedStores: l.CoalescedStores(),
		Target:          tg.name,
		Phases:          times,
		Notes:           l.Notes(),
	}, nil
}
