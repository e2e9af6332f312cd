package attention

import (
	"testing"

	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/parser"
)

func TestLowerQuick(t *testing.T) {
	p, err := Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"none", "causal", "sliding_window(16, 0)", "document", "prefix_lm(8)", "chunked(4)", "causal_bottom_right"} {
		e, err := parser.ParseExpr("cli", m)
		if err != nil {
			t.Fatal(err)
		}
		mi, err := p.ResolveMod(e, "mask")
		if err != nil {
			t.Fatal(err)
		}
		sc, _ := parser.ParseExpr("cli", "alibi")
		si, err := p.ResolveMod(sc, "score")
		if err != nil {
			t.Fatal(err)
		}
		mod, err := p.Lower(lang.Instance{Kernel: "flash_fwd", Args: map[string]lang.Const{"mask": {Kind: lang.CMod, Mod: mi}, "score": {Kind: lang.CMod, Mod: si}}})
		if err != nil {
			t.Fatal(err)
		}
		if m == "document" {
			t.Log(mod.String())
		}
	}
}
