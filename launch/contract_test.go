package launch

import (
	"maps"
	"testing"
)

// TestTunedFor: the first set a request leaves whole, less what it gives;
// arguments of TunedAlone may take other values; a set's mod entries are
// conditions on the request's mods; a kernel that lacks an argument of a
// set skips it; a variant's own key comes before the one it shares.
func TestTunedFor(t *testing.T) {
	c := &Contract{
		Mods: []string{"mask", "score"},
		Tuned: map[string][]map[string]string{
			"wgmma/bf16/128": {
				{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3", "heads_minor": "true", "mask": "document|sliding_window"},
				{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3"},
			},
			"wgmma/bf16/64": {
				{"BLOCK_M": "64", "groups": "3", "SPARSE_Q": "192", "pingpong": "false", "mask": "none|causal", "score": "identity"},
				{"BLOCK_M": "128", "num_warps": "8"},
			},
			"wgmma-cpasync/bf16/64": {{"BLOCK_M": "128", "num_warps": "8"}},
		},
		TunedAlone: []string{"num_stages"},
	}
	mods := func(mask, score string, kv ...string) map[string]string {
		m := map[string]string{"mask": mask, "score": score}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	d128 := map[string]string{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3"}
	g3 := map[string]string{"BLOCK_M": "64", "groups": "3", "SPARSE_Q": "192", "pingpong": "false"}
	t128 := map[string]string{"BLOCK_M": "128", "num_warps": "8"}
	for _, tc := range []struct {
		name     string
		keys     []string
		given    map[string]string
		declared func(string) bool
		want     map[string]string
	}{
		{"nothing given", []string{"wgmma/bf16/128"}, mods("none", "identity"), nil, d128},
		{"a tile argument given", []string{"wgmma/bf16/128"}, mods("none", "identity", "BLOCK_M", "64"), nil, nil},
		{"the same value given", []string{"wgmma/bf16/128"}, mods("none", "identity", "BLOCK_M", "128"), nil, map[string]string{"num_warps": "8", "num_stages": "3"}},
		{"num_stages given", []string{"wgmma/bf16/128"}, mods("none", "identity", "num_stages", "2"), nil, map[string]string{"BLOCK_M": "128", "num_warps": "8"}},
		{"other arguments given", []string{"wgmma/bf16/128"}, mods("none", "identity", "persistent", "true"), nil, d128},
		{"a mask's set", []string{"wgmma/bf16/128"}, mods("document", "identity"), nil, map[string]string{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3", "heads_minor": "true"}},
		{"a mask's set broken", []string{"wgmma/bf16/128"}, mods("sliding_window", "identity", "heads_minor", "false"), nil, d128},
		{"a user's mask", []string{"wgmma/bf16/128"}, mods("", "identity"), nil, d128},
		{"first set", []string{"wgmma/bf16/64"}, mods("causal", "identity"), nil, g3},
		{"another score: second set", []string{"wgmma/bf16/64"}, mods("causal", "alibi"), nil, t128},
		{"another mask: second set", []string{"wgmma/bf16/64"}, mods("document", "identity"), nil, t128},
		{"other blocks: second set", []string{"wgmma/bf16/64"}, mods("none", "identity", "SPARSE_Q", "128"), nil, t128},
		{"pingpong: second set", []string{"wgmma/bf16/64"}, mods("none", "identity", "pingpong", "true"), nil, t128},
		{"undeclared: second set", []string{"wgmma/bf16/64"}, mods("none", "identity"), func(s string) bool { return s != "groups" }, t128},
		{"no set fits", []string{"wgmma/bf16/64"}, mods("none", "identity", "BLOCK_M", "32"), nil, nil},
		{"the variant's own key", []string{"wgmma-cpasync/bf16/64", "wgmma/bf16/64"}, mods("none", "identity"), nil, t128},
		{"the shared key", []string{"wgmma-tmastore/bf16/64", "wgmma/bf16/64"}, mods("none", "identity"), nil, g3},
		{"no set for the key", []string{"wgmma/f16/64"}, nil, nil, nil},
	} {
		got := c.TunedFor(tc.keys, tc.given, tc.declared)
		if !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
