package compiler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// tuneUserSources are a user's own mask and score, which tuned sets that
// name stdlib mods never take.
var tuneUserSources = map[string]string{"mine.fa": "mask mine(b, h, q_idx, kv_idx) {\n    return kv_idx <= q_idx\n}\n" +
	"score mine_score(s, b, h, q_idx, kv_idx) {\n    return s * 0.5\n}\n"}

// tuneTargets are targets whose tuned-set variants (TuneVariants) differ:
// no arch, archs off the wgmma path, and sm_90a with each switch and some
// combinations, including switches that do not apply (Effective).
var tuneTargets = [][]string{
	nil, {"sm_80"}, {"sm_86"}, {"sm_90"}, {"sm_90a"}, {"sm_90a", "wgmma=off"}, {"sm_90a", "tma=off"},
	{"sm_90a", "release=barrier"}, {"sm_90a", "dq=red"}, {"sm_90a", "dq=bulk"}, {"sm_90a", "tma-store=on"},
	{"sm_90a", "ctas-per-sm=2"}, {"sm_90a", "tma=off", "ctas-per-sm=2"}, {"sm_90a", "tma=off", "release=barrier"},
	{"sm_90a", "release=barrier", "dq=bulk", "tma-store=on", "ctas-per-sm=2"}, {"sm_90a", "wgmma=off", "tma=off"},
}

// tuneMasks and tuneScores: the kernel's default (""), every stdlib mod
// with arguments, combinators (whose own name is what a set sees) and a
// user's own.
var (
	tuneMasks = []string{"", "none", "causal", "causal_bottom_right", "sliding_window(1023, 0)", "prefix_lm(1024)",
		"document", "document_spans", "document_spans_kv", "chunked(128)", "and_masks(causal, document)",
		"or_masks(causal, noop_mask)", "not_mask(causal)", "noop_mask", "mine"}
	tuneScores = []string{"", "identity", "softcap(30.0)", "alibi", "mine_score"}
)

// tuneConsts are arguments a request may give: none, values equal to and
// other than a set's, arguments a set may take alone (TunedAlone), ones
// no set names, and text a set compares after trimming.
var tuneConsts = []map[string]string{
	nil, {"BLOCK_M": "64"}, {"BLOCK_M": "128"}, {"BLOCK_M": " 128 "}, {"BLOCK_M": "32"}, {"num_warps": "4"},
	{"num_stages": "2"}, {"num_stages": "4"}, {"SPARSE_Q": "128"}, {"SPARSE_K": "128"}, {"SPARSE_Q": "192"},
	{"heads_minor": "true"}, {"heads_minor": "false"}, {"heads_group": "8"}, {"warp_specialize": "true"},
	{"warp_specialize": "false"}, {"pingpong": "true"}, {"persistent": "true"}, {"packed_loads": "false"},
	{"fold_scale": "false"}, {"lazy_rescale": "false"}, {"consumer_groups": "3"}, {"tma_store": "false"},
	{"ctas_per_sm": "2"}, {"overlap": "false"}, {"num_stages": "2", "persistent": "true"}, {"mask": "document"},
	{"BLOCK_M": "64", "BLOCK_N": "128", "num_warps": "4"}, {"DETERMINISTIC": "true"},
}

// tuneRequest is one request of the matrix.
type tuneRequest struct {
	req Request
	cps []*lang.CParam
}

func (r tuneRequest) String() string {
	c := r.req.Consts
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		kv = append(kv, k+"="+c[k])
	}
	return fmt.Sprintf("%s|%s|mask=%s|score=%s|%s", r.req.Kernel, r.req.Target, r.req.Mask, r.req.Score, strings.Join(kv, ","))
}

// tuneMatrix calls each with every stdlib kernel × target × mask × score
// × DTYPE × HEAD_DIM with no other argument, and with DTYPE bf16, HEAD_DIM
// 64 and 128 and each of tuneConsts.
func tuneMatrix(t testing.TB, each func(prog *lang.Program, r tuneRequest)) {
	prog, err := Load(tuneUserSources)
	if err != nil {
		t.Fatal(err)
	}
	var targets []codegen.TargetConfig
	for _, tt := range tuneTargets {
		arch, opts := "", []string(nil)
		if len(tt) > 0 {
			arch, opts = tt[0], tt[1:]
		}
		c, err := codegen.ParseTargetConfig(arch, opts...)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, c)
	}
	dtypes := []string{"", "bf16", "f16", "f32", "bf16 ", "BF16"}
	dims := []string{"", "64", "128", "96", "0128"}
	for _, c := range attention.Contracts() {
		cps, ok := prog.KernelParams(c.Kernel)
		if !ok {
			t.Fatalf("no kernel %s", c.Kernel)
		}
		for _, target := range targets {
			for _, mask := range tuneMasks {
				for _, score := range tuneScores {
					for _, dt := range dtypes {
						for _, d := range dims {
							consts := map[string]string{}
							if dt != "" {
								consts["DTYPE"] = dt
							}
							if d != "" {
								consts["HEAD_DIM"] = d
							}
							each(prog, tuneRequest{Request{Kernel: c.Kernel, Mask: mask, Score: score, Consts: consts, Target: target}, cps})
						}
					}
					for _, d := range []string{"64", "128"} {
						for _, given := range tuneConsts {
							consts := map[string]string{"DTYPE": "bf16", "HEAD_DIM": d}
							maps.Copy(consts, given)
							each(prog, tuneRequest{Request{Kernel: c.Kernel, Mask: mask, Score: score, Consts: consts, Target: target}, cps})
						}
					}
				}
			}
		}
	}
}
