package main

import (
	"fmt"
	"os"

	"github.com/fac-compiler/fac/parser"
	"github.com/fac-compiler/fac/passes"
	"github.com/fac-compiler/fac/stdlib/attention"
)

func main() {
	prog, err := attention.Load(map[string]string{"t.fa": os.Args[3]})
	if err != nil {
		panic(err)
	}
	e, _ := parser.ParseExpr("x", os.Args[1])
	mi, err := prog.ResolveMod(e, "score")
	if err != nil {
		panic(err)
	}
	if os.Args[2] == "tile" {
		m, err := prog.LowerModTile(mi, 4, 8)
		if err != nil {
			panic(err)
		}
		passes.RunPipeline(m, passes.MaskAnalysisPipeline, passes.Options{})
		fmt.Print(m)
	} else {
		m, err := prog.LowerMod(mi)
		if err != nil {
			panic(err)
		}
		passes.RunPipeline(m, passes.MaskAnalysisPipeline, passes.Options{})
		fmt.Print(m)
	}
}
