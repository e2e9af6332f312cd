package main

import (
	"time"

	"github.com/fac-compiler/fac"
)

// cpuDevice runs the calls on the CPU reference device (an interpreter of
// the kernels' tile IR) over a cache in host memory, which RunPagedCPU
// appends to in place.
type cpuDevice struct {
	fwd            *fac.Forward
	kCache, vCache []float32 // [num_pages, page_size, Hkv, D]
	pageElems      int
	rotary         fac.RotaryForm
	cos, sin       []float32
}

func newCPUDevice(fwd *fac.Forward, c config, cos, sin []float32) *cpuDevice {
	pe := c.pageSize * c.kvHeads * c.dim
	d := &cpuDevice{fwd: fwd, kCache: make([]float32, c.numPages*pe), vCache: make([]float32, c.numPages*pe), pageElems: pe, rotary: c.rotary}
	if c.rotary != fac.RotaryNone {
		d.cos, d.sin = cos, sin
	}
	return d
}

func (d *cpuDevice) attend(c *call) (o, lse []float32, took time.Duration, err error) {
	in := fac.PagedInputs{Q: c.q, KCache: d.kCache, VCache: d.vCache, PageTable: c.table, CacheSeqlens: c.lens,
		KNew: c.kNew, VNew: c.vNew, Rotary: d.rotary, RotaryCos: d.cos, RotarySin: d.sin}
	start := time.Now()
	o, lse, err = d.fwd.RunPagedCPU(in, c.ps)
	return o, lse, time.Since(start), err
}

func (d *cpuDevice) pages(ids []int32) (k, v []float32, err error) {
	pe := d.pageElems
	k, v = make([]float32, 0, len(ids)*pe), make([]float32, 0, len(ids)*pe)
	for _, id := range ids {
		at := int(id) * pe
		k, v = append(k, d.kCache[at:at+pe]...), append(v, d.vCache[at:at+pe]...)
	}
	return k, v, nil
}

func (d *cpuDevice) plan(ps fac.PagedShape, maxLen int) (fac.DecodePlan, error) {
	p, err := d.fwd.PagedPlan(ps, maxLen, 0)
	p.Append = true
	return p, err
}

func (d *cpuDevice) close() {}
