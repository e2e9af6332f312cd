package launch

import (
	"maps"
	"testing"

	"github.com/fac-compiler/fac/tir"
)

// TestTunedFor: the first set a request leaves whole, less what it gives;
// arguments of TunedAlone may take other values; a set's mod conditions
// must hold for the request's mods (never for a user's own); a kernel
// that lacks an argument of a set skips it; a variant's own sets come
// before those of the one it extends, and a variant with sets does not
// fall back to another's; none applies where V's head dim is not Q's.
func TestTunedFor(t *testing.T) {
	on := func(v string, d int) TuneCond {
		return TuneCond{Variants: []string{v}, DTypes: []tir.Elem{tir.BF16}, HeadDims: []int{d}}
	}
	with := func(w TuneCond, mask, score ModPred) TuneCond { w.Mask, w.Score = mask, score; return w }
	c := &Contract{
		Mods: []string{"mask", "score"},
		Tuned: []TunedSet{
			{When: with(on("wgmma", 128), ModIs{"document", "sliding_window"}, nil),
				Args: map[string]string{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3", "heads_minor": "true"}},
			{When: on("wgmma", 128), Args: map[string]string{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3"}},
			{When: with(on("wgmma", 64), ModIs{"none", "causal"}, ModIs{"identity"}),
				Args: map[string]string{"BLOCK_M": "64", "groups": "3", "SPARSE_Q": "192", "pingpong": "false"}},
			{When: on("wgmma", 64), Args: map[string]string{"BLOCK_M": "128", "num_warps": "8"}},
			{When: on("wgmma-cpasync", 64), Args: map[string]string{"BLOCK_M": "128", "num_warps": "8"}},
			{When: with(on("wgmma-odd", 64), ModFunc(func(m ModInfo) bool { return m.Kind == "" }), nil),
				Args: map[string]string{"BLOCK_M": "32"}},
		},
		TunedAlone: []string{"num_stages"},
	}
	req := func(variants []string, d int, mask, score ModKind, kv ...string) TuneRequest {
		r := TuneRequest{Variants: variants, DType: tir.BF16, HeadDim: d,
			Mods: map[string]ModInfo{"mask": {Kind: mask}, "score": {Kind: score}}, Args: map[string]string{}}
		for i := 0; i+1 < len(kv); i += 2 {
			r.Args[kv[i]] = kv[i+1]
		}
		return r
	}
	w := []string{"wgmma"}
	d128 := map[string]string{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3"}
	g3 := map[string]string{"BLOCK_M": "64", "groups": "3", "SPARSE_Q": "192", "pingpong": "false"}
	t128 := map[string]string{"BLOCK_M": "128", "num_warps": "8"}
	undeclared := req(w, 64, "none", "identity")
	undeclared.Declared = func(s string) bool { return s != "groups" }
	noScore := req(w, 64, "none", "identity")
	delete(noScore.Mods, "score")
	f16 := req(w, 64, "none", "identity")
	f16.DType = tir.F16
	dv := func(d, v int) TuneRequest { r := req(w, d, "none", "identity"); r.HeadDimV = v; return r }
	for _, tc := range []struct {
		name string
		req  TuneRequest
		want map[string]string
	}{
		{"nothing given", req(w, 128, "none", "identity"), d128},
		{"a tile argument given", req(w, 128, "none", "identity", "BLOCK_M", "64"), nil},
		{"the same value given", req(w, 128, "none", "identity", "BLOCK_M", " 128"), map[string]string{"num_warps": "8", "num_stages": "3"}},
		{"num_stages given", req(w, 128, "none", "identity", "num_stages", "2"), map[string]string{"BLOCK_M": "128", "num_warps": "8"}},
		{"other arguments given", req(w, 128, "none", "identity", "persistent", "true"), d128},
		{"a mask's set", req(w, 128, "document", "identity"), map[string]string{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3", "heads_minor": "true"}},
		{"a mask's set broken", req(w, 128, "sliding_window", "identity", "heads_minor", "false"), d128},
		{"a user's mask", req(w, 128, "", "identity"), d128},
		{"first set", req(w, 64, "causal", "identity"), g3},
		{"another score: second set", req(w, 64, "causal", "alibi"), t128},
		{"a user's score: second set", req(w, 64, "causal", ""), t128},
		{"another mask: second set", req(w, 64, "document", "identity"), t128},
		{"other blocks: second set", req(w, 64, "none", "identity", "SPARSE_Q", "128"), t128},
		{"pingpong: second set", req(w, 64, "none", "identity", "pingpong", "true"), t128},
		{"undeclared: second set", undeclared, t128},
		{"no score parameter: second set", noScore, t128},
		{"no set fits", req(w, 64, "none", "identity", "BLOCK_M", "32"), nil},
		{"no set fits: no shorter variant", req([]string{"wgmma-cpasync", "wgmma"}, 64, "none", "identity", "BLOCK_M", "64"), nil},
		{"the variant's own sets", req([]string{"wgmma-cpasync", "wgmma"}, 64, "none", "identity"), t128},
		{"the extended variant's sets", req([]string{"wgmma-tmastore", "wgmma"}, 64, "none", "identity"), g3},
		{"a function's condition", req([]string{"wgmma-odd"}, 64, "", "identity"), map[string]string{"BLOCK_M": "32"}},
		{"a function's condition fails", req([]string{"wgmma-odd"}, 64, "none", "identity"), nil},
		{"no set for the dtype", f16, nil},
		{"no set for the head dim", req(w, 32, "none", "identity"), nil},
		{"a padded head dim takes its power of two's set", req(w, 96, "none", "identity"), d128},
		{"no set for the variant", req([]string{""}, 64, "none", "identity"), nil},
		{"V's head dim the same", dv(128, 128), d128},
		{"no set for another V head dim", dv(128, 64), nil},
		{"no set for a wider V", dv(64, 128), nil},
	} {
		got := c.TunedFor(tc.req)
		if !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
