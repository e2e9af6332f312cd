package npy

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// header is a parsed .npy header.
type header struct {
	descr   string
	fortran bool
	shape   []int
}

// parseHeader reads the header dictionary as NumPy does (numpy.lib.format:
// ast.literal_eval, then checks): a Python dict literal whose keys are
// exactly 'descr', 'fortran_order' and 'shape' (a key given twice takes its
// last value, as in Python), 'descr' a string, 'fortran_order' True or
// False and nothing else, 'shape' a tuple of ints. A structured dtype (a
// list descr) is not supported.
func parseHeader(text string) (header, error) {
	var h header
	p := &hparser{s: text}
	vals, err := p.dict()
	if err != nil {
		return h, fmt.Errorf("bad header %s: %w", clip(text), err)
	}
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		if k != "descr" && k != "fortran_order" && k != "shape" {
			return h, fmt.Errorf("header has the key %q; NumPy's headers have exactly descr, fortran_order and shape: %s", k, clip(text))
		}
	}
	d, ok := vals["descr"]
	if !ok {
		return h, fmt.Errorf("header has no descr: %s", clip(text))
	}
	if h.descr, ok = d.(string); !ok {
		return h, fmt.Errorf("descr is %s, want a dtype string (structured dtypes are not supported)", describe(d))
	}
	f, ok := vals["fortran_order"]
	if !ok {
		return h, fmt.Errorf("header has no fortran_order: %s", clip(text))
	}
	if h.fortran, ok = f.(bool); !ok {
		return h, fmt.Errorf("fortran_order is %s, want True or False", describe(f))
	}
	s, ok := vals["shape"]
	if !ok {
		return h, fmt.Errorf("header has no shape: %s", clip(text))
	}
	t, ok := s.(tuple)
	if !ok {
		return h, fmt.Errorf("shape is %s, want a tuple of counts such as (2, 3) or (3,)", describe(s))
	}
	for _, e := range t {
		lit, ok := e.(intLit)
		n, err := strconv.Atoi(string(lit))
		if !ok || err != nil || n < 0 || n > MaxElems {
			return h, fmt.Errorf("bad shape %s: dim %s is not a count from 0 to %d", describe(t), describe(e), MaxElems)
		}
		h.shape = append(h.shape, n)
	}
	return h, nil
}

// clip quotes a header for a message, cut to 200 bytes.
func clip(text string) string {
	if len(text) > 200 {
		return strconv.Quote(text[:200]) + "..."
	}
	return strconv.Quote(text)
}

// Values of the header's Python literals: string, bool, none, intLit (the
// digits as written, so that an oversized one can be named), tuple, list.
type (
	none   struct{}
	intLit string
	tuple  []any
	list   []any
)

// describe writes a value back as Python would, for messages.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case bool:
		if v {
			return "True"
		}
		return "False"
	case none:
		return "None"
	case intLit:
		return string(v)
	case tuple, list:
		var items []any
		open, close := "(", ")"
		if t, ok := v.(tuple); ok {
			items = t
		} else {
			items, open, close = v.(list), "[", "]"
		}
		parts := make([]string, len(items))
		for i, e := range items {
			parts[i] = describe(e)
		}
		s := strings.Join(parts, ", ")
		if open == "(" && len(parts) == 1 {
			s += ","
		}
		return open + s + close
	}
	return fmt.Sprint(v)
}

// hparser parses the subset of Python literals NumPy headers use.
type hparser struct {
	s     string
	i     int
	depth int
}

func (p *hparser) ws() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *hparser) peek() byte {
	p.ws()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *hparser) expect(c byte) error {
	if p.peek() != c {
		return p.errorf("want %q", c)
	}
	p.i++
	return nil
}

func (p *hparser) errorf(format string, args ...any) error {
	at := "the end"
	if p.i < len(p.s) {
		at = fmt.Sprintf("offset %d (%q)", p.i, p.s[p.i:min(len(p.s), p.i+12)])
	}
	return fmt.Errorf("%s at %s", fmt.Sprintf(format, args...), at)
}

// dict parses the whole header: one dict with string keys, and nothing
// after it but whitespace.
func (p *hparser) dict() (map[string]any, error) {
	if err := p.expect('{'); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for p.peek() != '}' {
		k, err := p.value()
		if err != nil {
			return nil, err
		}
		key, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("key %s is not a string", describe(k))
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		out[key] = v // the last of duplicate keys wins, as in Python
		if p.peek() == ',' {
			p.i++
		} else if p.peek() != '}' {
			return nil, p.errorf("want ',' or '}'")
		}
	}
	p.i++
	if p.ws(); p.i != len(p.s) {
		return nil, p.errorf("text after the dict")
	}
	return out, nil
}

// value parses a string, True, False, None, an integer or a tuple or
// list of values.
func (p *hparser) value() (any, error) {
	switch c := p.peek(); {
	case c == '\'' || c == '"':
		j := strings.IndexByte(p.s[p.i+1:], c)
		if j < 0 {
			return nil, p.errorf("unterminated string")
		}
		v := p.s[p.i+1 : p.i+1+j]
		if strings.ContainsAny(v, "\\\n") {
			return nil, p.errorf("string with an escape or a newline")
		}
		p.i += j + 2
		return v, nil
	case c == '(' || c == '[':
		if p.depth++; p.depth > 8 {
			return nil, p.errorf("nesting deeper than 8")
		}
		defer func() { p.depth-- }()
		closing := byte(')')
		if c == '[' {
			closing = ']'
		}
		p.i++
		var items []any
		comma := false
		for p.peek() != closing {
			if len(items) > 0 && !comma {
				return nil, p.errorf("want ',' or %q", closing)
			}
			if len(items) >= MaxRank+1 && c == '(' {
				return nil, fmt.Errorf("shape has more than %d dims", MaxRank)
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			items = append(items, v)
			if comma = p.peek() == ','; comma {
				p.i++
			}
		}
		p.i++
		if c == '[' {
			return list(items), nil
		}
		if len(items) == 1 && !comma {
			return items[0], nil // (x) is x, not a tuple
		}
		return tuple(items), nil
	case c == '-' || c == '+' || '0' <= c && c <= '9':
		j := p.i + 1
		for j < len(p.s) && '0' <= p.s[j] && p.s[j] <= '9' {
			j++
		}
		lit := p.s[p.i:j]
		if j < len(p.s) && (p.s[j] == 'L' || p.s[j] == 'l') {
			j++ // Python 2's long suffix, which NumPy filters out of old headers
		}
		if lit == "-" || lit == "+" {
			return nil, p.errorf("a sign without digits")
		}
		p.i = j
		return intLit(strings.TrimPrefix(lit, "+")), nil
	default:
		j := p.i
		for j < len(p.s) && ('a' <= p.s[j] && p.s[j] <= 'z' || 'A' <= p.s[j] && p.s[j] <= 'Z' || p.s[j] == '_') {
			j++
		}
		switch p.s[p.i:j] {
		case "True":
			p.i = j
			return true, nil
		case "False":
			p.i = j
			return false, nil
		case "None":
			p.i = j
			return none{}, nil
		}
		return nil, p.errorf("not a Python literal NumPy writes")
	}
}
