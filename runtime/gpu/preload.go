package gpu

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// Resources are what a loaded kernel uses per thread, as the driver's JIT
// (ptxas) allocated them: registers, and local memory (register spills and
// stack) in bytes.
func (k *Kernel) Resources() (regs, localBytes int, err error) {
	if regs, err = k.fn.Attribute(cuda.FuncAttrNumRegs); err != nil {
		return 0, 0, err
	}
	localBytes, err = k.fn.Attribute(cuda.FuncAttrLocalSizeBytes)
	return regs, localBytes, err
}

// Preload makes the kernels of results ready, as Kernel does one by one,
// but runs the driver's JIT (ptxas, about a second for a large kernel) on
// up to workers kernels at once (0: one per CPU). A suite of many kernels
// on a fresh machine then waits for the slowest few, not for their sum.
func (d *Device) Preload(ctx context.Context, results []*compiler.Result, workers int) error {
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	type item struct {
		key   string
		art   *artifact.Artifact
		image []byte // without a disk cache: the cubin to load
		err   error
	}
	var items []*item
	seen := map[string]bool{}
	for _, res := range results {
		key, a, err := d.find(ctx, res)
		if err != nil {
			return err
		}
		if a == nil || seen[key] {
			continue // loaded already
		}
		seen[key] = true
		items = append(items, &item{key: key, art: a})
	}
	// The JIT, concurrently: through the disk cache when there is one (the
	// loads below then hit it), else straight to images.
	var wg sync.WaitGroup
	sem := make(chan struct{}, workers)
	for _, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if d.Cache != nil {
				_, it.err = d.cubin(it.art)
			} else {
				it.image, it.err = cuda.CompilePTX([]byte(it.art.PTX))
			}
		}()
	}
	wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, it := range items {
		if it.err != nil {
			return fmt.Errorf("compiling %s for %s: %w", it.art.Entry, d.Name, it.err)
		}
		if _, ok := d.modules[it.key]; ok {
			continue
		}
		var err error
		if it.image != nil {
			var mod *cuda.Module
			if mod, err = cuda.LoadModule(it.image); err == nil {
				_, err = d.finish(it.key, it.art, mod)
			}
		} else {
			_, err = d.load(it.key, it.art)
		}
		if err != nil {
			return fmt.Errorf("loading kernel %s: %w", it.art.Entry, err)
		}
	}
	return nil
}
