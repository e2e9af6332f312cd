package blockmask

import (
	"testing"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/parser"
	"github.com/fac-compiler/fac/stdlib/attention"
)

func loadProg(t testing.TB, user map[string]string) *lang.Program {
	t.Helper()
	p, err := attention.Load(user)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func resolve(t testing.TB, p *lang.Program, expr string) *lang.ModInst {
	t.Helper()
	e, err := parser.ParseExpr("<test>", expr)
	if err != nil {
		t.Fatal(err)
	}
	mi, err := p.ResolveMod(e, "mask")
	if err != nil {
		t.Fatal(err)
	}
	return mi
}
