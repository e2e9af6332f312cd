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
	times, err := timeRuns(warmup, reps, p.sync, p.Run)
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

// flushBytes is the buffer written before each timed run to evict the
// previous run's data from L2: 256 MiB, as triton.testing.do_bench (the
// timer of the anchor scripts that scripts/gpu runs) uses, over 5 times an
// H200's L2.
const flushBytes = 256 << 20

// timeRuns calls run on a fresh stream warmup times, then reps times, and
// returns each timed run's milliseconds. It times as
// triton.testing.do_bench does, so that fac's figures and the anchors'
// measure the same thing: before each timed run a write of flushBytes
// evicts L2, then the run sits between two CUDA events; every run is
// queued before the one host synchronization at the end, so the host's
// launch latency stays out of the figures (the GPU reaches each start
// event just after the flush, with the launch already queued behind it).
// With sync (Config.BenchSync) it times as fac did before instead: no
// flush, and a host synchronization after each run, whose launch latency
// then counts (kept to compare the two in one device call).
func timeRuns(warmup, reps int, sync bool, run func(cuda.Stream) error) ([]float64, error) {
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
	var flush cuda.DevicePtr
	if !sync {
		if flush, err = cuda.MemAlloc(flushBytes); err != nil {
			return nil, fmt.Errorf("L2 flush buffer (%d MiB; Config.BenchSync, FAC_BENCH_SYNC=1, times without it): %w", flushBytes>>20, err)
		}
		defer cuda.MemFree(flush)
	}
	events := make([]cuda.Event, 0, 2*reps)
	defer func() {
		for _, e := range events {
			e.Destroy()
		}
	}()
	for i := 0; i < 2*reps; i++ {
		e, err := cuda.NewEvent()
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	for i := 0; i < reps; i++ {
		start, end := events[2*i], events[2*i+1]
		if !sync {
			if err := cuda.MemsetD32Async(flush, 0, flushBytes/4, s); err != nil {
				return nil, err
			}
		}
		if err := start.Record(s); err != nil {
			return nil, err
		}
		if err := run(s); err != nil {
			return nil, err
		}
		if err := end.Record(s); err != nil {
			return nil, err
		}
		if sync {
			if err := end.Synchronize(); err != nil {
				return nil, err
			}
		}
	}
	if err := s.Synchronize(); err != nil {
		return nil, err
	}
	times := make([]float64, 0, reps)
	for i := 0; i < reps; i++ {
		ms, err := cuda.ElapsedMs(events[2*i], events[2*i+1])
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
