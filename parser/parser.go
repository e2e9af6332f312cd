// Package parser turns tile-language source into the lang AST with
// participle, and formats syntax errors as `file:line:col: message` followed
// by the source line and a caret.
package parser

import (
	"errors"
	"fmt"
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/fac-compiler/fac/lang"
)

var lex = lexer.MustSimple([]lexer.SimpleRule{
	{Name: "Comment", Pattern: `//[^\n]*`},
	{Name: "Whitespace", Pattern: `[ \t\r\n]+`},
	{Name: "Float", Pattern: `\d+\.\d*([eE][+-]?\d+)?|\d+[eE][+-]?\d+`},
	{Name: "Int", Pattern: `\d+`},
	{Name: "Arrow", Pattern: `->`},
	{Name: "Ident", Pattern: `[A-Za-z_][A-Za-z0-9_]*`},
	{Name: "Punct", Pattern: `==|!=|<=|>=|&&|\|\||[-+*/%<>=!(),:\[\]{};]`},
})

var (
	fileParser = participle.MustBuild[lang.File](
		participle.Lexer(lex),
		participle.Elide("Comment", "Whitespace"),
		participle.UseLookahead(4),
	)
	exprParser = participle.MustBuild[lang.Expr](
		participle.Lexer(lex),
		participle.Elide("Comment", "Whitespace"),
		participle.UseLookahead(4),
	)
)

// ParseFile parses one source file. Errors are *lang.Error values.
func ParseFile(filename, src string) (*lang.File, error) {
	f, err := fileParser.ParseString(filename, src)
	if err != nil {
		return nil, convert(filename, src, err)
	}
	return f, nil
}

// ParseExpr parses a single expression, such as a mod instantiation given on
// the command line: `sliding_window(256, 0)`.
func ParseExpr(filename, src string) (*lang.Expr, error) {
	e, err := exprParser.ParseString(filename, src)
	if err != nil {
		return nil, convert(filename, src, err)
	}
	return e, nil
}

func convert(filename, src string, err error) error {
	var perr participle.Error
	if errors.As(err, &perr) {
		pos := perr.Position()
		msg := perr.Message()
		msg = strings.ReplaceAll(msg, `"Ident"`, "a name")
		return &lang.Error{Pos: pos, Msg: "syntax error: " + msg, Src: src}
	}
	return &lang.Error{Pos: lexer.Position{Filename: filename}, Msg: fmt.Sprint(err), Src: src}
}
