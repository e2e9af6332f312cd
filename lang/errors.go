package lang

import (
	"errors"
	"fmt"
	"strings"

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
	if line, ok := sourceLine(e.Src, e.Pos.Line); ok {
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

func sourceLine(src string, n int) (string, bool) {
	if n <= 0 || src == "" {
		return "", false
	}
	lines := strings.Split(src, "\n")
	if n > len(lines) {
		return "", false
	}
	return strings.TrimRight(lines[n-1], "\r"), true
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
