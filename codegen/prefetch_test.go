package codegen

import (
	"context"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen/llc"
)

// TestPrefetchPTX: flash_fwd's prefetch_q lowers to predicated
// prefetch.global.L2 in the consumer warps (after their setmaxnreg.inc:
// the producer thread only issues copies), one per register vector, with
// the wave's distance from %nsmid; the kernel without it has none.
func TestPrefetchPTX(t *testing.T) {
	tool, err := llc.Find()
	if err != nil {
		t.Skipf("no llc: %v", err)
	}
	for _, c := range []struct {
		file string
		want bool
	}{{"frontend_flash_128x128_ws_prefetch", true}, {"frontend_flash_128x128_ws_lazy_fold", false}} {
		t.Run(c.file, func(t *testing.T) {
			m, name := loadKernel(t, c.file)
			ptxb, _, err := CompilePTX(context.Background(), m, name, Options{Target: wgmmaTarget}, tool)
			if err != nil {
				t.Fatal(err)
			}
			ptx := string(ptxb)
			n := strings.Count(ptx, "@p prefetch.global.L2 [")
			t.Logf("%d prefetches", n)
			if !c.want {
				if n != 0 || strings.Contains(ptx, "%nsmid") {
					t.Errorf("want no prefetch and no %%nsmid")
				}
				return
			}
			// 128×128 bf16 over 256 consumer threads: 64 elements each,
			// at most 16 vectors of 4 or 8 of 8.
			if n == 0 || n > 16 || !strings.Contains(ptx, "%nsmid") {
				t.Fatalf("want 1 to 16 predicated prefetches and %%nsmid")
			}
			inc := strings.Index(ptx, "setmaxnreg.inc")
			if first := strings.Index(ptx, "prefetch.global.L2"); inc < 0 || first < inc {
				t.Errorf("first prefetch at %d, setmaxnreg.inc at %d: want the consumers' (after it)", first, inc)
			}
		})
	}
}
