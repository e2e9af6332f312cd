package launch

import (
	"maps"
	"testing"
)

// TestTunedFor: all of a tuned set or none of it, except the arguments of
// TunedAlone, which a request may set while keeping the rest.
func TestTunedFor(t *testing.T) {
	c := &Contract{
		Tuned:      map[string]map[string]string{"wgmma/bf16/128": {"BLOCK_M": "128", "num_warps": "8", "num_stages": "3"}},
		TunedAlone: []string{"num_stages"},
	}
	for _, tc := range []struct {
		name  string
		given map[string]string
		want  map[string]string
	}{
		{"nothing given", nil, map[string]string{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3"}},
		{"a tile argument given", map[string]string{"BLOCK_M": "64"}, nil},
		{"num_stages given", map[string]string{"num_stages": "2"}, map[string]string{"BLOCK_M": "128", "num_warps": "8"}},
		{"other arguments given", map[string]string{"persistent": "true"}, map[string]string{"BLOCK_M": "128", "num_warps": "8", "num_stages": "3"}},
	} {
		got := c.TunedFor("wgmma/bf16/128", tc.given)
		if !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := c.TunedFor("wgmma/f16/64", nil); got != nil {
		t.Errorf("no set for the key: %v, want nil", got)
	}
}
