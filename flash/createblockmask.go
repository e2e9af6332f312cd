package flash

import (
	"context"
	"fmt"

	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/compiler"
	"github.com/fac-compiler/fac/parser"
)

// BlockMaskOptions describe a block mask to build: the mask mod (as in
// Options.Mask, with user Sources), the problem and the block sizes.
type BlockMaskOptions struct {
	Mask                     string            // e.g. "causal", "sliding_window(1023, 0)", "document"
	Sources                  map[string]string // user files defining the mask
	Batch, Heads, SeqQ, SeqK int               // Batch, Heads 0 mean 1
	BlockQ, BlockK           int               // 0 means 128 (FlexAttention's default)
	Aux                      map[string]any    // the mask's aux tensors by name (as Inputs.Aux takes them)
	Scalars                  map[string]any    // the mask's run-time parameters by name (as Inputs.Scalars)
}

// CreateBlockMask builds a mask's block mask in one call, like
// FlexAttention's create_block_mask, without compiling an attention
// kernel: analytically where the mask can be bounded (microseconds, any
// sequence length), else by evaluating the mask tile by tile on the CPU.
// ctx is checked before the work starts and between its stages.
func CreateBlockMask(ctx context.Context, o BlockMaskOptions) (*blockmask.BlockMask, blockmask.Method, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if o.Mask == "" {
		o.Mask = "none"
	}
	prog, err := compiler.Load(o.Sources)
	if err != nil {
		return nil, 0, err
	}
	e, err := parser.ParseExpr("<mask>", o.Mask)
	if err != nil {
		return nil, 0, fmt.Errorf("bad mask %q: %w", o.Mask, err)
	}
	inst, err := prog.ResolveMod(e, "mask")
	if err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	bm, method, err := blockmask.Build(prog, inst, blockmask.Shape{B: o.Batch, H: o.Heads, SeqQ: o.SeqQ, SeqK: o.SeqK},
		blockmask.Options{BlockQ: o.BlockQ, BlockK: o.BlockK}, Inputs{Aux: o.Aux, Scalars: o.Scalars}.modValues())
	if err != nil {
		return nil, 0, err
	}
	// Record what it was built for, so a launch with another mask or shape
	// is refused.
	bm.Mask, bm.BuiltB, bm.BuiltH = inst.String(), max(o.Batch, 1), max(o.Heads, 1)
	if ps := inst.ScalarParams(); len(ps) > 0 {
		bm.Params = map[string]string{}
		for _, p := range ps {
			if v, ok := o.Scalars[p.Name]; ok {
				bm.Params[p.Name] = fmt.Sprint(v)
			} else if v, ok := o.Scalars["mask."+p.Name]; ok {
				bm.Params[p.Name] = fmt.Sprint(v)
			}
		}
	}
	return bm, method, nil
}
