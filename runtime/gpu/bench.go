package gpu

import (
	"fmt"

	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// Bench times a prepared call with CUDA events on its own stream: warmup
// launches, then reps timed ones; it returns each launch's time in
// milliseconds. The outputs must hold no poison (NaN) afterwards: a
// benchmark of a kernel that skips writes is a failure, not a figure.
func (p *Prepared) Bench(warmup, reps int) ([]float64, error) {
	s, err := cuda.NewStream()
	if err != nil {
		return nil, err
	}
	defer s.Destroy()
	for i := 0; i < warmup; i++ {
		if err := p.Run(s); err != nil {
			return nil, err
		}
	}
	start, err := cuda.NewEvent()
	if err != nil {
		return nil, err
	}
	defer start.Destroy()
	end, err := cuda.NewEvent()
	if err != nil {
		return nil, err
	}
	defer end.Destroy()
	times := make([]float64, 0, reps)
	for i := 0; i < reps; i++ {
		if err := start.Record(s); err != nil {
			return nil, err
		}
		if err := p.Run(s); err != nil {
			return nil, err
		}
		if err := end.Record(s); err != nil {
			return nil, err
		}
		if err := end.Synchronize(); err != nil {
			return nil, err
		}
		ms, err := cuda.ElapsedMs(start, end)
		if err != nil {
			return nil, err
		}
		times = append(times, float64(ms))
	}
	for _, b := range p.call.Buffers {
		if b.Role != launch.Output {
			continue
		}
		v, err := p.Output(b.Name)
		if err != nil {
			return nil, err
		}
		if xs, ok := v.([]float32); ok {
			for i, x := range xs {
				if x != x {
					return nil, fmt.Errorf("benchmark run left NaN at element %d of %s", i, b.Name)
				}
			}
		}
	}
	return times, nil
}
