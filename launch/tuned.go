package launch

import (
	"slices"
	"strings"

	"github.com/fac-compiler/fac/tir"
)

// TunedSet is a measured configuration of a kernel's compile-time
// arguments (Args, as the language writes their values: "128", "true")
// with the requests it was measured for (When).
type TunedSet struct {
	When TuneCond
	Args map[string]string
}

// TuneCond is the requests a tuned set is for: typed conditions on the
// code generation variant, DTYPE and HEAD_DIM, which place the set among
// the request's candidates (TunedFor), and on the request's mods, which
// the set must then hold for.
type TuneCond struct {
	// Variants are the code generation variants the set is for, as
	// codegen.TargetConfig.Variant names them ("wgmma", "wgmma-cpasync").
	Variants []string
	// DTypes and HeadDims are the DTYPE and HEAD_DIM arguments it is for;
	// empty: any.
	DTypes   []tir.Elem
	HeadDims []int
	// Mask and Score are conditions on the request's mods (the kernel's
	// mod parameters of those roles); nil: any mod. A set with a condition
	// on a role the kernel has no parameter of never applies.
	Mask, Score ModPred
}

// For reports whether the set is among the candidates of a request for
// code generation variant v, element type dt and head dim d. A head dim
// that is not a power of two takes the sets of the one it is computed in
// (the pad-dims pass: 80 and 96 run 128's tiles, shared memory and
// registers).
func (w TuneCond) For(v string, dt tir.Elem, d int) bool {
	return slices.Contains(w.Variants, v) && (len(w.DTypes) == 0 || slices.Contains(w.DTypes, dt)) &&
		(len(w.HeadDims) == 0 || slices.Contains(w.HeadDims, tir.PaddedDim(d)))
}

// ModKind is a stdlib mod by its name in the stdlib's .fa files
// ("causal", "softcap"), whatever its arguments: "prefix_lm(1024)" is
// prefix_lm. The stdlib declares its mods as values
// (stdlib/attention/mods.go).
type ModKind string

// ModInfo is what a tuned set's mod condition sees of a request's mod:
// the mod it names, or the kernel's default when it names none.
type ModInfo struct {
	// Kind is the stdlib mod; "" for a user's own mod (which no tuned
	// set's measurements cover).
	Kind ModKind
}

// ModPred is a condition on a request's mod.
type ModPred interface {
	Holds(m ModInfo) bool
}

// ModIs holds for the stdlib mods it lists, never for a user's own.
type ModIs []ModKind

// Holds reports whether m is one of the listed stdlib mods.
func (k ModIs) Holds(m ModInfo) bool { return m.Kind != "" && slices.Contains(k, m.Kind) }

// ModFunc is a ModPred written as a function.
type ModFunc func(m ModInfo) bool

// Holds is f(m).
func (f ModFunc) Holds(m ModInfo) bool { return f(m) }

// TuneRequest is what the tuned sets are matched against: a compile
// request for a GPU target.
type TuneRequest struct {
	// Variants are the code generation variants whose sets the request
	// takes, in order of preference (codegen.TargetConfig.TuneVariants:
	// its own, then each one it extends).
	Variants []string
	// DType and HeadDim are the request's DTYPE and HEAD_DIM arguments;
	// tir.Invalid and 0 when it gives none.
	DType   tir.Elem
	HeadDim int
	// HeadDimV is the request's HEAD_DIM_V argument (V's and O's head
	// dim); 0 when it gives none (the kernel then takes HEAD_DIM's).
	HeadDimV int
	// Mods are the kernel's mod parameters' mods, by role ("mask",
	// "score").
	Mods map[string]ModInfo
	// Args are the compile-time arguments the request gives, as text.
	Args map[string]string
	// Declared reports whether the kernel declares a compile-time
	// parameter; nil: all are.
	Declared func(name string) bool
}

// TunedFor is the tuned set a request gets: for the first of its variants
// that some set is for (with its DTYPE and HEAD_DIM), the first of those
// sets that the request leaves whole, less the arguments it gives; nil
// when none of them fits (the next measured set, never a shorter
// variant's, is the fallback) or no set is for the request. A request
// breaks a set by giving one of its arguments another value (unless
// TunedAlone names it: a tile shape and its warp count go together, the
// pipeline's depth does not), by a mod that the set's conditions do not
// hold for, or by a kernel that does not declare one of its arguments.
// Every set was measured with V's head dim equal to Q's and K's: a request
// for another HEAD_DIM_V (padded: 96 beside 128 is one) gets none (the kernel's defaults, which fit any
// pair, where a set's buffers and registers were sized for one head dim).
func (c *Contract) TunedFor(r TuneRequest) map[string]string {
	if r.HeadDimV != 0 && tir.PaddedDim(r.HeadDimV) != tir.PaddedDim(r.HeadDim) {
		return nil
	}
	for _, v := range r.Variants {
		candidates := false
		for _, s := range c.Tuned {
			if !s.When.For(v, r.DType, r.HeadDim) {
				continue
			}
			candidates = true
			if got, ok := c.fit(s, r); ok {
				return got
			}
		}
		if candidates {
			return nil
		}
	}
	return nil
}

// fit is s's arguments less those r gives; false when r breaks s.
func (c *Contract) fit(s TunedSet, r TuneRequest) (map[string]string, bool) {
	for role, p := range map[string]ModPred{"mask": s.When.Mask, "score": s.When.Score} {
		if p == nil {
			continue
		}
		if m, ok := r.Mods[role]; !ok || !p.Holds(m) {
			return nil, false
		}
	}
	out := map[string]string{}
	for k, v := range s.Args {
		if r.Declared != nil && !r.Declared(k) {
			return nil, false
		}
		g, ok := r.Args[k]
		switch {
		case !ok:
			out[k] = v
		case strings.TrimSpace(g) != v && !slices.Contains(c.TunedAlone, k):
			return nil, false
		}
	}
	return out, true
}
