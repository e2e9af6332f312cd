package flash

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fac-compiler/fac/compiler"
)

// check refuses options no kernel can be built or run with, before
// anything is compiled (issue 46 item 11: Target.Arch "sm_1000" reached
// llc, which aborted with a stack dump, and SMs -1 was taken): the arch
// must be one fac has a target for (compiler.CheckArch), the
// multiprocessor count and the split count in range.
func (o Options) check() error {
	if a := o.Target.Arch; a != "" {
		if _, err := compiler.CheckArch(a); err != nil {
			return fmt.Errorf("Options.Target.Arch: %w", err)
		}
	}
	if o.SMs < 0 {
		return fmt.Errorf("Options.SMs %d: want a positive multiprocessor count, or 0 for the GPU's (%d on the CPU device)", o.SMs, DefaultSMs)
	}
	if o.NumSplits < 0 || o.NumSplits > MaxSplits {
		return fmt.Errorf("Options.NumSplits %d: want 0 (auto), 1 (off) to %d", o.NumSplits, MaxSplits)
	}
	switch o.PackGQA {
	case PackGQAAuto, PackGQAOn, PackGQAOff:
	default:
		return fmt.Errorf("Options.PackGQA %d: want PackGQAAuto, PackGQAOn or PackGQAOff", int(o.PackGQA))
	}
	return o.checkFusedCombine()
}

// checkFusedCombine refuses a DecodeConsts fused_combine other than true
// or false, and true for a forward with sinks, whose merge
// (flash_fwd_combine_sinks) adds them.
func (o Options) checkFusedCombine() error {
	v, ok := o.DecodeConsts[fusedCombineConst]
	switch {
	case !ok || v == "false":
		return nil
	case v != "true":
		return fmt.Errorf("Options.DecodeConsts %s=%s: want true or false", fusedCombineConst, v)
	case o.Sinks:
		return fmt.Errorf("Options.DecodeConsts %s=true: the split kernel merges without sinks; a forward with sinks keeps flash_fwd_combine_sinks", fusedCombineConst)
	}
	return nil
}

// ArchFallback says, for a GPU arch fac knows, when it runs another
// arch's code path rather than its own (sm_89 and the archs past Hopper
// run sm_80's mma.sync path; sm_90 runs without wgmma): "" when the arch
// runs its own, or is unknown (compiler.CheckArch).
func ArchFallback(arch string) string {
	f, err := compiler.CheckArch(arch)
	if err != nil {
		return ""
	}
	return f
}

// checkDTypeDim refuses Consts that contradict the element type (DType,
// f32 by default) or the head dim a kernel is compiled for: they used to
// be overridden without a word (issue 46 item 12: Consts DTYPE=i32 with
// DType f32), or, for HEAD_DIM, to override the head dim the calls are
// checked against. Equal values are fine.
func (o Options) checkDTypeDim(dtype string, dim int) error {
	if v, ok := o.Consts["DTYPE"]; ok && strings.TrimSpace(v) != dtype {
		return fmt.Errorf("Options.Consts DTYPE=%s contradicts the element type %s (Options.DType): give it as DType", v, dtype)
	}
	if v, ok := o.Consts["HEAD_DIM"]; ok && strings.TrimSpace(v) != strconv.Itoa(dim) {
		return fmt.Errorf("Options.Consts HEAD_DIM=%s contradicts the head dim %d the kernel is compiled for", v, dim)
	}
	if v, ok := o.Consts["HEAD_DIM_V"]; ok && o.DimV != 0 && strings.TrimSpace(v) != strconv.Itoa(o.DimV) {
		return fmt.Errorf("Options.Consts HEAD_DIM_V=%s contradicts Options.DimV %d: give it once", v, o.DimV)
	}
	return nil
}

// dimV is the head dim of V and O the kernels are compiled for beside Q's
// and K's dim: Options.DimV, or Consts HEAD_DIM_V (the same setting), or
// dim. Like dim it is 1 to 256.
func (o Options) dimV(dim int) (int, error) {
	dv := o.DimV
	if v, ok := o.Consts["HEAD_DIM_V"]; ok && dv == 0 {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("Options.Consts HEAD_DIM_V=%s: want an integer head dim (or set Options.DimV)", v)
		}
		dv = n
	} else if dv == 0 {
		return dim, nil
	}
	if dv <= 0 || dv > 256 {
		return 0, fmt.Errorf("unsupported value head dim %d (Options.DimV): want 1..256, or 0 for the head dim %d", dv, dim)
	}
	return dv, nil
}
