package lang

import (
	"fmt"
	"math"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/fac-compiler/fac/tir"
)

// Limits on what the front end accepts. They keep compile time and memory
// linear in the input and bounded, whatever the input; real kernels and
// mods stay far below them. docs/language.md lists them for users.
const (
	// MaxSourceSize is the largest source file, in bytes (1 MiB; the
	// stdlib's largest file is under 5 KB).
	MaxSourceSize = 1 << 20
	// MaxTokens is the most tokens one file may have. Parsing costs about
	// a kilobyte and tens of microseconds per token, so this, not the
	// byte size, bounds a file dense with tokens (flash_fwd has under 900).
	MaxTokens = 1 << 17
	// MaxNesting bounds how deep parentheses, brackets, blocks, prefix
	// operators and else-if arms nest. The parser and the checker recurse
	// on nesting; the bound keeps them far from the stack limit.
	MaxNesting = 100
	// MaxExprOps is the most operators one expression may have.
	MaxExprOps = 10000
	// MaxRefDepth bounds chains of mods calling mods and of constants
	// using constants. Checking a declaration lowers the mods it calls
	// anew, so without a bound a chain of n mods takes time n^2 to check.
	MaxRefDepth = 100
	// MaxFnCalls is the most function calls one kernel or mod may expand
	// (functions are inlined where they are called, so a chain of
	// functions each calling the next twice would otherwise expand
	// exponentially). The stdlib kernels expand fewer than ten.
	MaxFnCalls = 1000
	// MaxTileElements is the most elements a tile may have: 65536 32-bit
	// values fill the 64K-register file of an SM, the most registers one
	// CTA can hold (256 KiB, more than the 227 KiB of shared memory a CTA
	// can have). FlashAttention's largest tiles are 128 x 256.
	MaxTileElements = 1 << 16
)

// checkTile refuses a tile shape with more elements than l.maxTile: such a
// tile cannot live in one CTA, and code generation would try to unroll it.
func (l *lowerer) checkTile(shape []int, pos lexer.Position, what string) {
	n := 1
	for _, d := range shape {
		if d > 0 && n > math.MaxInt/d {
			n = math.MaxInt // saturate: only the comparison matters
			break
		}
		n *= d
	}
	if n <= l.maxTile {
		return
	}
	count := fmt.Sprint(n)
	if n == math.MaxInt {
		count = "too many"
	}
	l.fail(pos, "%s makes a tile of %s elements (%s); a tile may have at most %d, what the registers of one CTA can hold (e.g. [256, 256])",
		what, count, tir.ShapeString(shape), l.maxTile)
}

// checkModDepth refuses a mod call nested deeper than MaxRefDepth. A
// chain that deep which calls m again, with compile-time arguments it made
// rather than was given (grow(n + 1) in grow's body), is recursion that
// does not end: it is reported as such. Mods nested in the arguments
// (and_masks(a, and_masks(b, ...))) are only too deep.
func (l *lowerer) checkModDepth(m *ModInst, pos lexer.Position) {
	if l.modDepth < MaxRefDepth {
		return
	}
	var same []*ModInst
	for _, y := range l.modInsts {
		if y.Decl == m.Decl {
			same = append(same, y)
		}
	}
	if len(same) > 0 && !nestedIn(same[0], m.String()) {
		chain := same[0].String()
		if len(same) > 1 {
			chain += " -> " + same[1].String()
		}
		l.fail(pos, "%s calls itself (%s -> ... -> %s), with new compile-time arguments each time; recursion is not allowed (at most %d mods may nest)",
			m.Name(), chain, m.String(), MaxRefDepth)
	}
	l.fail(pos, "mods call each other too deep: calling %s here makes a chain of %d (%s -> ... -> %s), and at most %d mods may nest",
		m.Name(), l.modDepth+1, l.modInsts[0].Name(), m.Name(), MaxRefDepth)
}

// nestedIn reports whether the instance printed as inst is one of m's
// compile-time arguments, or nested in one.
func nestedIn(m *ModInst, inst string) bool {
	for _, a := range m.Args {
		if a.Kind == CMod && a.Mod != nil && (a.Mod.String() == inst || nestedIn(a.Mod, inst)) {
			return true
		}
	}
	return false
}
