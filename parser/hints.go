package parser

import (
	"errors"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// Python habits that are syntax errors in fac, each with what to write
// instead (issue 46 item 18). The parser reports where it stopped; hint
// reads the tokens around that place and, when they show one of these,
// replaces participle's "unexpected X (expected Y)", which names no fix:
//
//	0 <= d < 64          comparisons do not chain: 0 <= d && d < 64
//	return a = b         = assigns: a == b
//	x += 1               no compound assignment: x = x + 1
//	torch.where(c, a, b) no modules or attributes: select(c, a, b)
//	.5                   a float needs a digit before the point: 0.5

// pythonAttrs says what to write for torch.NAME (or math., F., tl., np.).
var pythonAttrs = map[string]string{
	"where":        "select(cond, a, b) (or where(cond, a, b))",
	"exp":          "exp(x)",
	"exp2":         "exp2(x)",
	"log":          "log(x)",
	"log2":         "log2(x)",
	"tanh":         "tanh(x)",
	"sqrt":         "sqrt(x)",
	"abs":          "abs(x)",
	"maximum":      "max(a, b)",
	"minimum":      "min(a, b)",
	"max":          "max(a, b), or max(x, axis=N)",
	"min":          "min(a, b), or min(x, axis=N)",
	"sum":          "sum(x, axis=N)",
	"zeros":        "zeros([M, N], f32)",
	"full":         "full([M, N], value, f32)",
	"arange":       "arange(start, end)",
	"floor_divide": "/ (it truncates toward zero; see docs/language.md, From FlexAttention to fac)",
	"float32":      "f32",
	"float16":      "f16",
	"bfloat16":     "bf16",
	"int32":        "i32",
	"bool":         "bool",
	"inf":          "inf (-inf for a masked-out score)",
	"shape":        "batch, num_heads, seqlen_q or seqlen_k",
}

// hintToken is a token of the source with its kind.
type hintToken struct {
	lexer.Token
	newlineBefore bool // whitespace with a line break comes between it and the previous token
}

// hintTokens lexes src into its significant tokens, noting line breaks;
// it stops at a lexical error.
func hintTokens(src string) []hintToken {
	var out []hintToken
	l, err := lex.LexString("", src)
	if err != nil {
		return nil
	}
	nl := false
	for len(out) < 1<<17 {
		t, err := l.Next()
		if err != nil || t.EOF() {
			break
		}
		switch t.Type {
		case tokSpace:
			nl = nl || strings.Contains(t.Value, "\n")
			continue
		case tokComment:
			continue
		}
		out = append(out, hintToken{Token: t, newlineBefore: nl})
		nl = false
	}
	return out
}

var comparisons = map[string]bool{"<": true, "<=": true, ">": true, ">=": true, "==": true, "!=": true}

// hint explains a syntax error at pos that shows a Python habit, or
// returns "". The caller puts it after "unexpected X: ".
func hint(src string, pos lexer.Position, perr participle.Error) string {
	if pos.Offset < 0 || pos.Offset > len(src) {
		return ""
	}
	var lerr *lexer.Error
	if errors.As(perr, &lerr) {
		if pos.Offset < len(src) && src[pos.Offset] == '.' {
			return dotHint(src, pos.Offset)
		}
		return ""
	}
	var uerr *participle.UnexpectedTokenError
	if !errors.As(perr, &uerr) || uerr.Unexpected.EOF() {
		return ""
	}
	toks := hintTokens(src)
	at := -1
	for i, t := range toks {
		if t.Pos.Offset == pos.Offset {
			at = i
			break
		}
	}
	if at <= 0 {
		return ""
	}
	t, prev := toks[at], toks[at-1]
	switch {
	case comparisons[t.Value]:
		// Is there a comparison before it in the same expression?
		mid := operandBefore(toks, at)
		if mid <= 0 || mid == at || !comparisons[toks[mid-1].Value] {
			return ""
		}
		left := operandBefore(toks, mid-1)
		right := operandAfter(toks, at)
		if left < 0 || right <= at+1 {
			return "comparisons do not chain (Python's a < b < c): join two comparisons with &&, as a < b && b < c"
		}
		a, op1, b := text(src, toks, left, mid-1), toks[mid-1].Value, text(src, toks, mid, at)
		c := text(src, toks, at+1, right)
		return "comparisons do not chain (Python's a < b < c): write " + a + " " + op1 + " " + b + " && " + b + " " + t.Value + " " + c
	case t.Value == "=" && strings.Contains("+-*/%", prev.Value) && prev.Pos.Offset+1 == t.Pos.Offset:
		return compound(toks, at-1)
	case strings.Contains("+-*/%", t.Value) && at+1 < len(toks) && toks[at+1].Value == "=" && t.Pos.Offset+1 == toks[at+1].Pos.Offset:
		return compound(toks, at)
	case t.Value == "=" && endsOperand(prev.Token):
		left := operandBefore(toks, at)
		right := operandAfter(toks, at)
		if left < 0 || right <= at+1 {
			return "= assigns (a var); to compare, write =="
		}
		return "= assigns (a var); to compare, write " + text(src, toks, left, at) + " == " + text(src, toks, at+1, right)
	}
	return ""
}

// compound explains x += 1, the operator being toks[op].
func compound(toks []hintToken, op int) string {
	name := "x"
	if op >= 1 && toks[op-1].Type == tokIdent {
		name = toks[op-1].Value
	}
	sym := toks[op].Value
	return "fac has no compound assignment (" + sym + "=): write " + name + " = " + name + " " + sym + " ..."
}

// dotHint explains a '.' at offset, which the lexer refuses: an attribute
// (torch.where) or a float without a leading digit (.5).
func dotHint(src string, offset int) string {
	start := offset
	for start > 0 && isNameByte(src[start-1]) {
		start--
	}
	end := offset + 1
	for end < len(src) && isNameByte(src[end]) {
		end++
	}
	obj, attr := src[start:offset], src[offset+1:end]
	switch {
	case obj == "" && attr != "" && attr[0] >= '0' && attr[0] <= '9':
		return "a float needs a digit before the point: write 0." + attr
	case obj == "" || attr == "" || obj[0] >= '0' && obj[0] <= '9':
		return ""
	}
	msg := "fac has no modules or attributes (" + obj + "." + attr + ")"
	if w, ok := pythonAttrs[attr]; ok {
		return msg + ": write " + w
	}
	return msg + ": the built-in functions have plain names (select, exp, max, ...; docs/language.md, Built-in functions)"
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// text is the source from toks[i] to the end of toks[j-1].
func text(src string, toks []hintToken, i, j int) string {
	last := toks[j-1]
	return src[toks[i].Pos.Offset : last.Pos.Offset+len(last.Value)]
}

// boundary reports whether t ends an operand of a comparison: what binds
// looser than a comparison, or starts or ends a statement.
func boundary(t hintToken) bool {
	switch t.Value {
	case "&&", "||", ",", "=", "{", "}", ";", ":":
		return true
	}
	return t.Type == tokKeyword && t.Value != "true" && t.Value != "false" && t.Value != "None" || comparisons[t.Value]
}

// operandBefore returns the index of the first token of the operand that
// ends just before toks[at] (parentheses balanced, stopping at a
// boundary or a line break outside parentheses), or -1 when there is none.
func operandBefore(toks []hintToken, at int) int {
	depth := 0
	i := at - 1
	for ; i >= 0; i-- {
		t := toks[i]
		switch t.Value {
		case ")", "]":
			depth++
			continue
		case "(", "[":
			if depth == 0 {
				return nonEmpty(i+1, at)
			}
			depth--
			continue
		}
		if depth == 0 && boundary(t) {
			return nonEmpty(i+1, at)
		}
		if depth == 0 && toks[i].newlineBefore && i > 0 && endsOperand(toks[i-1].Token) {
			return nonEmpty(i, at) // the operand starts a line after a statement
		}
	}
	return nonEmpty(0, at)
}

// operandAfter returns the index just past the operand that starts at
// toks[at+1], as operandBefore does backwards.
func operandAfter(toks []hintToken, at int) int {
	depth := 0
	i := at + 1
	for ; i < len(toks); i++ {
		t := toks[i]
		if depth == 0 && i > at+1 && t.newlineBefore {
			return i
		}
		switch t.Value {
		case "(", "[":
			depth++
			continue
		case ")", "]":
			if depth == 0 {
				return i
			}
			depth--
			continue
		}
		if depth == 0 && boundary(t) {
			return i
		}
	}
	return i
}

func nonEmpty(i, at int) int {
	if i >= at {
		return -1
	}
	return i
}
