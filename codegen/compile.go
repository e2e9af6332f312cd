package codegen

import (
	"context"
	"fmt"

	"github.com/fac-compiler/fac/codegen/llc"
	"github.com/fac-compiler/fac/tir"
)

// CompilePTX lowers kernel of m and runs llc on it: the PTX (checked with
// llc.CheckPTX by Tool.Compile) and the lowering result.
func CompilePTX(ctx context.Context, m *tir.Module, kernel string, opts Options, tool *llc.Tool) ([]byte, *Result, error) {
	res, err := Lower(m, kernel, opts)
	if err != nil {
		return nil, nil, err
	}
	if tool == nil {
		if tool, err = llc.Find(); err != nil {
			return nil, res, err
		}
	}
	arch := opts.Target.Arch
	if arch == "" {
		arch = "sm_80"
	}
	ptx, err := tool.Compile(ctx, []byte(res.LL), arch)
	if err != nil {
		return nil, res, fmt.Errorf("codegen @%s: %w", kernel, err)
	}
	return ptx, res, nil
}
