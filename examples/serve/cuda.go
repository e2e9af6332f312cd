package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// cudaDevice runs the calls on the GPU through LaunchPagedCUDA: the cache,
// the rotary tables and the call's buffers live in device memory, made
// once; each call uploads its new tokens' q, k, v and its page table,
// launches kv_append, flash_fwd_paged and flash_fwd_combine, waits, and
// downloads O and LSE (the next tokens need them on the host, where the
// stand-in model runs).
type cudaDevice struct {
	gpu                *fac.CUDA
	fwd                *fac.Forward
	dtype              string
	elem               int // bytes of an element in the dtype
	numPages           int
	pageElems          int // page_size · Hkv · D
	rotary             fac.RotaryForm
	positions          int // rows of the rotary tables
	kCache, vCache     cuda.DevicePtr
	q, kNew, vNew, o   cuda.DevicePtr
	lse, table         cuda.DevicePtr
	cos, sin           cuda.DevicePtr
	spaces             []space
	allocated          []cuda.DevicePtr
	heads, kvHeads, hd int
}

// space is a split workspace and what it holds: o_partial is [splits, B,
// H, Sq, D] and lse_partial [splits, B, H, Sq], so a workspace serves a
// call whose splits · B · Sq is no larger (splitRows), where the appending
// call's q copy ([B, H, Sq, D]: qRows = B · Sq) fits too.
type space struct {
	ws               *fac.ForwardWorkspace
	splitRows, qRows int
}

// maxSpaces is how many workspaces the device keeps: calls of a few
// shapes (decode batches, prefill chunks) need different ones.
const maxSpaces = 4

func newCUDADevice(gpu *fac.CUDA, fwd *fac.Forward, c config, cos, sin []float32) (*cudaDevice, error) {
	d := &cudaDevice{gpu: gpu, fwd: fwd, dtype: c.dtype, elem: 2, numPages: c.numPages, pageElems: c.pageSize * c.kvHeads * c.dim,
		rotary: c.rotary, heads: c.heads, kvHeads: c.kvHeads, hd: c.dim}
	if c.dtype == "f32" {
		d.elem = 4
	}
	tokens := c.maxBatch * c.chunk
	maxPages := pagesFor(c.promptMax+c.genMax-1, c.pageSize)
	for _, b := range []struct {
		p     *cuda.DevicePtr
		bytes int
	}{
		{&d.kCache, c.numPages * d.pageElems * d.elem},
		{&d.vCache, c.numPages * d.pageElems * d.elem},
		{&d.q, tokens * c.heads * c.dim * d.elem},
		{&d.o, tokens * c.heads * c.dim * d.elem},
		{&d.kNew, tokens * c.kvHeads * c.dim * d.elem},
		{&d.vNew, tokens * c.kvHeads * c.dim * d.elem},
		{&d.lse, tokens * c.heads * 4},
		{&d.table, c.maxBatch * maxPages * 4},
	} {
		if err := d.alloc(b.p, b.bytes); err != nil {
			d.close()
			return nil, err
		}
	}
	// A cache that starts as zeros, as the CPU device's does.
	for _, p := range []cuda.DevicePtr{d.kCache, d.vCache} {
		if err := cuda.MemsetD8(p, 0, c.numPages*d.pageElems*d.elem); err != nil {
			d.close()
			return nil, err
		}
	}
	if c.rotary != fac.RotaryNone {
		d.positions = len(cos) / (c.dim / 2)
		for _, t := range []struct {
			p  *cuda.DevicePtr
			xs []float32
		}{{&d.cos, cos}, {&d.sin, sin}} {
			if err := d.alloc(t.p, len(t.xs)*d.elem); err != nil {
				d.close()
				return nil, err
			}
			if err := d.upload(*t.p, t.xs); err != nil {
				d.close()
				return nil, err
			}
		}
	}
	return d, nil
}

// alloc allocates bytes of device memory at *p, freed by close.
func (d *cudaDevice) alloc(p *cuda.DevicePtr, bytes int) error {
	var err error
	if *p, err = cuda.MemAlloc(max(bytes, 4)); err != nil {
		return fmt.Errorf("allocating %d bytes on the GPU: %w", bytes, err)
	}
	d.allocated = append(d.allocated, *p)
	return nil
}

// upload copies xs to p in the dtype.
func (d *cudaDevice) upload(p cuda.DevicePtr, xs []float32) error {
	switch d.dtype {
	case "bf16":
		return cuda.HtoD(p, fac.F32sToBF16(xs))
	case "f16":
		return cuda.HtoD(p, fac.F32sToF16(xs))
	}
	return cuda.HtoD(p, xs)
}

// download copies n elements of the dtype at p to the host as float32.
func (d *cudaDevice) download(p cuda.DevicePtr, n int) ([]float32, error) {
	if d.elem == 4 {
		out := make([]float32, n)
		return out, cuda.DtoH(out, p)
	}
	bits := make([]uint16, n)
	if err := cuda.DtoH(bits, p); err != nil {
		return nil, err
	}
	if d.dtype == "f16" {
		return fac.F16s(bits), nil
	}
	return fac.BF16s(bits), nil
}

func (d *cudaDevice) attend(c *call) (o, lse []float32, took time.Duration, err error) {
	for _, u := range []struct {
		p  cuda.DevicePtr
		xs []float32
	}{{d.q, c.q}, {d.kNew, c.kNew}, {d.vNew, c.vNew}} {
		if err := d.upload(u.p, u.xs); err != nil {
			return nil, nil, 0, err
		}
	}
	if err := cuda.HtoD(d.table, c.table); err != nil {
		return nil, nil, 0, err
	}
	ws, err := d.workspace(c)
	if err != nil {
		return nil, nil, 0, err
	}
	t := fac.PagedDeviceTensors{
		Q: uintptr(d.q), KCache: uintptr(d.kCache), VCache: uintptr(d.vCache), PageTable: uintptr(d.table),
		O: uintptr(d.o), LSE: uintptr(d.lse), NumPages: d.numPages, MaxPages: c.maxPages,
		CacheSeqlens: c.lens, Workspace: ws,
		KNew: uintptr(d.kNew), VNew: uintptr(d.vNew), Rotary: d.rotary,
	}
	if d.rotary != fac.RotaryNone {
		t.RotaryCos, t.RotarySin, t.RotaryPositions = uintptr(d.cos), uintptr(d.sin), d.positions
	}
	start := time.Now()
	// The launch grows c.lens in place once its kernels are queued.
	if err := d.fwd.LaunchPagedCUDA(d.gpu, t, c.ps, cuda.Stream{}); err != nil {
		return nil, nil, 0, err
	}
	if err := d.gpu.Ctx.Synchronize(); err != nil {
		return nil, nil, 0, err
	}
	took = time.Since(start)
	rows := c.ps.Batch * d.heads * c.ps.SeqQ
	if o, err = d.download(d.o, rows*d.hd); err != nil {
		return nil, nil, 0, err
	}
	lse = make([]float32, rows)
	return o, lse, took, cuda.DtoH(lse, d.lse)
}

// workspace is a split workspace for call c, kept from an earlier call
// where one fits (PagedPlan gives the splits the launch runs: the forward
// was compiled for the GPU's arch, so the launch plans as it does), else
// made for c.
func (d *cudaDevice) workspace(c *call) (*fac.ForwardWorkspace, error) {
	maxLen := 0
	for _, n := range c.lens {
		maxLen = max(maxLen, int(n)+c.ps.SeqQ)
	}
	plan, err := d.fwd.PagedPlan(c.ps, maxLen, d.gpu.SMs())
	if err != nil {
		return nil, err
	}
	need := space{splitRows: plan.NumSplits * c.ps.Batch * c.ps.SeqQ, qRows: c.ps.Batch * c.ps.SeqQ}
	for _, s := range d.spaces {
		if s.splitRows >= need.splitRows && s.qRows >= need.qRows {
			return s.ws, nil
		}
	}
	if len(d.spaces) == maxSpaces {
		// No launch is in flight: attend waits for each.
		d.spaces[0].ws.Free()
		d.spaces = d.spaces[1:]
	}
	if need.ws, err = d.fwd.NewPagedWorkspace(d.gpu, c.ps, maxLen); err != nil {
		return nil, err
	}
	d.spaces = append(d.spaces, need)
	return need.ws, nil
}

// warmup loads every kernel the loop's calls can run, so that no call's
// time includes compiling one (llc, on first use) or loading its module:
// kv_append, flash_fwd_paged at both tile heights (decode steps and
// prefill chunks) and flash_fwd_combine at each width, forced by a forward
// of each split count (the kernels are the same; only the plan differs).
// Each runs once on a cache of its own through BenchPagedCUDA.
func (d *cudaDevice) warmup(opts fac.Options, c config, cos, sin []float32) error {
	rng := rand.New(rand.NewPCG(c.seed, 3))
	for splits := 2; splits <= fac.MaxSplits; splits *= 2 {
		o := opts
		o.NumSplits = splits
		fwd, err := fac.CompileForward(o, c.dim)
		if err != nil {
			return err
		}
		// Prefill chunks are at most -chunk and the longest prompt.
		for _, sq := range []int{1, min(c.chunk, c.promptMax)} {
			n := pagesFor(sq, c.pageSize)
			in := fac.PagedInputs{
				Q:      randn(rng, c.heads*sq*c.dim, 1),
				KCache: make([]float32, n*d.pageElems), VCache: make([]float32, n*d.pageElems),
				PageTable: make([]int32, n), CacheSeqlens: []int32{0},
				KNew: randn(rng, sq*c.kvHeads*c.dim, 1), VNew: randn(rng, sq*c.kvHeads*c.dim, 1),
				Rotary: c.rotary,
			}
			for j := range in.PageTable {
				in.PageTable[j] = int32(j)
			}
			if c.rotary != fac.RotaryNone {
				in.RotaryCos, in.RotarySin = cos, sin
			}
			ps := fac.PagedShape{Batch: 1, Heads: c.heads, KVHeads: c.kvHeads, SeqQ: sq, PageSize: c.pageSize}
			if _, err := fwd.BenchPagedCUDA(d.gpu, in, ps, 0, 1); err != nil {
				return fmt.Errorf("warm-up, %d splits, %d queries: %w", splits, sq, err)
			}
		}
	}
	return nil
}

func (d *cudaDevice) pages(ids []int32) (k, v []float32, err error) {
	for _, id := range ids {
		at := int(id) * d.pageElems * d.elem
		kp, err := d.download(d.kCache.Add(at), d.pageElems)
		if err != nil {
			return nil, nil, err
		}
		vp, err := d.download(d.vCache.Add(at), d.pageElems)
		if err != nil {
			return nil, nil, err
		}
		k, v = append(k, kp...), append(v, vp...)
	}
	return k, v, nil
}

func (d *cudaDevice) plan(ps fac.PagedShape, maxLen int) (fac.DecodePlan, error) {
	p, err := d.fwd.PagedPlan(ps, maxLen, d.gpu.SMs())
	p.Append = true
	return p, err
}

func (d *cudaDevice) close() {
	for _, s := range d.spaces {
		s.ws.Free()
	}
	d.spaces = nil
	for _, p := range d.allocated {
		cuda.MemFree(p)
	}
	d.allocated = nil
}
