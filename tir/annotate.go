package tir

// Annotations add facts computed outside tir (e.g. the layouts codegen
// assigns) to a function's printed form. The result is for people: it does
// not parse back.
type Annotations struct {
	// Value returns text printed after the type of a value an op or a
	// region header defines, e.g. "#mma{v2, wpc=[4 1]}"; "" prints nothing.
	Value func(v *Value) string
	// Op returns a note printed as a trailing comment on op's line; name
	// gives the printed name of any value of the function, also one
	// defined further down.
	Op func(op *Op, name func(*Value) string) string
}

// Annotated prints f as String does, with a's annotations.
func (f *Func) Annotated(a Annotations) string {
	pre := &printer{names: map[*Value]string{}}
	f.print(pre)
	return f.print(&printer{names: map[*Value]string{}, ann: &a, all: pre.names})
}

func (p *printer) valueNote(v *Value) string {
	if p.ann == nil || p.ann.Value == nil {
		return ""
	}
	if s := p.ann.Value(v); s != "" {
		return " " + s
	}
	return ""
}

func (p *printer) opNote(o *Op) {
	if p.ann == nil || p.ann.Op == nil {
		return
	}
	name := func(v *Value) string {
		if n, ok := p.all[v]; ok {
			return n
		}
		return p.name(v)
	}
	if s := p.ann.Op(o, name); s != "" {
		p.b.WriteString(" // " + s)
	}
}
