package core

import (
	"fmt"
	"io"
	"strings"

	"github.com/fac-compiler/fac/tir"
)

// Print writes the kernel as the phases run so far left it: after
// lower-llvm the LLVM module; before, the tile IR annotated with what the
// phases decided: staged loads (and their shared-memory tiles once
// planned) as trailing comments, and after assign-layouts each tensor
// value's layouts:
//
//	#L              anchored in L
//	#L => #M        anchored in L, converted to M right after its definition
//	#flex(#L, #M)   flexible: rematerialized in each layout consumers want
//
// Scalars (one uniform register) are not annotated.
func (l *Lowerer) Print(w io.Writer) error {
	if l.Emitter != nil {
		_, err := io.WriteString(w, l.text())
		return err
	}
	_, err := io.WriteString(w, l.f.Annotated(tir.Annotations{Value: l.valueNote, Op: l.opNote}))
	return err
}

func (l *Lowerer) valueNote(v *tir.Value) string {
	if l.layouts == nil || v.Type.IsScalar() {
		return ""
	}
	in := l.layouts.info[v]
	if in == nil {
		return ""
	}
	if in.flex {
		if len(in.wants) == 0 {
			return "#flex"
		}
		parts := make([]string, len(in.wants))
		for i, lay := range in.wants {
			parts[i] = "#" + lay.String()
		}
		return "#flex(" + strings.Join(parts, ", ") + ")"
	}
	s := "#" + in.lay.String()
	for _, d := range in.demands() {
		s += " => #" + d.String()
	}
	return s
}

func (l *Lowerer) opNote(op *tir.Op, name func(*tir.Value) string) string {
	st := l.plan.staged[op]
	sched, _ := l.target.(ScheduleTarget)
	if st == nil {
		if sched != nil {
			return sched.OpNote(l, op, nil)
		}
		return ""
	}
	s := fmt.Sprintf("staged: operand %c of %s", "AB"[st.Operand], name(st.Dot.Result()))
	for _, u := range st.Also {
		s += fmt.Sprintf(" and %c of %s", "AB"[u.Operand], name(u.Dot.Result()))
	}
	if l.plan.planned {
		s += fmt.Sprintf(", smem [%d, %d)", st.ByteOff, st.ByteOff+st.Bytes)
		if st.Stride > 0 {
			s += fmt.Sprintf(", %d buffers %d apart, prefetched", st.Bytes/st.Stride, st.Stride)
		}
	}
	if st.Resident {
		s += ", resident"
	}
	if d, ok := st.Plan.(fmt.Stringer); ok {
		if p := d.String(); p != "" {
			s += ", " + p // the target's plan (sm90: "TMA via tma.k")
		}
	}
	if sched != nil {
		if n := sched.OpNote(l, op, st); n != "" {
			s += ", " + n // the target's schedule ("issued by the producer")
		}
	}
	return s
}
