package passes

import (
	"strings"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

// TestCloneFuncIsDeep checks that a clone shares no op or value with its
// original, prints the same, and can change without changing the original.
func TestCloneFuncIsDeep(t *testing.T) {
	m := parseFile(t, "testdata/pipeline/flash_fwd.tir")
	f := m.Func("flash_fwd")
	before := f.String()
	g := cloneFunc(f, "flash_fwd")
	if g.String() != before {
		t.Fatalf("clone prints differently:\n%s\nwant\n%s", g, before)
	}
	seen := map[any]bool{}
	note := func(fn *tir.Func, record bool) {
		for _, p := range fn.Params {
			if record {
				seen[p] = true
			} else if seen[p] {
				t.Errorf("param %%%s shared", p.Name)
			}
		}
		fn.Body.Walk(func(op *tir.Op) bool {
			vals := append([]*tir.Value(nil), op.Results...)
			for _, r := range op.Regions {
				vals = append(vals, r.Args...)
			}
			if record {
				seen[op] = true
				for _, v := range vals {
					seen[v] = true
				}
				return true
			}
			if seen[op] {
				t.Errorf("op %s shared", op)
			}
			for _, v := range vals {
				if seen[v] {
					t.Errorf("value of %s shared", op)
				}
			}
			for _, a := range op.Args {
				if !seen[a] {
					continue
				}
				t.Errorf("%s uses a value of the original", op)
			}
			return true
		})
	}
	note(f, true)
	note(g, false)
	g.Body.Walk(func(op *tir.Op) bool {
		op.SetAttr("touched", true)
		return true
	})
	g.SetAttr("touched", true)
	if f.String() != before {
		t.Errorf("changing the clone changed the original:\n%s", f)
	}
}

func TestSpecializeMaskErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`func @m(%q: i32) -> i32 attributes {role = mask} {
  return %q
}
kernel @k(%p: ptr<i32>) {
  %v = load %p : i32
  %r = call %v {callee = @m} : i32
  store %p, %r
  return
}`, "mask function @m must return one i1 value"},
		{`func @a(%q: i32) -> i32 {
  %r = call %q {callee = @a} : i32
  return %r
}
kernel @k(%p: ptr<i32>) {
  %v = load %p : i32
  %r = call %v {callee = @a} : i32
  store %p, %r
  return
}`, "recursive call: @a -> @a"},
	} {
		m, err := tir.Parse("case", tc.src)
		if err != nil {
			t.Fatal(err)
		}
		if err := specializeMask(m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}

// TestSpecializeMaskIdempotent: a second run finds every kernel already
// specialized.
func TestSpecializeMaskIdempotent(t *testing.T) {
	for _, in := range allInputs(t) {
		m := parseFile(t, in)
		if specializeMask(m) != nil {
			continue
		}
		once := m.String()
		if err := specializeMask(m); err != nil || m.String() != once {
			t.Errorf("%s: second run: err %v, changed: %v", in, err, m.String() != once)
		}
	}
}
