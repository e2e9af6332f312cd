package codegen

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen/llc"
)

// goldenLLC records the llc major version the golden PTX was made with:
// PTX text changes between LLVM versions, so other versions skip.
var goldenLLC = filepath.Join("testdata", "golden", "ptx", "llc-major.txt")

// TestGoldenPTX compares the PTX of the stdlib flash_fwd (bf16, D=128,
// causal; the front end's snapshot) for each target with
// testdata/golden/ptx. -update rewrites them and the llc version.
func TestGoldenPTX(t *testing.T) {
	tool, err := llc.Find()
	if err != nil {
		t.Skipf("no llc: %v", err)
	}
	if *update {
		os.MkdirAll(filepath.Dir(goldenLLC), 0o755)
		if err := os.WriteFile(goldenLLC, []byte(strconv.Itoa(tool.Major)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		b, err := os.ReadFile(goldenLLC)
		if err != nil {
			t.Fatalf("%v (run go test ./codegen -run TestGoldenPTX -update)", err)
		}
		if want, _ := strconv.Atoi(strings.TrimSpace(string(b))); want != tool.Major {
			t.Skipf("golden PTX was made with llc %d, found %s: rerun with -update to move the goldens", want, tool)
		}
	}
	m, k := loadKernel(t, "frontend_flash_causal")
	for _, arch := range phaseArchs {
		t.Run(arch, func(t *testing.T) {
			ptx, _, err := CompilePTX(context.Background(), m, k, Options{Target: testTarget(arch)}, tool)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "golden", "ptx", "flash_fwd_bf16_d128_causal."+arch+".ptx"), ptx)
		})
	}
}
