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
	times, err := timeRuns(warmup, reps, p.Run)
	if err != nil {
		return nil, err
	}
	for _, name := range outputs(p.call) {
		if err := noNaN(name, p.Output); err != nil {
			return nil, err
		}
	}
	return times, nil
}

// outputs are the names of a call's output buffers.
func outputs(call *launch.Call) []string {
	var out []string
	for _, b := range call.Buffers {
		if b.Role == launch.Output {
			out = append(out, b.Name)
		}
	}
	return out
}

// timeRuns calls run on a fresh stream warmup times, then reps times
// between two CUDA events each, and returns each timed run's milliseconds.
func timeRuns(warmup, reps int, run func(cuda.Stream) error) ([]float64, error) {
	s, err := cuda.NewStream()
	if err != nil {
		return nil, err
	}
	defer s.Destroy()
	for i := 0; i < warmup; i++ {
		if err := run(s); err != nil {
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
		if err := run(s); err != nil {
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
	return times, nil
}

// noNaN reads output name back and fails on the first NaN (the poison of
// an element no kernel wrote).
func noNaN(name string, read func(string) (any, error)) error {
	v, err := read(name)
	if err != nil {
		return err
	}
	if xs, ok := v.([]float32); ok {
		for i, x := range xs {
			if x != x {
				return fmt.Errorf("benchmark run left NaN at element %d of %s", i, name)
			}
		}
	}
	return nil
}
