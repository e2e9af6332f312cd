package attention

import (
	"maps"
	"slices"

	"github.com/fac-compiler/fac/launch"
)

// contracts are the stdlib kernels' launch contracts by kernel name; each
// kernel's Go file beside its .fa registers its own, so adding a kernel
// touches nothing outside its files.
var contracts = map[string]*launch.Contract{}

func register(c *launch.Contract) {
	if _, dup := contracts[c.Kernel]; dup {
		panic("attention: two contracts for kernel " + c.Kernel)
	}
	contracts[c.Kernel] = c
}

// Contract is the launch contract of a stdlib kernel.
func Contract(kernel string) (*launch.Contract, bool) {
	c, ok := contracts[kernel]
	return c, ok
}

// Contracts lists every stdlib kernel's contract, by kernel name.
func Contracts() []*launch.Contract {
	var out []*launch.Contract
	for _, k := range slices.Sorted(maps.Keys(contracts)) {
		out = append(out, contracts[k])
	}
	return out
}
