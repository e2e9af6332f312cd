// Package cpu interprets tile IR: it is fac's reference device. It runs any
// verified module, before or after any pass, including calls between funcs.
//
// Values are kept as float64 and rounded to their element type after every
// op (f32/f16/bf16 round to nearest even, i32 wraps, i1 is 0/1), so results
// match a GPU's except where its transcendental functions or accumulation
// order differ. i64 values beyond 2^53 lose precision. Programs of a launch
// run concurrently; like on a GPU, two programs storing to one element race.
package cpu

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fac-compiler/fac/tir"
)

// Error is a failure while running a function, or of its arguments.
type Error struct {
	Func    string  // the entry function (kernel or func)
	Kernel  bool    // whether Func is a kernel
	Program [3]int  // program id of the failing program (Launch)
	Op      *tir.Op // the op that failed; nil for argument errors
	Msg     string
}

func (e *Error) Error() string {
	kw := "func"
	if e.Kernel {
		kw = "kernel"
	}
	s := fmt.Sprintf("cpu: %s %s: %s", kw, e.Func, e.Msg)
	switch {
	case e.Op == nil:
	case e.Op.Pos.File != "" || e.Op.Pos.Line != 0:
		s += fmt.Sprintf(" (at %s)", e.Op.Pos)
	case len(e.Op.Results) > 0:
		s += fmt.Sprintf(" (in op %s : %s)", e.Op.Kind, e.Op.Results[0].Type)
	default:
		s += fmt.Sprintf(" (in op %s)", e.Op.Kind)
	}
	return s
}

// toError turns an internal error from running x into an *Error.
func (x *fn) toError(err error, pid [3]int) error {
	e := &Error{Func: x.f.Name, Kernel: x.f.Kernel, Program: pid, Msg: err.Error()}
	if oe, ok := err.(*opError); ok && oe.in != nil {
		e.Op = oe.in.op
	}
	return e
}

// Launch runs kernel over grid, one program per grid point, spread over up
// to GOMAXPROCS goroutines. args follow the kernel's params: *Buffer (or
// Pointer) for pointer params, whose Elem must match; int32, int or int64
// for i32/i64; float32 or float64 for float scalars; bool for i1. When
// programs fail, the error of the lowest-numbered failing one is returned.
func Launch(m *tir.Module, kernel string, grid [3]int, args ...any) error {
	return LaunchContext(context.Background(), m, kernel, grid, args...)
}

// LaunchContext is Launch that stops between programs once ctx is done and
// then returns ctx's error: an interpreted launch of a large problem takes
// minutes.
func LaunchContext(ctx context.Context, m *tir.Module, kernel string, grid [3]int, args ...any) error {
	x, err := compileEntry(m, kernel)
	if err != nil {
		return err
	}
	if !x.f.Kernel {
		return &Error{Func: kernel, Msg: "not a kernel"}
	}
	if grid[0] < 0 || grid[1] < 0 || grid[2] < 0 {
		return &Error{Func: kernel, Kernel: true, Msg: fmt.Sprintf("negative grid %v", grid)}
	}
	// Bind on the caller's goroutine first, so argument errors come back
	// before anything runs.
	fr0 := x.getFrame()
	if err := x.bind(fr0, args); err != nil {
		return err
	}
	total := grid[0] * grid[1] * grid[2]
	if total == 0 {
		return nil
	}
	var (
		next     atomic.Int64
		failed   atomic.Bool
		mu       sync.Mutex
		firstErr error
		firstIdx = total
	)
	work := func(fr *frame) {
		m := machine{grid: grid}
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= total {
				return
			}
			if ctx.Err() != nil {
				mu.Lock()
				if firstErr == nil || i < firstIdx {
					firstIdx, firstErr = i, ctx.Err()
				}
				mu.Unlock()
				failed.Store(true)
				return
			}
			m.pid = [3]int{i % grid[0], i / grid[0] % grid[1], i / (grid[0] * grid[1])}
			if _, err := m.run(x, fr); err != nil {
				mu.Lock()
				if i < firstIdx {
					firstIdx, firstErr = i, x.toError(err, m.pid)
				}
				mu.Unlock()
				failed.Store(true)
				return
			}
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), total) - 1 {
		wg.Go(func() {
			fr := x.getFrame()
			_ = x.bind(fr, args) // cannot fail: fr0's binding succeeded
			work(fr)
		})
	}
	work(fr0)
	wg.Wait()
	return firstErr
}

// Prepared is a function compiled once for repeated Calls. It is safe for
// concurrent use.
type Prepared struct{ x *fn }

// Prepare compiles the function fn of m and everything it calls. The module
// must not change while the Prepared is in use.
func Prepare(m *tir.Module, fn string) (*Prepared, error) {
	x, err := compileEntry(m, fn)
	if err != nil {
		return nil, err
	}
	return &Prepared{x}, nil
}

// Call runs the function fn of m once (program id 0) and returns its
// results. Arguments are as for Launch, or a Tensor of the param's type.
func Call(m *tir.Module, fn string, args ...any) ([]Tensor, error) {
	p, err := Prepare(m, fn)
	if err != nil {
		return nil, err
	}
	return p.Call(args...)
}

// Call runs the prepared function once and returns its results.
func (p *Prepared) Call(args ...any) ([]Tensor, error) {
	x := p.x
	fr := x.getFrame()
	if err := x.bind(fr, args); err != nil {
		x.putFrame(fr)
		return nil, err
	}
	m := machine{grid: [3]int{1, 1, 1}}
	t, err := m.run(x, fr)
	if err != nil {
		return nil, x.toError(err, m.pid)
	}
	if t == nil || len(t.a) == 0 {
		x.putFrame(fr)
		return nil, nil
	}
	// One allocation for all element results.
	n := 0
	for _, id := range t.a {
		if !x.types[id].Ptr {
			n += x.types[id].NumElems()
		}
	}
	vals := make([]float64, n)
	res := make([]Tensor, len(t.a))
	for i, id := range t.a {
		typ := x.types[id]
		res[i].Type = typ
		if typ.Ptr {
			res[i].Ptrs = append([]Pointer(nil), fr.s[id].p...)
			continue
		}
		k := typ.NumElems()
		res[i].Vals = vals[:k:k]
		copy(vals, fr.s[id].f)
		vals = vals[k:]
	}
	x.putFrame(fr)
	return res, nil
}

// bind checks args against x's params and stores them in fr.
func (x *fn) bind(fr *frame, args []any) error {
	ps := x.f.Params
	if len(args) != len(ps) {
		names := make([]string, len(ps))
		for i, p := range ps {
			names[i] = "%" + p.Name + ": " + p.Type.String()
		}
		return &Error{Func: x.f.Name, Kernel: x.f.Kernel,
			Msg: fmt.Sprintf("got %d arguments, want %d (%s)", len(args), len(ps), strings.Join(names, ", "))}
	}
	for i, p := range ps {
		st := &fr.args[i]
		if err := bindArg(st, p.Type, args[i]); err != nil {
			return &Error{Func: x.f.Name, Kernel: x.f.Kernel,
				Msg: fmt.Sprintf("argument %d (%%%s: %s): %v", i, p.Name, p.Type, err)}
		}
		fr.s[x.params[i]] = *st
	}
	return nil
}

// bindArg converts one Go argument for a param of type t into st's storage.
func bindArg(st *slot, t tir.Type, a any) error {
	if tv, ok := a.(Tensor); ok {
		return bindTensor(st, t, tv)
	}
	if !t.IsScalar() {
		return fmt.Errorf("got %T, want cpu.Tensor", a)
	}
	if t.Ptr {
		var p Pointer
		switch v := a.(type) {
		case *Buffer:
			p = Pointer{Buf: v}
		case Pointer:
			p = v
		default:
			return fmt.Errorf("got %T, want *cpu.Buffer", a)
		}
		if err := checkPtr(p, t.Elem); err != nil {
			return err
		}
		if st.p == nil {
			st.p = make([]Pointer, 1)
		}
		st.p[0] = p
		return nil
	}
	var v float64
	switch t.Elem {
	case tir.I32, tir.I64:
		var n int64
		switch x := a.(type) {
		case int32:
			n = int64(x)
		case int:
			n = int64(x)
		case int64:
			n = x
		default:
			return fmt.Errorf("got %T, want int32, int or int64", a)
		}
		if t.Elem == tir.I32 && (n < math.MinInt32 || n > math.MaxInt32) {
			return fmt.Errorf("%d does not fit i32", n)
		}
		v = float64(n)
	case tir.F16, tir.BF16, tir.F32:
		switch x := a.(type) {
		case float32:
			v = float64(x)
		case float64:
			v = x
		default:
			return fmt.Errorf("got %T, want float32 or float64", a)
		}
		v = fix(t.Elem, v)
	case tir.I1:
		switch x := a.(type) {
		case bool:
			v = b2f(x)
		case int32: // a bool kernel parameter as a launch binds it
			if x != 0 && x != 1 {
				return fmt.Errorf("got %d, want a bool (0 or 1)", x)
			}
			v = float64(x)
		default:
			return fmt.Errorf("got %T, want bool", a)
		}
	default:
		return fmt.Errorf("unsupported param type %s", t)
	}
	if st.f == nil {
		st.f = make([]float64, 1)
	}
	st.f[0] = v
	return nil
}

func bindTensor(st *slot, t tir.Type, tv Tensor) error {
	if !tv.Type.Equal(t) {
		return fmt.Errorf("got tensor of %s", tv.Type)
	}
	n := t.NumElems()
	if t.Ptr {
		if len(tv.Ptrs) != n {
			return fmt.Errorf("tensor has %d pointers, want %d", len(tv.Ptrs), n)
		}
		for _, p := range tv.Ptrs {
			if err := checkPtr(p, t.Elem); err != nil {
				return err
			}
		}
		if len(st.p) != n {
			st.p = make([]Pointer, n)
		}
		copy(st.p, tv.Ptrs)
		return nil
	}
	if len(tv.Vals) != n {
		return fmt.Errorf("tensor has %d values, want %d", len(tv.Vals), n)
	}
	if len(st.f) != n {
		st.f = make([]float64, n)
	}
	copy(st.f, tv.Vals)
	fixSlice(t.Elem, st.f)
	return nil
}

func checkPtr(p Pointer, e tir.Elem) error {
	if p.Buf == nil {
		return fmt.Errorf("nil buffer")
	}
	if p.Buf.Elem != e {
		return fmt.Errorf("buffer %q holds %s, want %s", p.Buf.Name, p.Buf.Elem, e)
	}
	return nil
}
