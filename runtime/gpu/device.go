// Package gpu runs compiled kernels on an NVIDIA GPU: it finds a kernel's
// artifact (loaded modules, AOT bundles, the kernel cache, or a build with
// llc), loads it through the driver (caching the JIT's cubin), and launches
// bound calls (launch.Call) on host data or on device pointers. It knows no
// kernel by name: contracts say what each launch needs.
package gpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/fac-compiler/fac/artifact"
	"github.com/fac-compiler/fac/artifact/bundle"
	"github.com/fac-compiler/fac/artifact/cache"
	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// Device is an NVIDIA GPU opened through the driver API (no cgo). Kernels
// are compiled with llc on first use, through the on-disk kernel cache, and
// their modules stay loaded, keyed by the kernel's identity.
type Device struct {
	Dev   cuda.Device
	Ctx   *cuda.Context
	Arch  string // sm_90a for an H100/H200, ...
	Name  string
	Cache *cache.Cache // nil: no disk cache
	// Warn receives the JIT's performance warnings (ptxas C75xx, e.g.
	// wgmma serialized) when it compiles a kernel; nil writes them to
	// standard error. A cached cubin is not compiled again, so each is
	// reported once.
	Warn func(kernel, warning string)

	cfg     Config
	mu      sync.Mutex
	llc     *llc.Tool
	modules map[string]*Kernel // by artifact.Ident.Key without build fields
	bundles []*bundle.Bundle
}

// Kernel is an artifact loaded on a device.
type Kernel struct {
	Art *artifact.Artifact
	mod *cuda.Module
	fn  *cuda.Function
	dev cuda.Device

	ctx *cuda.Context

	mu       sync.Mutex
	programs int // persistent launches' program count, once known
	// orders are the tile orders of persistent launches on the device, by
	// content (tileOrder).
	orders map[string]cuda.DevicePtr
}

// Config is how a device is set up; its zero value is the defaults. The
// API boundary fills it from the user's settings (fac's environment:
// FAC_ARCH, FAC_CACHE_DIR, FAC_LLC, FAC_LLC_TIMEOUT,
// FAC_PERSISTENT_PROGRAMS, FAC_BENCH_SYNC).
type Config struct {
	// Arch, when set, is the target kernels are compiled for instead of
	// the GPU's own (sm_80 runs the sm80 path on an H200: PTX is
	// forward-compatible).
	Arch string
	// CacheDir is the kernel cache's folder ("": cache.DefaultDir).
	CacheDir string
	// LLC finds llc when a kernel is in no bundle.
	LLC llc.Config
	// PersistentPrograms, when positive, is the program count of every
	// persistent launch instead of the GPU's (measurements; a count past
	// the tiles: one program per tile).
	PersistentPrograms int
	// BenchSync makes Bench time without the L2 flush, with a host
	// synchronization after each run, whose launch latency then counts
	// (fac's older timing, kept to compare the two).
	BenchSync bool
}

// Open opens GPU ordinal with its primary context and the kernel cache
// cfg names. On a machine without a driver it returns a clear error.
func Open(ordinal int, cfg Config) (*Device, error) {
	dev, err := cuda.GetDevice(ordinal)
	if err != nil {
		return nil, err
	}
	ctx, err := cuda.PrimaryContext(dev)
	if err != nil {
		return nil, err
	}
	if err := ctx.SetCurrent(); err != nil {
		return nil, err
	}
	arch, err := dev.Arch()
	if err != nil {
		return nil, err
	}
	if cfg.Arch != "" {
		// Run an older target's code on a newer GPU (sm_80 on an H200):
		// PTX is forward-compatible, and it selects codegen's other path.
		arch = cfg.Arch
	}
	name, _ := dev.Name()
	c, err := cache.Open(cfg.CacheDir)
	if err != nil {
		c = nil // a read-only home still runs, without the disk cache
	}
	return &Device{Dev: dev, Ctx: ctx, Arch: arch, Name: name, Cache: c, cfg: cfg, modules: map[string]*Kernel{}}, nil
}

// UnavailableError is a kernel that this device cannot have: it is in no
// bundle added, and it cannot be compiled here (Err says why: no llc).
type UnavailableError struct {
	Kernel string // the kernel's identity
	Err    error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("kernel %s is in no bundle and cannot be compiled: %v", e.Kernel, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// AddBundle makes the kernels of an AOT bundle available: a kernel found in
// a bundle for this GPU's arch is loaded from it, with no llc needed.
func (d *Device) AddBundle(b *bundle.Bundle) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bundles = append(d.bundles, b)
}

// Kernel finds res's kernel for this GPU (loaded, in a bundle, in the cache,
// or built with llc) and loads it. t, when not nil, gets the build's stage
// times.
func (d *Device) Kernel(ctx context.Context, res *compiler.Result, t *compiler.Timings) (*Kernel, error) {
	key, a, err := d.find(ctx, res, t)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if k, ok := d.modules[key]; ok {
		return k, nil
	}
	return d.load(key, a)
}

// find returns res's key among the loaded modules and, unless it is
// loaded, its artifact for this GPU: from a bundle, the cache, or built
// with llc (t, when not nil, gets the build's stage times).
func (d *Device) find(ctx context.Context, res *compiler.Result, t *compiler.Timings) (string, *artifact.Artifact, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id := compiler.Identity(res, d.Arch, nil)
	key := id.PortableKey()
	if _, ok := d.modules[key]; ok {
		return key, nil, nil
	}
	for _, b := range d.bundles {
		if a := b.Find(id); a != nil {
			return key, a, nil
		}
	}
	if d.llc == nil {
		tool, err := d.cfg.LLC.Find()
		if err != nil {
			return "", nil, &UnavailableError{Kernel: id.String(), Err: err}
		}
		d.llc = tool
	}
	a, err := compiler.Cached(ctx, d.Cache, res, d.Arch, d.llc, t)
	if err != nil {
		return "", nil, err
	}
	return key, a, nil
}

// load puts an artifact on the device. With a disk cache, the driver's JIT
// output (cubin) is cached too, keyed by the PTX, the GPU and the driver:
// loading a cubin takes about a millisecond, loading PTX runs ptxas inside
// the driver. d.mu must be held.
func (d *Device) load(key string, a *artifact.Artifact) (*Kernel, error) {
	mod, err := d.loadImage(a)
	if err != nil {
		return nil, fmt.Errorf("loading kernel %s: %w", a.Entry, err)
	}
	return d.finish(key, a, mod)
}

// finish looks up a's entry in its loaded module and, with a key, keeps
// the kernel among the loaded ones. d.mu must be held.
func (d *Device) finish(key string, a *artifact.Artifact, mod *cuda.Module) (*Kernel, error) {
	fn, err := mod.Function(a.Entry)
	if err != nil {
		return nil, err
	}
	if a.SharedBytes > 48*1024 {
		// A schedule the GPU cannot hold (large tiles, many num_stages)
		// fails here with a message that says why, not as the driver's
		// invalid-value error.
		if most, err := d.Dev.Attribute(cuda.DevAttrMaxSharedMemoryPerBlockOptin); err == nil && a.SharedBytes > most {
			return nil, fmt.Errorf("kernel %s needs %d bytes of shared memory; %s (%s) has %d a block: use smaller tiles or fewer num_stages",
				a.Entry, a.SharedBytes, d.Name, d.Arch, most)
		}
		if err := fn.SetMaxDynamicSharedMemory(a.SharedBytes); err != nil {
			return nil, err
		}
	}
	k := &Kernel{Art: a, mod: mod, fn: fn, dev: d.Dev, ctx: d.Ctx, programs: d.cfg.PersistentPrograms}
	if key != "" {
		d.modules[key] = k
	}
	return k, nil
}

// cubinKey keys a's machine code for this GPU and driver in the cache.
func (d *Device) cubinKey(a *artifact.Artifact) cache.Key {
	drv, _ := cuda.DriverVersion()
	return cache.NewKey("cubin", d.Name, d.Arch, strconv.Itoa(drv), artifact.Checksum(a.PTX))
}

// cubin is a's machine code from the disk cache, made by the driver's JIT
// on a miss. d.Cache must be set.
func (d *Device) cubin(a *artifact.Artifact) ([]byte, error) {
	isELF := func(b []byte) error {
		if !bytes.HasPrefix(b, []byte("\x7fELF")) {
			return errors.New("cached cubin is not an ELF image")
		}
		return nil
	}
	cubin, _, err := d.Cache.GetOrBuildChecked(d.cubinKey(a), "cubin "+a.Entry+" "+d.Arch, func() ([]byte, error) {
		cubin, log, err := cuda.CompilePTX([]byte(a.PTX))
		d.warn(a.Entry, log)
		return cubin, err
	}, isELF)
	if cubin == nil {
		return nil, fmt.Errorf("compiling for %s: %w", d.Name, err)
	}
	return cubin, nil
}

// warn reports the performance warnings of a JIT log for kernel.
func (d *Device) warn(kernel, log string) {
	for _, w := range cuda.PerformanceWarnings(log) {
		if d.Warn != nil {
			d.Warn(kernel, w)
		} else {
			fmt.Fprintf(os.Stderr, "fac: warning: kernel %s: %s\n", kernel, w)
		}
	}
}

// loadImage loads a's machine code: the cached cubin of its PTX when there
// is a disk cache (made by the driver's JIT on a miss), else the PTX. A
// cached cubin the driver refuses is removed and made again once.
//
// A kernel that moves registers between warpgroups (setmaxnreg: a producer
// warpgroup) always loads from its PTX: the cubin path links, which
// compiles the PTX as a relocatable unit, and there ptxas ignores
// setmaxnreg (C7504), leaving the consumers 168 registers instead of 240.
// The driver's own JIT cache keeps the machine code between processes.
func (d *Device) loadImage(a *artifact.Artifact) (*cuda.Module, error) {
	if d.Cache == nil || cuda.CompilesWhole([]byte(a.PTX)) {
		mod, err := cuda.LoadModule([]byte(a.PTX))
		if err == nil {
			d.warn(a.Entry, mod.InfoLog)
		}
		return mod, err
	}
	for try := 0; ; try++ {
		cubin, err := d.cubin(a)
		if err != nil {
			return nil, err
		}
		mod, err := cuda.LoadModule(cubin)
		if err == nil || try > 0 {
			return mod, err
		}
		d.Cache.Remove(d.cubinKey(a))
	}
}

// CacheHitTime measures the kernel cache's hit path on this GPU for one
// artifact: the entry is stored in a fresh cache in dir, loaded once (which
// fills the cubin entry), then timed from disk entry to loaded function.
func (d *Device) CacheHitTime(dir string, a *artifact.Artifact) (first, hit time.Duration, err error) {
	c, err := cache.Open(dir)
	if err != nil {
		return 0, 0, err
	}
	if _, _, err := c.Artifact(a.Ident, func() (*artifact.Artifact, error) { return a, nil }); err != nil {
		return 0, 0, err
	}
	probe := &Device{Dev: d.Dev, Ctx: d.Ctx, Arch: d.Arch, Name: d.Name, Cache: c, cfg: d.cfg, modules: map[string]*Kernel{}}
	for i := 0; i < 2; i++ {
		t0 := time.Now()
		got, status, err := c.Artifact(a.Ident, func() (*artifact.Artifact, error) {
			return nil, fmt.Errorf("cache entry for %s vanished", a.Entry)
		})
		if err != nil || status != cache.Hit {
			return 0, 0, fmt.Errorf("cache entry: %v (%v)", err, status)
		}
		k, err := probe.load("", got)
		if err != nil {
			return 0, 0, err
		}
		took := time.Since(t0)
		k.mod.Unload()
		if i == 0 {
			first = took
		} else {
			hit = took
		}
	}
	return first, hit, nil
}
