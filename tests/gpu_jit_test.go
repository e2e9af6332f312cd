//go:build gpu

package tests

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// TestGPUNoJITPerformanceWarnings compiles every kernel of the test bundles
// built for this GPU's arch through the driver's JIT, as the runtime does
// (cuLink: relocatable code; a whole module for kernels with setmaxnreg,
// cuda.JITLog), and fails on a performance warning (ptxas C75xx). The command-line ptxas compiles whole programs and stays quiet
// where the JIT serializes every wgmma (C7509 for the out-of-line slow path
// of an IEEE f32 division, which the forward's O / l had), so its -v is not
// the check.
func TestGPUNoJITPerformanceWarnings(t *testing.T) {
	gpu, err := fac.OpenCUDA(0)
	if err != nil {
		t.Fatal(err)
	}
	paths := testBundlePaths()
	if len(paths) == 0 {
		t.Skip("no FAC_BUNDLE")
	}
	var arts []artifact.Artifact
	var from []string
	for _, path := range paths {
		b, err := bundle.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range b.Kernels {
			if a.Ident.Arch == gpu.Arch {
				arts = append(arts, a)
				from = append(from, filepath.Base(path))
			}
		}
	}
	// The JIT runs on the host's cores; eight links at a time.
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range arts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			log, err := cuda.JITLog([]byte(arts[i].PTX))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("%s (%s): %v", arts[i].Ident, from[i], err)
			}
			for _, w := range cuda.PerformanceWarnings(log) {
				t.Errorf("%s (%s): %s", arts[i].Ident, from[i], w)
			}
		}()
	}
	wg.Wait()
	n := len(arts)
	t.Logf("%d kernels compiled by the JIT for %s", n, gpu.Arch)
}
