package compiler

import (
	"strconv"
	"testing"

	"github.com/fac-compiler/fac/codegen"
)

// TestTunedConsts checks that a request naming its arch gets the first
// tuned set for the arch's code generation variant (and mask) that its own
// arguments leave whole, and that every other request keeps the defaults.
func TestTunedConsts(t *testing.T) {
	d64 := func(kv ...string) map[string]string {
		m := map[string]string{"HEAD_DIM": "64"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name, arch, dtype, wgmma, tma string // wgmma, tma: "0" turns it off
		mask, kernel                  string
		consts                        map[string]string
		bm, nw, ns, groups, sq, hm    int64
	}{
		// Three K/V buffers at D = 128.
		{"sm_90a wgmma bf16", "sm_90a", "bf16", "", "", "", "", nil, 128, 8, 3, 0, 128, 0},
		{"sm_90a wgmma f16", "sm_90a", "f16", "", "", "", "", nil, 128, 8, 3, 0, 128, 0},
		// D = 64: three consumer groups on 192-row mask blocks first,
		// launched heads-minor for causal-shaped masks (the default here).
		{"sm_90a wgmma bf16 D = 64", "sm_90a", "bf16", "", "", "", "", d64(), 64, 4, 4, 3, 192, 1},
		{"D = 64 causal heads-major on request", "sm_90a", "bf16", "", "", "", "", d64("heads_minor", "false"), 64, 4, 4, 3, 192, 0},
		{"D = 64 with 128-row mask blocks", "sm_90a", "bf16", "", "", "", "", d64("SPARSE_Q", "128"), 128, 8, 2, 0, 128, 0},
		{"D = 64 with pingpong", "sm_90a", "bf16", "", "", "", "", d64("pingpong", "true"), 128, 8, 2, 0, 128, 0},
		{"D = 64 heads_minor", "sm_90a", "bf16", "", "", "", "", d64("heads_minor", "true"), 64, 4, 4, 3, 192, 1},
		{"D = 64 none heads_minor", "sm_90a", "bf16", "", "", "none", "", d64("heads_minor", "true"), 128, 8, 2, 0, 128, 1},
		{"D = 64 with the groups' own BLOCK_M", "sm_90a", "bf16", "", "", "", "", d64("BLOCK_M", "64"), 64, 4, 4, 3, 192, 1},
		{"D = 64 without TMA: no producer for groups", "sm_90a", "bf16", "", "0", "", "", d64(), 128, 8, 2, 0, 128, 0},
		{"D = 64 sinks: no groups argument", "sm_90a", "bf16", "", "", "", "flash_fwd_sinks", d64(), 128, 8, 2, 0, 128, 0},
		// Not for masks and scores that spill at the groups' registers, nor
		// sliding window (slower), nor a user's own mod.
		{"D = 64 alibi", "sm_90a", "bf16", "", "", "", "", d64("score", "alibi"), 128, 8, 2, 0, 128, 0},
		{"D = 64 softcap: heads-major", "sm_90a", "bf16", "", "", "", "", d64("score", "softcap(30.0)"), 64, 4, 4, 3, 192, 0},
		{"D = 64 document", "sm_90a", "bf16", "", "", "document", "", d64(), 128, 8, 2, 0, 128, 0},
		{"D = 64 sliding window", "sm_90a", "bf16", "", "", "sliding_window(1023, 0)", "", d64(), 128, 8, 2, 0, 128, 0},
		{"D = 64 prefix-LM", "sm_90a", "bf16", "", "", "prefix_lm(1024)", "", d64(), 64, 4, 4, 3, 192, 1},
		{"D = 64 none", "sm_90a", "bf16", "", "", "none", "", d64(), 64, 4, 4, 3, 192, 0},
		{"D = 64 a user's mask", "sm_90a", "bf16", "", "", "mine", "", d64(), 128, 8, 2, 0, 128, 0},
		// Sliding window on two CTAs a multiprocessor (two buffers, 64-key
		// blocks), unless the request breaks that set; heads_minor for
		// document (as ids and as spans) and sliding window.
		{"sliding window", "sm_90a", "bf16", "", "", "sliding_window(1023, 0)", "", nil, 128, 8, 2, 0, 128, 1},
		{"sliding window f16", "sm_90a", "f16", "", "", "sliding_window(1023, 0)", "", nil, 128, 8, 2, 0, 128, 1},
		{"sliding window softcap: one CTA", "sm_90a", "bf16", "", "", "sliding_window(1023, 0)", "", map[string]string{"score": "softcap(30.0)"}, 128, 8, 3, 0, 128, 1},
		{"sliding window on 128-key blocks: one CTA", "sm_90a", "bf16", "", "", "sliding_window(1023, 0)", "", map[string]string{"SPARSE_K": "128"}, 128, 8, 3, 0, 128, 1},
		{"sliding window with a producer: one CTA", "sm_90a", "bf16", "", "", "sliding_window(1023, 0)", "", map[string]string{"warp_specialize": "true"}, 128, 8, 3, 0, 128, 1},
		{"document", "sm_90a", "bf16", "", "", "document", "", nil, 128, 8, 3, 0, 128, 1},
		{"document_spans", "sm_90a", "bf16", "", "", "document_spans", "", nil, 128, 8, 3, 0, 128, 1},
		{"document heads-major on request", "sm_90a", "bf16", "", "", "document", "", map[string]string{"heads_minor": "false"}, 128, 8, 3, 0, 128, 0},
		{"no arch", "", "bf16", "", "", "", "", nil, 64, 4, 2, 0, 128, 0},
		{"sm_80", "sm_80", "bf16", "", "", "", "", nil, 64, 4, 2, 0, 128, 0},
		{"sm_90a without wgmma", "sm_90a", "bf16", "0", "", "", "", nil, 64, 4, 2, 0, 128, 0},
		{"f32 has no tensor-core tiles", "sm_90a", "f32", "", "", "", "", nil, 64, 4, 2, 0, 128, 0},
		{"a caller's BLOCK_M turns tuning off", "sm_90a", "bf16", "", "", "", "", map[string]string{"BLOCK_M": "64"}, 64, 4, 2, 0, 128, 0},
		{"a caller's num_warps too", "sm_90a", "bf16", "", "", "", "", map[string]string{"num_warps": "4"}, 64, 4, 2, 0, 128, 0},
		// num_stages alone keeps the rest of the set (a persistent kernel
		// at D = 128 needs two: three do not fit beside its buffers).
		{"a caller's num_stages keeps the tiles", "sm_90a", "bf16", "", "", "", "", map[string]string{"num_stages": "2"}, 128, 8, 2, 0, 128, 0},
		{"persistent with two stages", "sm_90a", "bf16", "", "", "", "", map[string]string{"num_stages": "2", "persistent": "true"}, 128, 8, 2, 0, 128, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := codegen.TargetConfig{Arch: c.arch, NoWGMMA: c.wgmma == "0", NoTMA: c.tma == "0"}
			consts := map[string]string{"DTYPE": c.dtype, "HEAD_DIM": "128"}
			for k, v := range c.consts {
				consts[k] = v
			}
			mask, kernel := "causal", "flash_fwd"
			if c.mask != "" {
				mask = c.mask
			}
			if c.kernel != "" {
				kernel = c.kernel
			}
			score := consts["score"]
			delete(consts, "score")
			res, err := Compile(Request{Kernel: kernel, Mask: mask, Score: score, Consts: consts, Target: target,
				Sources: map[string]string{"mine.fa": "mask mine(b, h, q_idx, kv_idx) {\n    return kv_idx <= q_idx\n}\n"}})
			if err != nil {
				t.Fatal(err)
			}
			a := res.Attrs()
			if a["BLOCK_M"] != c.bm || a["num_warps"] != c.nw || a["num_stages"] != c.ns || a["consumer_groups"] != c.groups && !(c.groups == 0 && a["consumer_groups"] == 1) ||
				a["SPARSE_Q"] != c.sq || a["heads_minor"] != c.hm {
				t.Errorf("BLOCK_M=%d num_warps=%d num_stages=%d consumer_groups=%d SPARSE_Q=%d heads_minor=%d, want %d, %d, %d, %d, %d and %d",
					a["BLOCK_M"], a["num_warps"], a["num_stages"], a["consumer_groups"], a["SPARSE_Q"], a["heads_minor"], c.bm, c.nw, c.ns, c.groups, c.sq, c.hm)
			}
			ctas := int64(1)
			if c.ns == 2 && c.mask == "sliding_window(1023, 0)" && c.consts["HEAD_DIM"] != "64" {
				ctas = 2
			}
			if got := max(1, a["ctas_per_sm"]); got != ctas {
				t.Errorf("ctas_per_sm = %d, want %d", got, ctas)
			}
			if got, want := res.Ident.Consts["BLOCK_M"], strconv.FormatInt(a["BLOCK_M"], 10); got != want {
				t.Errorf("identity has BLOCK_M=%s, the kernel %s", got, want)
			}
		})
	}
}

// TestTunedKeysShorten: a codegen variant with suffixes looks its tuned
// sets up under each variant it extends in turn, so ctas-per-sm=2 without
// TMA (wgmma-cpasync-ctas2) gets wgmma-cpasync's sets (no consumer groups,
// which need a producer), not wgmma's.
func TestTunedKeysShorten(t *testing.T) {
	target, err := codegen.ParseTargetConfig("sm_90a", "tma=off", "ctas-per-sm=2")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Compile(Request{Kernel: "flash_fwd", Mask: "causal", Target: target,
		Consts: map[string]string{"DTYPE": "bf16", "HEAD_DIM": "64"}})
	if err != nil {
		t.Fatal(err)
	}
	if a := res.Attrs(); a["BLOCK_M"] != 128 || a["consumer_groups"] > 1 || a["num_warps"] != 8 {
		t.Errorf("BLOCK_M=%d consumer_groups=%d num_warps=%d, want wgmma-cpasync's 128, 1, 8", a["BLOCK_M"], a["consumer_groups"], a["num_warps"])
	}
}
