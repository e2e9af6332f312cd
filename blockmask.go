package fac

import (
	"context"

	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/flash"
)

// BlockMaskOptions describe a block mask to build: the mask mod (as in
// Options.Mask, with user Sources), the problem (Batch and Heads 0 mean 1)
// and the block sizes (0 means 128, FlexAttention's default); Aux and
// Scalars hold the mask's aux tensors and run-time parameters by name, as
// Inputs does.
type BlockMaskOptions = flash.BlockMaskOptions

// CreateBlockMask builds a mask's block mask in one call, like
// FlexAttention's create_block_mask, without compiling an attention
// kernel: analytically where the mask can be bounded (microseconds, any
// sequence length), else by evaluating the mask tile by tile on the CPU.
// The block mask records the mask, batch, heads and run-time parameters it
// was built for, so a launch with others refuses it. ctx is checked before
// the work starts and between its stages. docs/blockmask.md describes
// block masks; package blockmask saves, loads and draws them.
func CreateBlockMask(ctx context.Context, o BlockMaskOptions) (*blockmask.BlockMask, blockmask.Method, error) {
	return flash.CreateBlockMask(ctx, o)
}
