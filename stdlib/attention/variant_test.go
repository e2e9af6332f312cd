package attention_test

import (
	"slices"
	"testing"

	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/stdlib/attention"
)

// variantOptions are every combination of the options that choose kernels.
var variantOptions = []attention.VariantOptions{{}, {Sinks: true}, {Deterministic: true}, {Sinks: true, Deterministic: true}}

// TestVariantsCoverContracts checks that every stdlib kernel runs in some
// variant (block_classify runs in the block-mask builders), so that a
// kernel added without one is noticed.
func TestVariantsCoverContracts(t *testing.T) {
	used := map[string]bool{attention.BlockClassify.Kernel: true}
	for _, v := range attention.Variants() {
		for _, o := range variantOptions {
			for _, k := range v.Names(o) {
				used[k] = true
			}
		}
	}
	for _, c := range attention.Contracts() {
		if !used[c.Kernel] {
			t.Errorf("kernel %s is in no variant", c.Kernel)
		}
	}
}

// TestVariantsConsistent checks each variant against its kernels'
// contracts, for every combination of options it takes: the main kernel
// exists and takes the mods, each workspace buffer is written by one
// kernel and read by a later one (in place: written by the main kernel,
// which reads it back) or is a kernel's zeroed counters, each result is
// written, and the per-sequence lists are the main kernel's tensors.
func TestVariantsConsistent(t *testing.T) {
	names := map[string]bool{}
	for _, v := range attention.Variants() {
		if names[v.Name] {
			t.Errorf("two variants named %q", v.Name)
		}
		names[v.Name] = true
		ran := false
		for _, o := range variantOptions {
			cs, err := v.Kernels(o)
			if err != nil {
				continue
			}
			ran = true
			if v.Main < 0 || v.Main >= len(cs) {
				t.Errorf("%s %+v: main kernel %d of %d", v.Name, o, v.Main, len(cs))
				continue
			}
			if main := cs[v.Main]; !slices.Contains(main.Mods, "mask") {
				t.Errorf("%s %+v: main kernel %s takes no mask", v.Name, o, main.Kernel)
			}
			for _, name := range v.Workspace {
				w, r := firstUse(cs, name, true), firstUse(cs, name, false)
				if zeroed(cs, name) || v.InPlace && w == v.Main {
					continue
				}
				if w < 0 || r <= w {
					t.Errorf("%s %+v: workspace buffer %s is written by kernel %d and read by %d", v.Name, o, name, w, r)
				}
			}
			for _, name := range v.Results {
				if firstUse(cs, name, true) < 0 {
					t.Errorf("%s %+v: no kernel writes result %s", v.Name, o, name)
				}
			}
			if l := v.Lists; l != nil {
				for _, name := range []string{l.RowStart, l.Counts, l.FullCounts, l.ListStart, l.Indices} {
					if firstUse(cs[v.Main:v.Main+1], name, false) < 0 {
						t.Errorf("%s %+v: main kernel %s has no block-mask list %s", v.Name, o, cs[v.Main].Kernel, name)
					}
				}
			}
		}
		if !ran {
			t.Errorf("%s runs with no options", v.Name)
		}
	}
}

// zeroed reports whether a kernel of cs takes name as zeroed counters.
func zeroed(cs []*launch.Contract, name string) bool {
	for _, c := range cs {
		for _, tn := range c.Tensors {
			if tn.Name == name && tn.Zeroed {
				return true
			}
		}
	}
	return false
}

// firstUse is the index of the first of cs with tensor name as an output
// (or an input), -1 if none.
func firstUse(cs []*launch.Contract, name string, output bool) int {
	for i, c := range cs {
		for _, tn := range c.Tensors {
			if tn.Name == name && tn.Output == output {
				return i
			}
		}
	}
	return -1
}
