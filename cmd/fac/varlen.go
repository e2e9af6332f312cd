package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/codegen"
	"github.com/fac-compiler/fac/internal/npy"
)

// varlenFlags are run's --cu-seqlens-q/--cu-seqlens-k: with them, run packs
// sequences (flash_fwd_varlen) and q, k, v are [total, H, D].
type varlenFlags struct{ cuQ, cuK string }

func (v *varlenFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&v.cuQ, "cu-seqlens-q", "", "varlen: cumulative query lengths .npy [num_seqs+1] i32 (with --cu-seqlens-k; q, k, v are then [total, H, D])")
	fs.StringVar(&v.cuK, "cu-seqlens-k", "", "varlen: cumulative key lengths .npy [num_seqs+1] i32 (with --cu-seqlens-q)")
}

func (v *varlenFlags) on() bool { return v.cuQ != "" || v.cuK != "" }

// varlenArgs are the run flags a varlen run reads.
type varlenArgs struct {
	w                      io.Writer
	cf                     *compileFlags
	files                  []string
	shp                    *shapeFlags
	qf, kf, vf, outF, lseF string
	dtype, device          string
	seed                   uint64
	scale                  float32
	noCheck                bool
	tol                    tolerance
	target                 codegen.TargetConfig // --target-opt
}

// run is fac run for packed sequences, on the CPU or the GPU: compile, run, check
// against the per-sequence float64 reference, write O [total_q, H, D] and
// LSE [H, total_q].
func (v *varlenFlags) run(cmd *cobra.Command, a varlenArgs) error {
	if v.cuQ == "" || v.cuK == "" {
		return fmt.Errorf("varlen needs both --cu-seqlens-q and --cu-seqlens-k")
	}
	// What the varlen path does not take yet: say so rather than ignore it.
	for _, f := range []string{"batch", "seqlen-q", "seqlen-k", "blockmask", "blockmask-mask", "sinks", "backward", "aux", "scalar", "random-aux", "bundle"} {
		if fl := cmd.Flags().Lookup(f); fl != nil && fl.Changed {
			return fmt.Errorf("--%s does not work with --cu-seqlens-q/-k yet", f)
		}
	}
	cu := func(flag, path string) ([]int32, error) {
		arr, err := npy.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", flag, err)
		}
		if len(arr.Shape) != 1 {
			return nil, fmt.Errorf("--%s %s: shape %v, want 1 dim [num_seqs+1]", flag, path, arr.Shape)
		}
		xs, err := arr.I32()
		if err != nil {
			return nil, fmt.Errorf("--%s %s: %w", flag, path, err)
		}
		return xs, nil
	}
	cuQ, err := cu("cu-seqlens-q", v.cuQ)
	if err != nil {
		return err
	}
	cuK, err := cu("cu-seqlens-k", v.cuK)
	if err != nil {
		return err
	}
	if len(cuQ) == 0 || len(cuK) == 0 {
		return fmt.Errorf("--cu-seqlens-q/-k must not be empty")
	}
	heads, kvHeads, dim, dimV := a.shp.heads, a.shp.kvHeads, a.shp.dim, a.shp.dimV
	totalQ, totalK := int(cuQ[len(cuQ)-1]), int(cuK[len(cuK)-1])
	// The lengths first (from 0, non-decreasing), so that no size below
	// comes from a bad one.
	if _, err := fac.VarlenShape(cuQ, cuK, totalQ, totalK, 1, 1, 1); err != nil {
		return fmt.Errorf("--cu-seqlens-q %s, --cu-seqlens-k %s: %w", v.cuQ, v.cuK, err)
	}
	// Tensor files give the sizes; a flag the user set must agree.
	tensors := map[string]*npy.Array{}
	from := map[string]string{} // size flag → the file that gave it
	for _, t := range []struct {
		flag, path, hflag, dflag string
		total                    int
		heads, dim               *int
	}{{"q", a.qf, "heads", "dim", totalQ, &heads, &dim}, {"k", a.kf, "kv-heads", "dim", totalK, &kvHeads, &dim},
		{"v", a.vf, "kv-heads", "dim-v", totalK, &kvHeads, &dimV}} {
		if t.path == "" {
			continue
		}
		arr, err := npy.ReadFile(t.path)
		if err != nil {
			return fmt.Errorf("--%s: %w", t.flag, err)
		}
		if len(arr.Shape) != 3 || arr.Shape[0] != t.total {
			return fmt.Errorf("--%s %s: shape %v, want [%d, H, D] (varlen: total tokens from the cu_seqlens, heads, head dim)", t.flag, t.path, arr.Shape, t.total)
		}
		for _, d := range []struct {
			flag string
			dst  *int
			v    int
		}{{t.hflag, t.heads, arr.Shape[1]}, {t.dflag, t.dim, arr.Shape[2]}} {
			// --dim-v is unset at 0 (V then takes q's head dim).
			given := cmd.Flags().Changed(d.flag) || from[d.flag] != "" || d.flag == "dim-v" && *d.dst != 0
			if given && *d.dst != d.v {
				by := from[d.flag]
				if by == "" {
					by = "the flag"
				}
				return fmt.Errorf("--%s is %d (%s), but --%s %s has shape %v", d.flag, *d.dst, by, t.flag, t.path, arr.Shape)
			}
			*d.dst, from[d.flag] = d.v, "--"+t.flag+" "+t.path
		}
		tensors[t.flag] = arr
	}
	if kvHeads == 0 {
		kvHeads = heads
	}
	if dimV == 0 {
		dimV = dim
	}
	// The whole shape is checked before anything is allocated for it
	// (issue 46 item 2: --heads -1 panicked in makeslice, and
	// cu_seqlens [0, 2147483647] ran out of memory); V's and O's head
	// dim as well, as the shape's DimV.
	sh, err := fac.VarlenShape(cuQ, cuK, totalQ, totalK, heads, kvHeads, dim)
	if err != nil {
		return err
	}
	if dimV != dim {
		sh.DimV = dimV
		if err := sh.Validate(); err != nil {
			return err
		}
	}
	req, err := a.cf.request(a.files, "")
	if err != nil {
		return err
	}
	t0 := time.Now()
	fwd, err := fac.CompileForwardVarlen(fac.Options{Mask: a.cf.mask, Score: a.cf.score, Sources: req.Sources, Consts: req.Consts, DType: a.dtype, DimV: sh.DimV,
		Passes: req.Passes, Target: a.target}, dim)
	if err != nil {
		return err
	}
	compileTime := time.Since(t0)
	rng := rand.New(rand.NewPCG(a.seed, a.seed^0x9e3779b97f4a7c15))
	in := fac.VarlenInputs{CuSeqlensQ: cuQ, CuSeqlensK: cuK, Scale: a.scale,
		Q: tensorArg(tensors["q"], totalQ*heads*dim, rng), K: tensorArg(tensors["k"], totalK*kvHeads*dim, rng), V: tensorArg(tensors["v"], totalK*kvHeads*dimV, rng)}
	w := a.w
	fmt.Fprintf(w, "kernel %s mask=%s score=%s dtype=%s on %s\n", fwd.Result().Kernel, modName(fwd.Result().Mask), modName(fwd.Result().Score), a.dtype, a.device)
	fmt.Fprintf(w, "varlen: %d sequences, %d query and %d key tokens, H=%d Hkv=%d D=%d%s\n",
		len(cuQ)-1, totalQ, totalK, heads, kvHeads, dim, dvNote(sh))
	t1 := time.Now()
	if in.BlockMask, err = fwd.BlockMask(in, heads); err != nil {
		return err
	}
	partial, full := in.BlockMask.Counts()
	fmt.Fprintf(w, "block mask per sequence: %d partial and %d full blocks of %d (per mask head), built in %.1f ms\n",
		partial, full, in.BlockMask.Blocks(), ms(time.Since(t1)))
	var o, lse []float32
	if a.device == "cuda" {
		gpu, gerr := openGPU(nil)
		if gerr != nil {
			return gerr
		}
		o, lse, err = fwd.RunCUDA(gpu, in, heads, kvHeads)
	} else {
		o, lse, err = fwd.RunCPU(in, heads, kvHeads)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "compile %.1f ms, run %.1f ms\n", ms(compileTime), ms(time.Since(t1)))
	if a.noCheck {
		fmt.Fprintln(w, "check skipped (--no-check): no float64 reference computed, the output is unchecked")
	} else if err := checkAgainst(w, o, lse, func() ([]float64, []float64, error) { return fwd.Reference(in, heads, kvHeads) }, a.tol, a.dtype); err != nil {
		return err
	}
	if a.outF != "" {
		if err := writeNpy(a.outF, []int{totalQ, heads, dimV}, o); err != nil {
			return err
		}
	}
	if a.lseF != "" {
		if err := writeNpy(a.lseF, []int{heads, totalQ}, lse); err != nil {
			return err
		}
	}
	return nil
}
