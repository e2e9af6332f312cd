package lang

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"
)

// Error is a positioned error in user source. Its text is
// `file:line:col: message`, then the source line and a caret under the column.
type Error struct {
	Pos lexer.Position
	Msg string
	Src string // the whole source of Pos.Filename, for the excerpt; may be empty
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Pos.Line > 0 {
		fmt.Fprintf(&b, "%s:%d:%d: %s", e.Pos.Filename, e.Pos.Line, e.Pos.Column, e.Msg)
	} else if e.Pos.Filename != "" {
		fmt.Fprintf(&b, "%s: %s", e.Pos.Filename, e.Msg)
	} else {
		b.WriteString(e.Msg)
	}
	if line, ok := sourceLine(e.Src, e.Pos); ok {
		col := max(e.Pos.Column, 1)
		// Keep tabs so the caret lines up under tab-indented code.
		pad := []rune{}
		for i, r := range []rune(line) {
			if i >= col-1 {
				break
			}
			if r == '\t' {
				pad = append(pad, '\t')
			} else {
				pad = append(pad, ' ')
			}
		}
		fmt.Fprintf(&b, "\n    %s\n    %s^", line, string(pad))
	}
	return b.String()
}

// sourceLine returns line n of src (1-based) without its line break. It
// does not split src: a file may have thousands of errors, each formatted
// apart. Where pos's offset agrees with its column it finds the line from
// there, in time the line's length.
func sourceLine(src string, pos lexer.Position) (string, bool) {
	n := pos.Line
	if n <= 0 || src == "" {
		return "", false
	}
	if off := pos.Offset; off > 0 && off <= len(src) {
		start := strings.LastIndexByte(src[:off], '\n') + 1
		if utf8.RuneCountInString(src[start:off])+1 == pos.Column {
			return lineAt(src, start), true
		}
	}
	start := 0
	for i := 1; i < n; i++ {
		j := strings.IndexByte(src[start:], '\n')
		if j < 0 {
			return "", false
		}
		start += j + 1
	}
	return lineAt(src, start), true
}

func lineAt(src string, start int) string {
	end := strings.IndexByte(src[start:], '\n')
	if end < 0 {
		end = len(src) - start
	}
	return strings.TrimRight(src[start:start+end], "\r")
}

// ErrorList is several errors, reported together (one per line block).
type ErrorList []error

func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap lets errors.As find the first positioned error.
func (l ErrorList) Unwrap() []error { return l }

// AsError reports whether err holds a *Error (for tests and the CLI).
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// UnknownModError is the error for a mod name (a --mask or --score value)
// that names no mod or constant of the program. The CLI adds a hint to it
// when no source file was given (fac run --mask my_mask without -f).
type UnknownModError struct {
	Name string // the unknown name
	Kind string // "mask" or "score"
	Err  *Error
}

func (e *UnknownModError) Error() string { return e.Err.Error() }

// Unwrap gives the positioned error (AsError finds it).
func (e *UnknownModError) Unwrap() error { return e.Err }

// withExprSource gives the errors of err positioned in e, an expression
// parsed alone (a --mask value), e's text for their excerpt: the program
// has no file of that name.
func withExprSource(err error, e *Expr) error {
	if err == nil || e == nil || e.Source == "" {
		return err
	}
	fill := func(x error) {
		if le, ok := AsError(x); ok && le.Src == "" && le.Pos.Filename == e.Pos.Filename {
			le.Src = e.Source
		}
	}
	if list, ok := err.(ErrorList); ok {
		for _, x := range list {
			fill(x)
		}
	} else {
		fill(err)
	}
	return err
}
