package cpu

import (
	"context"
	"fmt"
	"math"
	"runtime"

	"github.com/fac-compiler/fac/launch"
	"github.com/fac-compiler/fac/tir"
)

// Run executes a bound call of kernel on the reference device. host holds
// the contents of every input, block-mask and aux buffer by parameter name
// ([]float32, []float64, []int32 or *Buffer; for aux tensors, anything
// launch.HostData converts); outputs are made here,
// poisoned with NaN so an unwritten element shows. It returns every buffer
// by name. A persistent kernel runs on PersistentPrograms(tiles) programs
// (the call itself is left as it is).
func Run(ctx context.Context, m *tir.Module, call *launch.Call, host map[string]any) (map[string]*Buffer, error) {
	if call.Persistent() {
		t := call.Tiles
		call = call.Clone()
		call.Persist(PersistentPrograms(t[0] * t[1] * t[2]))
	}
	bufs := make([]*Buffer, len(call.Buffers))
	byName := map[string]*Buffer{}
	for i, b := range call.Buffers {
		e, ok := tir.ElemByName(b.Elem)
		if !ok {
			return nil, fmt.Errorf("kernel %s: buffer %s has element type %q", call.Kernel, b.Name, b.Elem)
		}
		var buf *Buffer
		if b.Role == launch.Output {
			buf = NewBuffer(b.Name, e, b.Len)
			for j := range buf.Vals {
				buf.Vals[j] = math.NaN()
			}
		} else {
			var err error
			if buf, err = hostBuffer(b, e, host[b.Name]); err != nil {
				return nil, fmt.Errorf("kernel %s: %w", call.Kernel, err)
			}
		}
		bufs[i] = buf
		byName[b.Name] = buf
	}
	args := make([]any, len(call.Args))
	for i, a := range call.Args {
		switch a.Value.(type) {
		case launch.TileOrder:
			args[i] = FromI32(a.Param.Name, call.Order)
			continue
		}
		if a.Buffer >= 0 {
			args[i] = bufs[a.Buffer]
		} else {
			args[i] = a.Value
		}
	}
	if err := LaunchContext(ctx, m, call.Kernel, call.Grid, args...); err != nil {
		return nil, err
	}
	return byName, nil
}

// hostBuffer makes the device copy of a host value, rounded to e. Aux
// tensors take any data launch.HostData converts.
func hostBuffer(b launch.Buffer, e tir.Elem, v any) (*Buffer, error) {
	var buf *Buffer
	if _, isBuf := v.(*Buffer); b.Role == launch.Aux && v != nil && !isBuf {
		data, _, err := launch.HostData(b.Elem, v)
		if err != nil {
			return nil, fmt.Errorf("aux tensor %s: %w", b.Name, err)
		}
		v = FromHost(b.Name, e, data)
	}
	switch v := v.(type) {
	case nil:
		return nil, fmt.Errorf("no data for %s", b.Name)
	case *Buffer:
		buf = v
	case []float32:
		xs := make([]float64, len(v))
		for i, x := range v {
			xs[i] = float64(x)
		}
		buf = FromFloats(b.Name, e, xs)
	case []float64:
		buf = FromFloats(b.Name, e, v)
	case []int32:
		buf = FromI32(b.Name, v)
		buf.Elem = e
	default:
		return nil, fmt.Errorf("%s: unsupported host type %T", b.Name, v)
	}
	if len(buf.Vals) < b.Len {
		return nil, fmt.Errorf("%s has %d elements, the call needs %d", b.Name, len(buf.Vals), b.Len)
	}
	if buf.Elem != e {
		return nil, fmt.Errorf("%s is %s, the kernel takes %s", b.Name, buf.Elem, e)
	}
	return buf, nil
}

// PersistentPrograms is the number of programs the reference device runs
// a persistent kernel of total tiles on: as many as it runs at once
// (GOMAXPROCS, so no parallelism is lost), made odd so that it seldom
// divides the tile count (tile counts are mostly even: programs then end
// after different numbers of tiles, which tests the loop's bound), at
// least 3, and at most half the tiles, so that every program runs two
// tiles or more (the strided step) whenever there are two tiles or more.
// On a GPU the count is the number of CTAs resident at once instead
// (runtime/gpu).
func PersistentPrograms(total int) int {
	p := max(runtime.GOMAXPROCS(0)|1, 3)
	return max(1, min(p, total/2))
}
