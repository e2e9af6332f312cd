package gpu

import (
	"fmt"

	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/runtime/cuda"
)

// Step is one launch of a Sequence: a loaded kernel and its bound call.
type Step struct {
	Kernel *Kernel
	Call   *launch.Call
}

// Sequence is calls launched one after another that share device buffers
// by parameter name: a buffer one step writes, a later step reads, without
// leaving the device (a multi-kernel pass such as attention's backward:
// Δ and the dQ accumulator go from kernel to kernel).
type Sequence struct {
	steps []Step
	runs  []*launch.Call // each step's call as launched (launchArgs)
	args  [][]any
	bufs  map[string]*seqBuf
	order []string // buffer names, in order of first use
	owned []cuda.DevicePtr
	sync  bool // Config.BenchSync
}

// seqBuf is one shared buffer: its element type, the most elements any
// step touches, and whether a step writes it.
type seqBuf struct {
	ptr     cuda.DevicePtr
	buf     launch.Buffer
	written bool
}

// PrepareSequence allocates the buffers of steps once, by parameter name,
// and uploads host (by parameter name, as for Prepare) into those a step
// reads before any step writes them. A buffer whose first use is as an
// output is poisoned (NaN) so that an element no kernel writes reads as
// NaN. A buffer read before it is written needs host data; the steps must
// agree on each buffer's element type.
func (d *Device) PrepareSequence(steps []Step, host map[string]any) (_ *Sequence, err error) {
	q := &Sequence{steps: steps, bufs: map[string]*seqBuf{}, sync: d.cfg.BenchSync}
	defer func() {
		if err != nil {
			q.Free()
		}
	}()
	first := map[string]launch.Role{}
	for _, st := range steps {
		for _, b := range st.Call.Buffers {
			sb, ok := q.bufs[b.Name]
			if !ok {
				q.bufs[b.Name] = &seqBuf{buf: b}
				q.order = append(q.order, b.Name)
				first[b.Name] = b.Role
				sb = q.bufs[b.Name]
			} else if sb.buf.Elem != b.Elem {
				return nil, fmt.Errorf("buffer %s is %s in kernel %s, %s before", b.Name, b.Elem, st.Call.Kernel, sb.buf.Elem)
			}
			sb.buf.Len = max(sb.buf.Len, b.Len)
			if b.Role == launch.Output {
				sb.written = true
			}
		}
	}
	for _, name := range q.order {
		sb := q.bufs[name]
		size, err := elemBytes(sb.buf.Elem)
		if err != nil {
			return nil, fmt.Errorf("buffer %s: %w", name, err)
		}
		ptr, err := cuda.MemAlloc(max(sb.buf.Len*size, 4))
		if err != nil {
			return nil, err
		}
		q.owned = append(q.owned, ptr)
		sb.ptr = ptr
		if first[name] == launch.Output {
			// All-ones bytes are NaN in f32, f16 and bf16.
			if err := cuda.MemsetD8(ptr, 0xff, sb.buf.Len*size); err != nil {
				return nil, err
			}
			continue
		}
		if err := upload(ptr, sb.buf, host[name]); err != nil {
			return nil, err
		}
	}
	for _, st := range steps {
		ptrs := make([]cuda.DevicePtr, len(st.Call.Buffers))
		for i, b := range st.Call.Buffers {
			ptrs[i] = q.bufs[b.Name].ptr
		}
		run, a, err := launchArgs(st.Kernel, st.Call, ptrs)
		if err != nil {
			return nil, err
		}
		q.runs = append(q.runs, run)
		q.args = append(q.args, a)
	}
	return q, nil
}

// Run launches the steps in order on stream s.
func (q *Sequence) Run(s cuda.Stream) error {
	for i, st := range q.steps {
		if err := st.Kernel.launch(q.runs[i], q.args[i], s); err != nil {
			return fmt.Errorf("kernel %s: %w", st.Call.Kernel, err)
		}
	}
	return nil
}

// Output copies a buffer back as float32 (floats) or int32 values.
func (q *Sequence) Output(name string) (any, error) {
	sb, ok := q.bufs[name]
	if !ok {
		return nil, fmt.Errorf("no step has a buffer %s", name)
	}
	return download(sb.ptr, sb.buf)
}

// Bench times the whole sequence with CUDA events, as Prepared.Bench
// times one call, and then checks that the buffers named in check (none:
// every buffer a step writes) hold no NaN. A kernel variant may leave an
// output unwritten on purpose (a placeholder buffer): name the results.
func (q *Sequence) Bench(warmup, reps int, check ...string) ([]float64, error) {
	times, err := timeRuns(warmup, reps, q.sync, q.Run)
	if err != nil {
		return nil, err
	}
	if len(check) == 0 {
		for _, name := range q.order {
			if q.bufs[name].written {
				check = append(check, name)
			}
		}
	}
	for _, name := range check {
		if err := noNaN(name, q.Output); err != nil {
			return nil, err
		}
	}
	return times, nil
}

// Free releases the buffers.
func (q *Sequence) Free() {
	for _, ptr := range q.owned {
		cuda.MemFree(ptr)
	}
	q.owned = nil
}
