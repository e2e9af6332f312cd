package tir

import (
	"os"
	"strings"
	"testing"
)

// TestAnnotated checks that annotations land after types and as trailing
// comments, may name values defined later, and that without them the
// output is String's.
func TestAnnotated(t *testing.T) {
	src, err := os.ReadFile("testdata/sample.tir")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse("sample.tir", string(src))
	if err != nil {
		t.Fatal(err)
	}
	f := m.Func("sample")
	if got := f.Annotated(Annotations{}); got != f.String() {
		t.Errorf("Annotated without annotations differs from String:\n%s", got)
	}
	var last *Value
	f.Body.Walk(func(op *Op) bool {
		for _, r := range op.Results {
			last = r
		}
		return true
	})
	got := f.Annotated(Annotations{
		Value: func(v *Value) string {
			if v.Type.IsScalar() {
				return ""
			}
			return "#L"
		},
		Op: func(op *Op, name func(*Value) string) string {
			if op.Kind == OpArange {
				return "last is " + name(last)
			}
			return ""
		},
	})
	if !strings.Contains(got, "%1 = arange {start = 0, end = 4} : tensor<4xi32> #L // last is %") || strings.Contains(got, "%?") {
		t.Errorf("annotations missing:\n%s", got)
	}
	if !strings.Contains(got, "%0 = program_id {axis = 0} : i32\n") {
		t.Errorf("scalar annotated:\n%s", got)
	}
}
