package parser

import (
	"fmt"
	"io"
	"os"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/fac-compiler/fac/lang"
)

// ReadFile reads a source file for the compiler. It reads at most one byte
// more than lang.MaxSourceSize, so a huge file or an endless stream
// (/dev/zero, a pipe) is refused at once instead of filling memory.
func ReadFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > lang.MaxSourceSize {
		return "", tooLarge(path)
	}
	b, err := io.ReadAll(io.LimitReader(f, lang.MaxSourceSize+1))
	if err != nil {
		return "", err
	}
	if len(b) > lang.MaxSourceSize {
		return "", tooLarge(path)
	}
	return string(b), nil
}

func tooLarge(filename string) error {
	return &lang.Error{Pos: lexer.Position{Filename: filename},
		Msg: fmt.Sprintf("source file is larger than %d MiB, the limit for one file", lang.MaxSourceSize>>20)}
}

// Token types of lex, for screen.
var (
	tokComment = lex.Symbols()["Comment"]
	tokSpace   = lex.Symbols()["Whitespace"]
	tokIdent   = lex.Symbols()["Ident"]
	tokInt     = lex.Symbols()["Int"]
	tokFloat   = lex.Symbols()["Float"]
	tokKeyword = lex.Symbols()["Keyword"]
)

// endsOperand reports whether t can end an operand: after it, an operator
// may follow (and so `//` is Python's floor division, not a comment, and
// `-` is binary).
func endsOperand(t lexer.Token) bool {
	switch t.Type {
	case tokIdent, tokInt, tokFloat:
		return true
	case tokKeyword:
		return t.Value == "true" || t.Value == "false"
	}
	return t.Value == ")" || t.Value == "]"
}

// startsOperand reports whether t can be (the first token of) an operand
// or one of its suffixes; prefix operators stay applied across these.
func startsOperand(t lexer.Token) bool {
	switch t.Type {
	case tokIdent, tokInt, tokFloat:
		return true
	case tokKeyword:
		return t.Value == "true" || t.Value == "false" || t.Value == "None"
	}
	return false
}

// notOperators are the operators of Python (and FlexAttention mods) that
// fac does not have, with what to write instead. and, or and not are
// names to the lexer; screen refuses them only where Python would read
// them as operators (and, or right after an operand on its line; not right
// before one).
var notOperators = map[string]string{
	"and": "and is not an operator: write && (it works elementwise on tiles)",
	"or":  "or is not an operator: write || (it works elementwise on tiles)",
	"not": "not is not an operator: write ! (it works elementwise on tiles)",
	"**":  "** is not an operator: write x * x, or exp2(y * log2(x)) for x > 0",
	"&":   "& is not an operator: for bools write && (it works elementwise on tiles, like & on bool tensors); fac has no bitwise operators",
	"|":   "| is not an operator: for bools write || (it works elementwise on tiles, like | on bool tensors); fac has no bitwise operators",
	"~":   "~ is not an operator: for bools write ! (it works elementwise on tiles, like ~ on bool tensors); fac has no bitwise operators",
	"^":   "^ is not an operator: for bools write != (exclusive or, elementwise on tiles); fac has no bitwise operators",
}

// floorDivMsg explains a `//` right after an operand: in Python (and so in
// a FlexAttention mod) it is floor division; read as a comment, it would
// silently drop the rest of the line.
const floorDivMsg = "// is not an operator (Python's floor division): write / (it truncates toward zero, " +
	"the same as // when a >= 0 and b > 0; for b > 0 and any a, floor division is " +
	"select(a < 0, (a - b + 1) / b, a / b)); a comment after an operand needs a ; before it or a line of its own"

// screen lexes src before participle parses it. It returns a hard error
// when src breaks a limit the parser relies on (too many tokens, nesting
// too deep: participle recurses on nesting and would overflow the stack),
// and otherwise the first slip, if any: a Python operator fac does not have,
// or `//` right after an operand. A lexical error ends the screen; the
// parser reports it.
func screen(filename, src string) (slip *lang.Error, hard error) {
	toks, slip := significant(filename, src)
	// Whichever limit is broken first in the file is reported.
	if t, ok := tooDeepAt(toks, lang.MaxNesting); ok {
		return nil, &lang.Error{Pos: t.Pos, Src: src,
			Msg: fmt.Sprintf("nesting too deep: more than %d levels of parentheses, brackets, blocks, prefix operators (-x, !x) and else if (the limit); split the expression with let", lang.MaxNesting)}
	}
	if len(toks) > lang.MaxTokens {
		t := toks[lang.MaxTokens]
		return nil, &lang.Error{Pos: t.Pos, Src: src,
			Msg: fmt.Sprintf("more than %d tokens in one file (the limit); split it into several files", lang.MaxTokens)}
	}
	return slip, nil
}

// significant lexes src into its tokens without comments and whitespace,
// stopping after lang.MaxTokens+1 or at a lexical error, and finds the first
// slip on the way.
func significant(filename, src string) ([]lexer.Token, *lang.Error) {
	var toks []lexer.Token
	var slip *lang.Error
	l, err := lex.LexString(filename, src)
	if err != nil {
		return nil, nil
	}
	for len(toks) <= lang.MaxTokens {
		t, err := l.Next()
		if err != nil || t.EOF() {
			break
		}
		switch {
		case t.Type == tokSpace:
			continue
		case t.Type == tokComment:
			if slip == nil && len(toks) > 0 {
				if prev := toks[len(toks)-1]; prev.Pos.Line == t.Pos.Line && endsOperand(prev) {
					slip = &lang.Error{Pos: t.Pos, Msg: floorDivMsg, Src: src}
				}
			}
			continue
		}
		if slip == nil {
			if op, at := pythonOperator(toks, t); op != "" {
				slip = &lang.Error{Pos: at, Msg: notOperators[op], Src: src}
			}
		}
		toks = append(toks, t)
	}
	return toks, slip
}

// pythonOperator says whether t, after the tokens before it, shows a
// Python operator fac does not have: which one, and where it starts.
func pythonOperator(before []lexer.Token, t lexer.Token) (string, lexer.Position) {
	n := len(before)
	tokenAt := func(i int) lexer.Token { // before[i], or nothing
		if i < 0 {
			return lexer.Token{}
		}
		return before[i]
	}
	prev := tokenAt(n - 1)
	switch {
	case t.Value == "&" || t.Value == "|" || t.Value == "~" || t.Value == "^":
		return t.Value, t.Pos
	case t.Type == tokIdent && (t.Value == "and" || t.Value == "or") && n > 0 && endsOperand(prev) && prev.Pos.Line == t.Pos.Line:
		return t.Value, t.Pos
	case t.Value == "*" && prev.Value == "*" && prev.Pos.Offset+1 == t.Pos.Offset:
		return "**", prev.Pos
	case prev.Type == tokIdent && prev.Value == "not" && prev.Pos.Line == t.Pos.Line &&
		!(n > 1 && endsOperand(tokenAt(n-2))) && (startsOperand(t) || t.Value == "(" || t.Value == "!"):
		// `not x` where an operand is due: no fac, whatever not names.
		return "not", prev.Pos
	}
	return "", lexer.Position{}
}

// tooDeepAt finds the first token at which nesting exceeds limit. It
// counts what makes the parser and checker recurse: each open (, [ and {,
// each prefix - or ! still being applied (they nest: - - x), and each else
// if of a chain (an else-if is an if nested in the else).
func tooDeepAt(toks []lexer.Token, limit int) (lexer.Token, bool) {
	type frame struct{ unary, chain int }
	stack := []frame{{}} // the bottom frame is the file
	level, run := 0, 0   // level counts everything; run is the prefix operators of the operand being read
	endRun := func() { level -= run; run = 0 }
	for i, t := range toks {
		switch {
		case t.Value == "!" || t.Value == "-" && (i == 0 || !endsOperand(toks[i-1])):
			run++
			level++
		case t.Value == "(" || t.Value == "[" || t.Value == "{":
			stack = append(stack, frame{unary: run}) // the run stays applied around the brackets
			run = 0
			level++
		case t.Value == ")" || t.Value == "]" || t.Value == "}":
			endRun()
			if len(stack) > 1 {
				f := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				level -= 1 + f.chain
				run = f.unary // a suffix may follow: f(x)(y), x[:, None]
			}
			if t.Value == "}" && (i+1 == len(toks) || toks[i+1].Value != "else") {
				top := &stack[len(stack)-1]
				level -= top.chain
				top.chain = 0
			}
		case t.Value == "else" && i+1 < len(toks) && toks[i+1].Value == "if":
			endRun()
			stack[len(stack)-1].chain++
			level++
		case startsOperand(t):
		default:
			endRun()
		}
		if level > limit {
			return t, true
		}
	}
	return lexer.Token{}, false
}

// checkExprSizes refuses an expression with more than lang.MaxExprOps
// operators. It runs on a parsed file, whose nesting screen has bounded.
func checkExprSizes(src string, f *lang.File) error {
	for _, d := range f.Decls {
		switch {
		case d.Const != nil:
			if err := exprSize(src, d.Const.Value); err != nil {
				return err
			}
		case d.Mod != nil:
			if err := cparamSizes(src, d.Mod.CParams); err != nil {
				return err
			}
			for _, p := range d.Mod.Params {
				if p.Type == nil {
					continue
				}
				for _, e := range p.Type.Shape { // an aux tensor's declared dimensions
					if n := addOps(e); n > lang.MaxExprOps {
						return exprTooLarge(src, e.Pos)
					}
				}
			}
			if err := blockSizes(src, d.Mod.Body); err != nil {
				return err
			}
		case d.Fn != nil:
			if err := blockSizes(src, d.Fn.Body); err != nil {
				return err
			}
		case d.Kernel != nil:
			if err := cparamSizes(src, d.Kernel.CParams); err != nil {
				return err
			}
			if err := blockSizes(src, d.Kernel.Body); err != nil {
				return err
			}
		}
	}
	return nil
}

func cparamSizes(src string, cps []*lang.CParam) error {
	for _, cp := range cps {
		if cp.Default != nil {
			if n := addOps(cp.Default); n > lang.MaxExprOps {
				return exprTooLarge(src, cp.Default.Pos)
			}
		}
	}
	return nil
}

func blockSizes(src string, b *lang.Block) error {
	if b == nil {
		return nil
	}
	for _, s := range b.Stmts {
		var err error
		switch {
		case s.Let != nil:
			err = exprSize(src, s.Let.Value)
		case s.Var != nil:
			err = exprSize(src, s.Var.Value)
		case s.Assign != nil:
			err = exprSize(src, s.Assign.Value)
		case s.Return != nil:
			err = exprSize(src, s.Return.Value)
			for _, e := range s.Return.More {
				if err == nil {
					err = exprSize(src, e)
				}
			}
		case s.Expr != nil:
			err = exprSize(src, s.Expr)
		case s.For != nil:
			for _, a := range s.For.Args {
				if err = exprSize(src, a.Value); err != nil {
					break
				}
			}
			if err == nil {
				err = blockSizes(src, s.For.Body)
			}
		case s.If != nil:
			err = ifSizes(src, s.If)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func ifSizes(src string, s *lang.IfStmt) error {
	for ; s != nil; s = s.ElseIf {
		if err := exprSize(src, s.Cond); err != nil {
			return err
		}
		if err := blockSizes(src, s.Then); err != nil {
			return err
		}
		if err := blockSizes(src, s.Else); err != nil {
			return err
		}
	}
	return nil
}

func exprSize(src string, e *lang.Expr) error {
	if e != nil && exprOps(e) > lang.MaxExprOps {
		return exprTooLarge(src, e.Pos)
	}
	return nil
}

func exprTooLarge(src string, pos lexer.Position) error {
	return &lang.Error{Pos: pos, Src: src,
		Msg: fmt.Sprintf("expression too large: more than %d operators (the limit); split it with let", lang.MaxExprOps)}
}

// exprOps counts the operators of e, sub-expressions included.
func exprOps(e *lang.Expr) int {
	if e == nil {
		return 0
	}
	n := len(e.Right) + andOps(e.Left)
	for _, a := range e.Right {
		n += andOps(a)
	}
	return n
}

func andOps(a *lang.AndExpr) int {
	if a == nil {
		return 0
	}
	n := len(a.Right) + cmpOps(a.Left)
	for _, c := range a.Right {
		n += cmpOps(c)
	}
	return n
}

func cmpOps(c *lang.CmpExpr) int {
	if c == nil {
		return 0
	}
	n := addOps(c.Left)
	// participle may leave Op set from a failed try (see lang's cmpExpr).
	if c.Op != "" && c.Right != nil {
		n += 1 + addOps(c.Right)
	}
	return n
}

func addOps(a *lang.AddExpr) int {
	if a == nil {
		return 0
	}
	n := len(a.Rest) + mulOps(a.Left)
	for _, r := range a.Rest {
		n += mulOps(r.Right)
	}
	return n
}

func mulOps(m *lang.MulExpr) int {
	if m == nil {
		return 0
	}
	n := len(m.Rest) + unaryOps(m.Left)
	for _, r := range m.Rest {
		n += unaryOps(r.Right)
	}
	return n
}

func unaryOps(u *lang.Unary) int {
	n := 0
	for ; u != nil && u.Postfix == nil; u = u.Operand {
		n++
	}
	if u == nil {
		return n
	}
	p := u.Postfix
	if p.Primary != nil {
		n += exprOps(p.Primary.Paren)
		if p.Primary.List != nil {
			for _, it := range p.Primary.List.Items {
				n += exprOps(it)
			}
		}
	}
	for _, s := range p.Suffix {
		if s.Call != nil {
			for _, a := range s.Call.Args {
				n += exprOps(a.Value)
			}
		}
		if s.Index != nil {
			for _, it := range s.Index.Items {
				n += exprOps(it.Expr)
			}
		}
	}
	return n
}
