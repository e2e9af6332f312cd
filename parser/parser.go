// Package parser turns tile-language source into the lang AST with
// participle, and formats syntax errors as `file:line:col: message` followed
// by the source line and a caret.
package parser

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/fac-compiler/fac/lang"
)

// Keywords are reserved: they lex as Keyword, never as Ident, so a missing
// expression before one (`let x =` then `return ...`) is a syntax error at
// the keyword instead of a confusing error later. mask and score are not
// reserved: they also name a kernel's mod parameters; nor is fn, which
// starts a function declaration. & | ~ ^ are no
// operators of the language; they lex so that screen can say what to write
// instead. A Comment right after an operand is refused by screen too: there
// `//` is Python's floor division.
var lex = lexer.MustSimple([]lexer.SimpleRule{
	{Name: "Comment", Pattern: `//[^\n]*`},
	{Name: "Whitespace", Pattern: `[ \t\r\n]+`},
	{Name: "Float", Pattern: `\d+\.\d*([eE][+-]?\d+)?|\d+[eE][+-]?\d+`},
	{Name: "Int", Pattern: `\d+`},
	{Name: "Arrow", Pattern: `->`},
	{Name: "Keyword", Pattern: `(const|kernel|let|var|for|in|range|if|else|return|true|false|None)\b`},
	{Name: "Ident", Pattern: `[A-Za-z_][A-Za-z0-9_]*`},
	{Name: "Punct", Pattern: `==|!=|<=|>=|&&|\|\||[-+*/%<>=!(),:\[\]{};&|~^]`},
})

// options are shared by every entry point so they lex and parse alike.
var options = []participle.Option{
	participle.Lexer(lex),
	participle.Elide("Comment", "Whitespace"),
	participle.UseLookahead(4),
}

var (
	fileParser = participle.MustBuild[lang.File](options...)
	exprParser = participle.MustBuild[lang.Expr](options...)
	// stmtParser and declParser re-parse one statement or declaration to
	// find where it really fails (see refine).
	stmtParser = participle.MustBuild[lang.Stmt](options...)
	declParser = participle.MustBuild[lang.Decl](options...)
)

// ParseFile parses one source file. Errors are *lang.Error values. It
// enforces the limits of lang (MaxSourceSize, MaxTokens, MaxNesting,
// MaxExprOps) and refuses Python operators fac does not have.
func ParseFile(filename, src string) (*lang.File, error) {
	if len(src) > lang.MaxSourceSize {
		return nil, tooLarge(filename)
	}
	slip, err := screen(filename, src)
	if err != nil {
		return nil, err
	}
	f, err := fileParser.ParseString(filename, src)
	if err != nil {
		return nil, firstError(slip, convert(filename, src, err, true))
	}
	if slip != nil {
		return nil, slip
	}
	if err := checkExprSizes(src, f); err != nil {
		return nil, err
	}
	return f, nil
}

// ParseExpr parses a single expression, such as a mod instantiation given on
// the command line: `sliding_window(256, 0)`. It has ParseFile's limits.
func ParseExpr(filename, src string) (*lang.Expr, error) {
	if len(src) > lang.MaxSourceSize {
		return nil, tooLarge(filename)
	}
	slip, err := screen(filename, src)
	if err != nil {
		return nil, err
	}
	e, err := exprParser.ParseString(filename, src)
	if err != nil {
		return nil, firstError(slip, convert(filename, src, err, false))
	}
	if slip != nil {
		return nil, slip
	}
	if err := exprSize(src, e); err != nil {
		return nil, err
	}
	e.Source = src
	return e, nil
}

// firstError picks between a slip and a syntax error: the slip, unless the
// syntax error is on an earlier line. A slip often causes the syntax error
// (the rest of the line became a comment), and participle may place that
// error at the start of the statement.
func firstError(slip *lang.Error, syntax error) error {
	if slip == nil {
		return syntax
	}
	if se, ok := syntax.(*lang.Error); ok && se.Pos.Line > 0 && se.Pos.Line < slip.Pos.Line {
		return syntax
	}
	return slip
}

func convert(filename, src string, err error, file bool) error {
	var perr participle.Error
	if errors.As(err, &perr) {
		pos := perr.Position()
		if file {
			perr, pos = refine(filename, src, perr, pos)
		}
		if pos.Filename == "" {
			pos.Filename = filename
		}
		msg := message(perr, pos, src, file)
		if h := hint(src, pos, perr); h != "" {
			// Say what to write instead of what the grammar expected.
			msg, _, _ = strings.Cut(msg, " (expected")
			msg += ": " + h
		}
		return &lang.Error{Pos: pos, Msg: "syntax error: " + msg, Src: src}
	}
	return &lang.Error{Pos: lexer.Position{Filename: filename}, Msg: fmt.Sprint(err), Src: src}
}

// refine looks for a deeper error where participle backtracked. With
// lookahead, a statement or declaration that fails within its first few
// tokens is dropped as "no match", and the error lands on its first token
// (`unexpected "let" (expected "}")`). Parsing that one statement or
// declaration alone, at the same line and column, finds where it really
// goes wrong.
func refine(filename, src string, perr participle.Error, pos lexer.Position) (participle.Error, lexer.Position) {
	for range 8 {
		var uerr *participle.UnexpectedTokenError
		if !errors.As(perr, &uerr) || uerr.Unexpected.EOF() || pos.Offset < 0 || pos.Offset > len(src) {
			break
		}
		// Blank everything before the failing token, keeping lines and columns.
		var b strings.Builder
		for _, r := range src[:pos.Offset] {
			if r == '\n' {
				b.WriteRune(r)
			} else {
				b.WriteByte(' ')
			}
		}
		shift := pos.Offset - b.Len() // bytes lost to multi-byte runes
		b.WriteString(src[pos.Offset:])
		var err error
		if braceDepth(src, pos.Offset) > 0 {
			_, err = stmtParser.ParseString(filename, b.String(), participle.AllowTrailing(true))
		} else {
			_, err = declParser.ParseString(filename, b.String(), participle.AllowTrailing(true))
		}
		var deeper participle.Error
		if !errors.As(err, &deeper) {
			break
		}
		p := deeper.Position()
		if p.Line < pos.Line || p.Line == pos.Line && p.Column <= pos.Column {
			break
		}
		p.Offset += shift
		perr, pos = deeper, p
	}
	return perr, pos
}

// message rewrites participle's messages in the user's terms: no grammar
// dumps, no token-type names.
func message(perr participle.Error, pos lexer.Position, src string, file bool) string {
	var lerr *lexer.Error
	if errors.As(perr, &lerr) {
		if pos.Offset >= 0 && pos.Offset < len(src) {
			r, _ := utf8.DecodeRuneInString(src[pos.Offset:])
			if r == '"' || r == '\'' {
				return "unexpected character " + strconv.QuoteRune(r) + " (the language has no strings)"
			}
			return "unexpected character " + strconv.QuoteRune(r)
		}
		return strings.TrimPrefix(lerr.Message(), "lexer: ")
	}
	var uerr *participle.UnexpectedTokenError
	if !errors.As(perr, &uerr) {
		return strings.ReplaceAll(perr.Message(), `"Ident"`, "a name")
	}
	got := "end of file"
	if !uerr.Unexpected.EOF() {
		got = strconv.Quote(uerr.Unexpected.Value)
	}
	msg := "unexpected " + got
	full := uerr.Message()
	if i := strings.Index(full, " (expected "); i >= 0 {
		if want := expected(strings.TrimSuffix(full[i+len(" (expected "):], ")")); want != "" {
			return msg + " (expected " + want + ")"
		}
		return msg
	}
	if file && braceDepth(src, pos.Offset) <= 0 {
		return msg + " (expected a declaration: const, mask, score, fn or kernel)"
	}
	return msg
}

var ruleWords = map[string]string{
	"Expr": "an expression", "AndExpr": "an expression", "CmpExpr": "an expression", "AddExpr": "an expression",
	"MulExpr": "an expression", "Unary": "an expression", "Postfix": "an expression", "Primary": "an expression",
	"Arg": "an argument", "IndexItem": "an index (:, None or an expression)", "TypeRef": "a type",
	"Block": `"{"`, "Param": "a parameter", "CParam": "a compile-time parameter", "Stmt": "a statement",
	"Decl": "a declaration", "List": `"["`, "CallArgs": `"("`,
	"<ident>": "a name", "<int>": "a number", "<float>": "a number", "<keyword>": "a keyword",
}

// expected turns participle's EBNF of what it expected into a short hint:
// the first element when it is required, else nothing.
func expected(ebnf string) string {
	ebnf = strings.TrimSpace(ebnf)
	if ebnf == "" {
		return ""
	}
	var first, rest string
	if ebnf[0] == '"' {
		end := strings.IndexByte(ebnf[1:], '"')
		if end < 0 {
			return ""
		}
		first, rest = ebnf[:end+2], ebnf[end+2:]
	} else {
		end := strings.IndexAny(ebnf, " ()?*+|")
		if end < 0 {
			end = len(ebnf)
		}
		first, rest = ebnf[:end], ebnf[end:]
	}
	rest = strings.TrimLeft(rest, " ")
	if rest != "" && strings.ContainsAny(rest[:1], "?*|") {
		return "" // optional or one of several: no single answer
	}
	if first == "" {
		return ""
	}
	if first[0] == '"' {
		return first
	}
	return ruleWords[first]
}

// braceDepth counts unclosed "{" before offset.
func braceDepth(src string, offset int) int {
	depth := 0
	toks, err := lex.Lex("", strings.NewReader(src))
	if err != nil {
		return 0
	}
	for {
		t, err := toks.Next()
		if err != nil || t.EOF() || t.Pos.Offset >= offset {
			return depth
		}
		switch t.Value {
		case "{":
			depth++
		case "}":
			depth--
		}
	}
}
