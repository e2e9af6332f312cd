package codegen

import (
	"context"
	"os"
	"testing"

	"github.com/fac-compiler/fac/codegen/llc"
)

func TestScratchWGMMA(t *testing.T) {
	t.Setenv("FAC_WGMMA", "1")
	m, k := loadKernel(t, os.Getenv("K"))
	tool, err := llc.Find()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Lower(m, k, Options{Arch: "sm_90a", PrintAfter: "plan-async", Out: os.Stdout})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile("/tmp/wgx/k.ll", []byte(res.LL), 0o644)
	ptx, _, err := CompilePTX(context.Background(), m, k, Options{Arch: "sm_90a"}, tool)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile("/tmp/wgx/k.ptx", ptx, 0o644)
	t.Logf("shared %d conversions %d", res.SharedBytes, res.Conversions)
}
