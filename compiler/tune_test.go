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
		bm, nw                   int64
	}{
		{"sm_90a wgmma bf16", "sm_90a", "bf16", "", nil, 128, 8},
		{"sm_90a wgmma f16", "sm_90a", "f16", "", nil, 128, 8},
		{"no arch", "", "bf16", "", nil, 64, 4},
		{"sm_80", "sm_80", "bf16", "", nil, 64, 4},
		{"sm_90a without wgmma", "sm_90a", "bf16", "0", nil, 64, 4},
		{"f32 has no tensor-core tiles", "sm_90a", "f32", "", nil, 64, 4},
		{"a caller's BLOCK_M turns tuning off", "sm_90a", "bf16", "", map[string]string{"BLOCK_M": "64"}, 64, 4},
		{"a caller's num_warps too", "sm_90a", "bf16", "", map[string]string{"num_warps": "4"}, 64, 4},
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
			if a["BLOCK_M"] != c.bm || a["num_warps"] != c.nw {
				t.Errorf("BLOCK_M=%d num_warps=%d, want %d and %d", a["BLOCK_M"], a["num_warps"], c.bm, c.nw)
			}
			if got, want := res.Ident.Consts["BLOCK_M"], strconv.FormatInt(a["BLOCK_M"], 10); got != want {
				t.Errorf("identity has BLOCK_M=%s, the kernel %s", got, want)
			}
		})
	}
}
