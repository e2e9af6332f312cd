package launch

import (
	"maps"
	"testing"
)

// TestTunedFor: the first set a request leaves whole, less what it gives;
// arguments of TunedAlone may take other values; a mask's own sets come
// first; a kernel that lacks an argument of a set skips it.
func TestTunedFor(t *testing.T) {
	c := &Contract{
		Tuned: map[string][]map[string]string{
			"wgmma/bf16/128": {{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3"}},
			"wgmma/bf16/64": {
				{"BLOCK_M": "64", "groups": "3", "SPARSE_Q": "192", "pingpong": "false"},
				{"BLOCK_M": "128", "num_warps": "8"},
			},
			"wgmma/bf16/128/document": {{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3", "heads_minor": "true"}},
			"wgmma-cpasync/bf16/64":   {{"BLOCK_M": "128", "num_warps": "8"}},
		},
		TunedAlone: []string{"num_stages"},
	}
	for _, tc := range []struct {
		name     string
		keys     []string
		mask     string
		given    map[string]string
		declared func(string) bool
		want     map[string]string
	}{
		{"nothing given", []string{"wgmma/bf16/128"}, "", nil, nil, map[string]string{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3"}},
		{"a tile argument given", []string{"wgmma/bf16/128"}, "", map[string]string{"BLOCK_M": "64"}, nil, nil},
		{"the same value given", []string{"wgmma/bf16/128"}, "", map[string]string{"BLOCK_M": "128"}, nil, map[string]string{"num_warps": "8", "num_stages": "3"}},
		{"num_stages given", []string{"wgmma/bf16/128"}, "", map[string]string{"num_stages": "2"}, nil, map[string]string{"BLOCK_M": "128", "num_warps": "8"}},
		{"other arguments given", []string{"wgmma/bf16/128"}, "", map[string]string{"persistent": "true"}, nil, map[string]string{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3"}},
		{"first set", []string{"wgmma/bf16/64"}, "causal", nil, nil, map[string]string{"BLOCK_M": "64", "groups": "3", "SPARSE_Q": "192", "pingpong": "false"}},
		{"other blocks: second set", []string{"wgmma/bf16/64"}, "", map[string]string{"SPARSE_Q": "128"}, nil, map[string]string{"BLOCK_M": "128", "num_warps": "8"}},
		{"pingpong: second set", []string{"wgmma/bf16/64"}, "", map[string]string{"pingpong": "true"}, nil, map[string]string{"BLOCK_M": "128", "num_warps": "8"}},
		{"undeclared: second set", []string{"wgmma/bf16/64"}, "", nil, func(s string) bool { return s != "groups" }, map[string]string{"BLOCK_M": "128", "num_warps": "8"}},
		{"no set fits", []string{"wgmma/bf16/64"}, "", map[string]string{"BLOCK_M": "32"}, nil, nil},
		{"the mask's set", []string{"wgmma/bf16/128"}, "document", nil, nil, map[string]string{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3", "heads_minor": "true"}},
		{"the mask's set broken", []string{"wgmma/bf16/128"}, "document", map[string]string{"heads_minor": "false"}, nil, map[string]string{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3"}},
		{"the variant's own key", []string{"wgmma-cpasync/bf16/64", "wgmma/bf16/64"}, "", nil, nil, map[string]string{"BLOCK_M": "128", "num_warps": "8"}},
		{"the shared key", []string{"wgmma-tmastore/bf16/64", "wgmma/bf16/64"}, "", nil, nil, map[string]string{"BLOCK_M": "64", "groups": "3", "SPARSE_Q": "192", "pingpong": "false"}},
		{"no set for the key", []string{"wgmma/f16/64"}, "", nil, nil, nil},
	} {
		got := c.TunedFor(tc.keys, tc.mask, tc.given, tc.declared)
		if !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
