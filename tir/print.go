package tir

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// String prints the module in its textual form.
func (m *Module) String() string {
	var b strings.Builder
	for i, f := range m.Funcs {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(f.String())
	}
	return b.String()
}

// String prints one function. Values are numbered from %0 in the order they
// are defined; parameters print by name.
func (f *Func) String() string {
	return f.print(&printer{names: map[*Value]string{}})
}

func (f *Func) print(p *printer) string {
	for _, v := range f.Params {
		p.names[v] = "%" + v.Name
	}
	kw := "func"
	if f.Kernel {
		kw = "kernel"
	}
	fmt.Fprintf(&p.b, "%s @%s(", kw, f.Name)
	for i, v := range f.Params {
		if i > 0 {
			p.b.WriteString(", ")
		}
		fmt.Fprintf(&p.b, "%%%s: %s", v.Name, v.Type)
	}
	p.b.WriteString(")")
	if len(f.Result) > 0 {
		p.b.WriteString(" -> ")
		p.types(f.Result)
	}
	if len(f.Attrs) > 0 {
		p.b.WriteString(" attributes ")
		p.attrs(f.Attrs)
	}
	p.b.WriteString(" {\n")
	p.block(f.Body, 1, false)
	p.b.WriteString("}\n")
	return p.b.String()
}

// String prints a single op (regions elided) for error messages; values
// are named by pointer-stable placeholders since no numbering is in scope.
func (o *Op) String() string {
	p := &printer{names: map[*Value]string{}}
	p.op(o, 0, false)
	return strings.TrimSpace(p.b.String())
}

type printer struct {
	b     strings.Builder
	names map[*Value]string
	next  int
	ann   *Annotations // nil: the parseable form
	// all names every value up front, so annotations can refer forward.
	all map[*Value]string
}

func (p *printer) name(v *Value) string {
	if v == nil {
		return "%<nil>"
	}
	if n, ok := p.names[v]; ok {
		return n
	}
	if v.Name != "" {
		return "%" + v.Name
	}
	return "%?"
}

func (p *printer) define(v *Value) string {
	n := "%" + strconv.Itoa(p.next)
	p.next++
	p.names[v] = n
	return n
}

func (p *printer) types(ts []Type) {
	for i, t := range ts {
		if i > 0 {
			p.b.WriteString(", ")
		}
		p.b.WriteString(t.String())
	}
}

func (p *printer) block(b *Block, depth int, header bool) {
	ind := strings.Repeat("  ", depth)
	if header && len(b.Args) > 0 {
		p.b.WriteString(strings.Repeat("  ", depth-1))
		p.b.WriteString("^(")
		for i, a := range b.Args {
			if i > 0 {
				p.b.WriteString(", ")
			}
			fmt.Fprintf(&p.b, "%s: %s%s", p.define(a), a.Type, p.valueNote(a))
		}
		p.b.WriteString("):\n")
	}
	for _, op := range b.Ops {
		p.b.WriteString(ind)
		p.op(op, depth, true)
	}
}

func (p *printer) op(o *Op, depth int, regions bool) {
	if len(o.Results) > 0 {
		for i, r := range o.Results {
			if i > 0 {
				p.b.WriteString(", ")
			}
			p.b.WriteString(p.define(r))
		}
		p.b.WriteString(" = ")
	}
	p.b.WriteString(o.Kind.String())
	for i, a := range o.Args {
		if i == 0 {
			p.b.WriteByte(' ')
		} else {
			p.b.WriteString(", ")
		}
		p.b.WriteString(p.name(a))
	}
	if len(o.Attrs) > 0 {
		p.b.WriteByte(' ')
		p.attrs(o.Attrs)
	}
	if len(o.Results) > 0 {
		p.b.WriteString(" : ")
		rt := make([]Type, len(o.Results))
		for i, r := range o.Results {
			rt[i] = r.Type
		}
		if p.ann == nil {
			p.types(rt)
		} else {
			for i, r := range o.Results {
				if i > 0 {
					p.b.WriteString(", ")
				}
				p.b.WriteString(r.Type.String() + p.valueNote(r))
			}
		}
	}
	if regions {
		ind := strings.Repeat("  ", depth)
		for i, r := range o.Regions {
			if i == 0 {
				p.b.WriteString(" {\n")
			} else {
				p.b.WriteString(ind + "} else {\n")
			}
			p.block(r, depth+1, true)
		}
		if len(o.Regions) > 0 {
			p.b.WriteString(ind + "}")
		}
	}
	p.opNote(o)
	p.b.WriteByte('\n')
}

func (p *printer) attrs(as []Attr) {
	p.b.WriteByte('{')
	for i, a := range as {
		if i > 0 {
			p.b.WriteString(", ")
		}
		p.b.WriteString(a.Key)
		p.b.WriteString(" = ")
		p.b.WriteString(FormatAttr(a.Val))
	}
	p.b.WriteByte('}')
}

// FormatAttr prints an attribute value so that ParseAttr reads it back.
func FormatAttr(v any) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return FormatFloat(v)
	case bool:
		return strconv.FormatBool(v)
	case Ident:
		return string(v)
	}
	return fmt.Sprintf("<bad attr %T>", v)
}

// FormatFloat prints a float so that it reads back exactly and never looks
// like an integer.
func FormatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}
