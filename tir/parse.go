package tir

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Parse reads the textual form that Module.String prints. It checks syntax
// and SSA scoping (every use names a value defined earlier in the same or an
// enclosing region); types and op shapes are left to Verify. Errors read
// `file:line:col: message`. Ops and functions get their source position.
func Parse(filename, src string) (m *Module, err error) {
	toks, err := lex(filename, src)
	if err != nil {
		return nil, err
	}
	p := &parser{file: filename, toks: toks}
	// A syntax error unwinds the recursive descent in one step; any other
	// panic is a bug and must surface.
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(parseError)
			if !ok {
				panic(r)
			}
			m, err = nil, pe.err
		}
	}()
	return p.module(), nil
}

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // func, add, f32, max, true, ...
	tType           // tensor<...> or ptr<...>
	tValue          // %name, text without the %
	tSymbol         // @name, text without the @
	tNumber         // 12, -1.5, 1e+06, -inf
	tArrow          // ->
	tPunct          // one of ( ) { } , : = ^
)

type token struct {
	kind      tokKind
	text      string
	line, col int
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tValue:
		return "%" + t.text
	case tSymbol:
		return "@" + t.text
	}
	return strconv.Quote(t.text)
}

type parseError struct{ err error }

func posErr(file string, line, col int, format string, args ...any) error {
	return fmt.Errorf("%s:%d:%d: %s", file, line, col, fmt.Sprintf(format, args...))
}

func isLetter(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isNameChar(c byte) bool {
	return isLetter(c) || isDigit(c) || c == '.'
}

// isIdent reports whether s is a name the text form can carry: a letter or
// underscore, then letters, digits, underscores or dots.
func isIdent(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isNameChar(s[i]) {
			return false
		}
	}
	return true
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// lex splits src into tokens, ending with tEOF.
func lex(file, src string) ([]token, error) {
	var toks []token
	line, lineStart := 1, 0
	for i := 0; i < len(src); {
		c := src[i]
		col := i - lineStart + 1
		errf := func(format string, args ...any) ([]token, error) {
			return nil, posErr(file, line, col, format, args...)
		}
		add := func(k tokKind, text string, n int) {
			toks = append(toks, token{k, text, line, col})
			i += n
		}
		scan := func(from int) int { // end of the name starting at from
			j := from
			for j < len(src) && isNameChar(src[j]) {
				j++
			}
			return j
		}
		switch {
		case c == '\n':
			i++
			line, lineStart = line+1, i
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case strings.ContainsRune("(){},:=^", rune(c)):
			add(tPunct, src[i:i+1], 1)
		case c == '-' && i+1 < len(src) && src[i+1] == '>':
			add(tArrow, "->", 2)
		case c == '%' || c == '@':
			j := scan(i + 1)
			name := src[i+1 : j]
			if c == '%' && !isIdent(name) && !isNumber(name) {
				return errf("bad value name %q", src[i:j])
			}
			if c == '@' && !isIdent(name) {
				return errf("bad symbol name %q", src[i:j])
			}
			k := tValue
			if c == '@' {
				k = tSymbol
			}
			add(k, name, j-i)
		case isDigit(c) || c == '-' && i+1 < len(src) && (isDigit(src[i+1]) || strings.HasPrefix(src[i+1:], "inf")):
			j := i + 1
			if strings.HasPrefix(src[i+1:], "inf") {
				j = i + 4
			} else {
				for j < len(src) && isDigit(src[j]) {
					j++
				}
				if j < len(src) && src[j] == '.' {
					for j++; j < len(src) && isDigit(src[j]); j++ {
					}
				}
				if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
					k := j + 1
					if k < len(src) && (src[k] == '+' || src[k] == '-') {
						k++
					}
					if k < len(src) && isDigit(src[k]) {
						for j = k; j < len(src) && isDigit(src[j]); j++ {
						}
					}
				}
			}
			if j < len(src) && isNameChar(src[j]) {
				return errf("bad number %q", src[i:scan(j)])
			}
			add(tNumber, src[i:j], j-i)
		case isLetter(c):
			j := scan(i)
			word := src[i:j]
			if (word == "tensor" || word == "ptr") && j < len(src) && src[j] == '<' {
				// A type is one token; ParseType checks what is inside.
				depth := 0
				for ; j < len(src); j++ {
					if src[j] == '<' {
						depth++
					} else if src[j] == '>' {
						depth--
					} else if !isLetter(src[j]) && !isDigit(src[j]) {
						break
					}
					if depth == 0 {
						j++
						break
					}
				}
				if depth != 0 {
					return errf("unterminated type %q", src[i:j])
				}
				add(tType, src[i:j], j-i)
				break
			}
			add(tIdent, word, j-i)
		default:
			r, _ := utf8.DecodeRuneInString(src[i:])
			return errf("unexpected character %q", r)
		}
	}
	toks = append(toks, token{tEOF, "", line, len(src) - lineStart + 1})
	return toks, nil
}

// maxDepth bounds region nesting so hostile input cannot exhaust the stack.
const maxDepth = 200

type parser struct {
	file   string
	toks   []token
	i      int
	scopes []map[string]*Value // innermost last
	taken  map[string]bool     // every name defined so far in this function
	funcs  map[string]bool
	depth  int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) peekAt(n int) token {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) failAt(t token, format string, args ...any) {
	panic(parseError{posErr(p.file, t.line, t.col, format, args...)})
}

func (p *parser) is(k tokKind, text string) bool {
	t := p.peek()
	return t.kind == k && (text == "" || t.text == text)
}

// accept consumes the next token if it is the punctuation or keyword s.
func (p *parser) accept(k tokKind, s string) bool {
	if p.is(k, s) {
		p.i++
		return true
	}
	return false
}

func (p *parser) expect(k tokKind, s, what string) token {
	if !p.is(k, s) {
		p.failAt(p.peek(), "expected %s, found %s", what, p.peek())
	}
	return p.next()
}

func (p *parser) pos(t token) Pos { return Pos{File: p.file, Line: t.line, Col: t.col} }

func (p *parser) module() *Module {
	m := &Module{}
	p.funcs = map[string]bool{}
	for p.peek().kind != tEOF {
		m.Funcs = append(m.Funcs, p.function())
	}
	return m
}

func (p *parser) function() *Func {
	kw := p.peek()
	if !p.is(tIdent, "func") && !p.is(tIdent, "kernel") {
		p.failAt(kw, "expected func or kernel, found %s", kw)
	}
	p.next()
	nt := p.expect(tSymbol, "", "function name")
	if p.funcs[nt.text] {
		p.failAt(nt, "duplicate function @%s", nt.text)
	}
	p.funcs[nt.text] = true
	f := &Func{Name: nt.text, Kernel: kw.text == "kernel", Pos: p.pos(kw)}
	p.taken = map[string]bool{}
	p.scopes = []map[string]*Value{{}}
	p.expect(tPunct, "(", "(")
	for !p.accept(tPunct, ")") {
		if len(f.Params) > 0 {
			p.expect(tPunct, ",", ", or )")
		}
		vt := p.expect(tValue, "", "parameter")
		if isNumber(vt.text) {
			// Numbers name the values the printer numbers itself.
			p.failAt(vt, "parameter %%%s: parameter names must not be numbers", vt.text)
		}
		p.expect(tPunct, ":", ":")
		v := &Value{Type: p.typ(), Name: vt.text}
		p.define(vt, v)
		f.Params = append(f.Params, v)
	}
	if p.accept(tArrow, "->") {
		f.Result = p.types()
	}
	if p.accept(tIdent, "attributes") {
		f.Attrs = p.attrs()
	}
	p.expect(tPunct, "{", "{")
	f.Body = p.block(false)
	p.expect(tPunct, "}", "}")
	return f
}

func (p *parser) typ() Type {
	t := p.peek()
	if t.kind != tIdent && t.kind != tType {
		p.failAt(t, "expected type, found %s", t)
	}
	ty, err := ParseType(t.text)
	if err != nil {
		p.failAt(t, "%v", err)
	}
	p.next()
	return ty
}

func (p *parser) types() []Type {
	ts := []Type{p.typ()}
	for p.accept(tPunct, ",") {
		ts = append(ts, p.typ())
	}
	return ts
}

// reserve claims a value name for the current function.
func (p *parser) reserve(t token) {
	if p.taken[t.text] {
		p.failAt(t, "redefinition of %%%s", t.text)
	}
	p.taken[t.text] = true
}

func (p *parser) define(t token, v *Value) {
	p.reserve(t)
	p.scopes[len(p.scopes)-1][t.text] = v
}

func (p *parser) lookup(t token) *Value {
	for i := len(p.scopes) - 1; i >= 0; i-- {
		if v, ok := p.scopes[i][t.text]; ok {
			return v
		}
	}
	p.failAt(t, "undefined value %%%s", t.text)
	return nil
}

// block parses a region body up to (not including) its closing brace.
func (p *parser) block(allowArgs bool) *Block {
	b := &Block{}
	p.scopes = append(p.scopes, map[string]*Value{})
	defer func() { p.scopes = p.scopes[:len(p.scopes)-1] }()
	if t := p.peek(); p.accept(tPunct, "^") {
		if !allowArgs {
			p.failAt(t, "function body cannot have block arguments")
		}
		p.expect(tPunct, "(", "(")
		for !p.accept(tPunct, ")") {
			if len(b.Args) > 0 {
				p.expect(tPunct, ",", ", or )")
			}
			vt := p.expect(tValue, "", "block argument")
			p.expect(tPunct, ":", ":")
			v := &Value{Type: p.typ()}
			p.define(vt, v)
			b.Args = append(b.Args, v)
		}
		p.expect(tPunct, ":", ":")
	}
	for !p.is(tPunct, "}") && p.peek().kind != tEOF {
		b.Ops = append(b.Ops, p.op())
	}
	return b
}

func (p *parser) op() *Op {
	start := p.peek()
	var names []token
	if start.kind == tValue {
		for {
			names = append(names, p.expect(tValue, "", "result name"))
			if !p.accept(tPunct, ",") {
				break
			}
		}
		p.expect(tPunct, "=", "=")
	}
	kt := p.expect(tIdent, "", "op name")
	k, ok := KindByName(kt.text)
	if !ok {
		p.failAt(kt, "unknown op %q", kt.text)
	}
	op := &Op{Kind: k, Pos: p.pos(start)}
	if p.is(tValue, "") {
		for {
			op.Args = append(op.Args, p.lookup(p.expect(tValue, "", "operand")))
			if !p.accept(tPunct, ",") {
				break
			}
		}
	}
	// `{` opens attributes only as `{key =`; otherwise it opens a region.
	if p.is(tPunct, "{") && p.peekAt(1).kind == tIdent && p.peekAt(2).kind == tPunct && p.peekAt(2).text == "=" {
		op.Attrs = p.attrs()
	}
	var types []Type
	if ct := p.peek(); p.accept(tPunct, ":") {
		types = p.types()
		if len(types) != len(names) {
			p.failAt(ct, "%s has %d results but %d types", k, len(names), len(types))
		}
	} else if len(names) > 0 {
		p.failAt(p.peek(), "expected : and result types, found %s", p.peek())
	}
	// Results are claimed now but visible only after the op's regions.
	for i, n := range names {
		p.reserve(n)
		op.Results = append(op.Results, &Value{Type: types[i], Def: op})
	}
	if p.is(tPunct, "{") {
		p.depth++
		if p.depth > maxDepth {
			p.failAt(p.peek(), "regions nested too deeply")
		}
		for {
			p.expect(tPunct, "{", "{")
			op.Regions = append(op.Regions, p.block(true))
			p.expect(tPunct, "}", "}")
			if !p.accept(tIdent, "else") {
				break
			}
		}
		p.depth--
	}
	for i, n := range names {
		p.scopes[len(p.scopes)-1][n.text] = op.Results[i]
	}
	return op
}

func (p *parser) attrs() []Attr {
	p.expect(tPunct, "{", "{")
	var as []Attr
	for {
		kt := p.expect(tIdent, "", "attribute name")
		for _, a := range as {
			if a.Key == kt.text {
				p.failAt(kt, "duplicate attribute %q", kt.text)
			}
		}
		p.expect(tPunct, "=", "=")
		as = append(as, Attr{kt.text, p.attrValue()})
		if !p.accept(tPunct, ",") {
			break
		}
	}
	p.expect(tPunct, "}", ", or }")
	return as
}

func (p *parser) attrValue() any {
	t := p.next()
	switch t.kind {
	case tSymbol:
		return Ident("@" + t.text)
	case tIdent:
		switch t.text {
		case "true", "false":
			return t.text == "true"
		case "inf", "nan":
			return parseFloatTok(p, t)
		}
		return Ident(t.text)
	case tNumber:
		if strings.ContainsAny(t.text, ".eEn") { // n: -inf
			return parseFloatTok(p, t)
		}
		v, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			p.failAt(t, "integer %s out of range", t.text)
		}
		return v
	}
	p.failAt(t, "expected attribute value, found %s", t)
	return nil
}

func parseFloatTok(p *parser, t token) float64 {
	v, err := strconv.ParseFloat(t.text, 64)
	if err != nil {
		p.failAt(t, "bad float %s", t.text)
	}
	return v
}
