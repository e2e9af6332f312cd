package compiler

import (
	"strconv"
	"testing"

	"github.com/fac-compiler/fac/codegen/sm90"
)

// TestTunedConsts checks that a request naming its arch gets the tile
// arguments the kernel's contract tunes for the arch's code generation
// variant, all or none, and that every other request keeps the defaults.
func TestTunedConsts(t *testing.T) {
	cases := []struct {
		name, arch, dtype, wgmma string
		consts                   map[string]string
		bm, nw, ns               int64
	}{
		// Three K/V buffers at D = 128 (two at D = 64, below).
		{"sm_90a wgmma bf16", "sm_90a", "bf16", "", nil, 128, 8, 3},
		{"sm_90a wgmma f16", "sm_90a", "f16", "", nil, 128, 8, 3},
		{"sm_90a wgmma bf16 D = 64", "sm_90a", "bf16", "", map[string]string{"HEAD_DIM": "64"}, 128, 8, 2},
		{"no arch", "", "bf16", "", nil, 64, 4, 2},
		{"sm_80", "sm_80", "bf16", "", nil, 64, 4, 2},
		{"sm_90a without wgmma", "sm_90a", "bf16", "0", nil, 64, 4, 2},
		{"f32 has no tensor-core tiles", "sm_90a", "f32", "", nil, 64, 4, 2},
		{"a caller's BLOCK_M turns tuning off", "sm_90a", "bf16", "", map[string]string{"BLOCK_M": "64"}, 64, 4, 2},
		{"a caller's num_warps too", "sm_90a", "bf16", "", map[string]string{"num_warps": "4"}, 64, 4, 2},
		// num_stages alone keeps the rest of the set (a persistent kernel
		// at D = 128 needs two: three do not fit beside its buffers).
		{"a caller's num_stages keeps the tiles", "sm_90a", "bf16", "", map[string]string{"num_stages": "2"}, 128, 8, 2},
		{"persistent with two stages", "sm_90a", "bf16", "", map[string]string{"num_stages": "2", "persistent": "true"}, 128, 8, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(sm90.EnvWGMMA, c.wgmma)
			consts := map[string]string{"DTYPE": c.dtype, "HEAD_DIM": "128"}
			for k, v := range c.consts {
				consts[k] = v
			}
			res, err := Compile(Request{Kernel: "flash_fwd", Mask: "causal", Consts: consts, Arch: c.arch})
			if err != nil {
				t.Fatal(err)
			}
			a := res.Attrs()
			if a["BLOCK_M"] != c.bm || a["num_warps"] != c.nw || a["num_stages"] != c.ns {
				t.Errorf("BLOCK_M=%d num_warps=%d num_stages=%d, want %d, %d and %d", a["BLOCK_M"], a["num_warps"], a["num_stages"], c.bm, c.nw, c.ns)
			}
			if got, want := res.Ident.Consts["BLOCK_M"], strconv.FormatInt(a["BLOCK_M"], 10); got != want {
				t.Errorf("identity has BLOCK_M=%s, the kernel %s", got, want)
			}
		})
	}
}
