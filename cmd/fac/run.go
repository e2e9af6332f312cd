package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/internal/npy"
	"github.com/fac-compiler/fac/internal/outfile"
	"github.com/fac-compiler/fac/lang"
	"github.com/fac-compiler/fac/parser"
)

func runCmd() *cobra.Command {
	var cf compileFlags
	var shp shapeFlags
	var ax auxFlags
	var bwf backwardFlags
	var vlf varlenFlags
	var df decodeFlags
	var pf pagedFlags
	var tf targetFlags
	var (
		device, dtype          string
		qf, kf, vf, outF, lseF string
		seed                   uint64
		scale                  float32
		bundles                []string
		bmDir, bmMask          string
		block                  int
		noCheck, fullCheck     bool
		tol                    float64
		sinksF                 string
	)
	cmd := &cobra.Command{
		Use:   "run [FILE...]",
		Short: "run attention (forward, or --backward too) with a mask on a device and check it against naive float64 attention",
		Long: `Runs flash_fwd with the mask and score mods on random inputs (or --q/--k/--v), then checks O and LSE
against naive float64 attention: above the dtype's tolerance (f32 1e-4, f16 5e-3, bf16 2e-2; --tol), or
with any NaN, the check fails and fac exits 1. --no-check skips the reference (O(B·H·Sq·Sk) on the CPU).
Above 2^26 pairs (B·H·Sq·Sk) the check compares 64 rows (the first, the last, every batch and head, the
rest sampled with a fixed seed) against a float64 reference of those rows, and says so; --full-check
checks every row.
Sizes not given by flags come from the --q/--k/--v files and the --blockmask folder.

--backward runs the forward, then the backward kernels for dL/dO = --do (random if absent), and checks dQ,
dK, dV (and a score mod's aux gradients) against float64 gradients, each relative to its largest |ref|,
with the same tolerances; --dq-out, --dk-out, --dv-out write them (only when the check passes).

--sinks FILE.npy ([H] f32, gpt-oss's learnable sinks) runs flash_fwd_sinks: each head's sink logit joins
the softmax denominator of its rows (a row that keeps no key gets O = 0, LSE = the sink); the check uses
the reference with sinks. With --backward, the sinks' gradient is checked too (--dsinks-out writes it).

--cu-seqlens-q/--cu-seqlens-k FILE.npy ([num_seqs+1] i32) run packed variable-length sequences
(flash_fwd_varlen, FlashAttention's varlen layout): q, k, v are [total, H, D], O is [total_q, H, D] and
LSE [H, total_q]; mods see positions within each sequence and b = its index. Each sequence gets its own
block mask (empty blocks skipped, the mask evaluated on partial ones only); no aux tensors on the CLI yet.

Decoding (docs/decoding.md): a call whose q tiles are too few to fill the GPU runs split-KV
(flash_fwd_splitkv over --num-splits programs per tile, then flash_fwd_combine), and with Sq ≤ 64 and
GQA packs the query heads of a kv head into one tile (--pack-gqa); both are chosen from the shape and
the multiprocessor count (--sms; the GPU's, or 132 on the CPU) unless given. The plan is printed.
--page-size N runs it over a paged KV cache (flash_fwd_paged + flash_fwd_combine): random pages of N keys,
shuffled, the first page shared by the first two sequences, each sequence --cache-seqlens long (default
--seqlen-k), checked against the dense reference of each sequence's gathered pages. --append N first
appends N new keys and values to each sequence (kv_append), the query being those N positions, optionally
rotated with q (--rotary neox|gptj, --rotary-dim R; RoPE's tables), and checks the updated cache too.
--seqlens-q L,L,... (one per sequence) runs a ragged batch over the paged cache instead (flash_fwd_paged_varlen
+ flash_fwd_combine): sequence b's L queries are the last L positions of its cache, decode rows (1) and
prefill chunks in one launch, checked against the float64 reference (docs/decoding.md#ragged-batches).

--target-opt NAME=VALUE sets a code generation switch of the GPU kernels (--device cuda), e.g.
--target-opt tma=off for cp.async staging, which takes tensors of any alignment (fac compile --help
lists the switches).`,
		Example: `  fac run --device cpu --mask causal --batch 2 --heads 4 --seqlen-q 100 --seqlen-k 257 --dim 64
  fac run mymask.fa --mask my_mask --seqlen-q 1000 --seqlen-k 1000
  fac run --mask document --aux doc=doc.npy --q q.npy --k k.npy --v v.npy -o o.npy
  fac run --mask document --random-aux --doc-len 32 --out - > o.npy
  fac run --mask "sliding_window(127, 0)" --sinks sinks.npy --heads 8 --kv-heads 1
  fac run --backward --mask causal --q q.npy --k k.npy --v v.npy --do do.npy --dq-out dq.npy --dk-out dk.npy --dv-out dv.npy
  fac run --mask causal_bottom_right --heads 32 --kv-heads 8 --seqlen-q 1 --seqlen-k 8192 --dim 128 --dtype bf16 --num-splits 4
  fac run --mask causal --dim 192 --dim-v 128 --backward          # DeepSeek's head dims: q, k 192, v 128
  fac run --mask causal_bottom_right --batch 4 --heads 8 --kv-heads 2 --seqlen-q 1 --dim 64 --page-size 16 --cache-seqlens 300,0,1,65
  fac run --mask causal_bottom_right --batch 4 --heads 8 --kv-heads 2 --dim 64 --page-size 16 --cache-seqlens 300,0,1,15 --append 3 --rotary neox
  fac run --mask causal --batch 4 --heads 8 --kv-heads 2 --dim 64 --page-size 16 --cache-seqlens 300,1,200,50 --seqlens-q 1,1,37,0`,
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := checkDevice(device, "cpu", "cuda"); err != nil {
				return err
			}
			// Flags that would do nothing are refused (issue 46 item 13:
			// --bundle with --device cpu was silently ignored).
			if device != "cuda" && len(bundles) > 0 {
				return fmt.Errorf("--bundle %s: bundles hold GPU kernels, which --device %s does not run (the CPU interpreter compiles its own); drop --bundle or run --device cuda", bundles[0], device)
			}
			if bmMask != "" && bmDir == "" {
				return fmt.Errorf("--blockmask-mask %s says which mask a --blockmask folder was made for; give --blockmask DIR too", bmMask)
			}
			if err := dtypeDimConsts(cmd, &cf, &dtype, &shp); err != nil {
				return err
			}
			t, ok := tolerances[dtype]
			if !ok {
				return fmt.Errorf("--dtype %q: want f32, bf16 or f16", dtype)
			}
			if tol < 0 {
				return fmt.Errorf("--tol %g: want a positive tolerance (0 = the dtype's)", tol)
			} else if tol > 0 {
				t = tolerance{o: tol, lse: tol}
			}
			if err := bwf.check(outF, lseF); err != nil {
				return err
			}
			outputs := map[string]string{"--out": outF, "--lse-out": lseF, "--dq-out": bwf.dqOut, "--dk-out": bwf.dkOut, "--dv-out": bwf.dvOut, "--dsinks-out": bwf.dsinksOut}
			if err := checkOutputs(!anyStdout(outputs), outputs); err != nil {
				return err
			}
			target, err := tf.config("")
			if err != nil {
				return err
			}
			w := reportTo(cmd, anyStdout(outputs))
			if vlf.on() && df.changed() {
				return fmt.Errorf("--num-splits, --pack-gqa, --sms and --decode-const are for flash_fwd; varlen has no split-KV yet")
			}
			if pf.on(cmd) {
				sinks, err := readSinks(sinksF, &shp)
				if err != nil {
					return err
				}
				sh := shp.shape()
				if err := sh.Validate(); err != nil {
					return err
				}
				req, err := cf.request(files, "")
				if err != nil {
					return err
				}
				opts := fac.Options{Mask: cf.mask, Score: cf.score, Sources: req.Sources, Consts: req.Consts, DType: dtype, DimV: sh.DimV, Passes: req.Passes, Target: target, Sinks: sinks != nil}
				if err := df.apply(&opts); err != nil {
					return err
				}
				return pf.run(cmd, pagedArgs{w: w, opts: opts, sh: sh, device: device, bundles: bundles, seed: seed, scale: scale, noCheck: noCheck, fullCheck: fullCheck, tol: t, dtype: dtype, sinks: sinks})
			}
			if vlf.on() {
				return vlf.run(cmd, varlenArgs{w: w, cf: &cf, files: files, shp: &shp, qf: qf, kf: kf, vf: vf, outF: outF, lseF: lseF,
					dtype: dtype, device: device, seed: seed, scale: scale, noCheck: noCheck, tol: t, target: target})
			}
			// Sizes: the flags the user set, then the tensor files, then
			// the block mask; all must agree.
			tensors := map[string]*npy.Array{}
			for _, t := range []struct {
				flag, path string
				role       tensorRole
			}{{"q", qf, roleQ}, {"k", kf, roleK}, {"v", vf, roleV}} {
				if t.path == "" {
					continue
				}
				a, err := shp.noteTensor(t.flag, t.path, t.role)
				if err != nil {
					return err
				}
				tensors[t.flag] = a
			}
			if err := bwf.noteTensors(&shp); err != nil {
				return err
			}
			sinks, err := readSinks(sinksF, &shp)
			if err != nil {
				return err
			}
			var bm *blockmask.BlockMask
			consts := map[string]string{}
			blockFrom, blockSet := fmt.Sprintf("--block %d", block), cmd.Flags().Changed("block")
			bq, bk := block, block
			if bmDir != "" {
				var err error
				if bm, err = loadBlockMask(bmDir, &shp, block); err != nil {
					return err
				}
				if blockSet && (bm.BlockQ != block || bm.BlockK != block) {
					return fmt.Errorf("--block is %d, but --blockmask %s has blocks of %d×%d", block, bmDir, bm.BlockQ, bm.BlockK)
				}
				bq, bk, blockSet = bm.BlockQ, bm.BlockK, true
				blockFrom = fmt.Sprintf("--blockmask %s (blocks of %d×%d)", bmDir, bq, bk)
				// With no --mask, the mask the block mask was built for:
				// the one it records, or the one --blockmask-mask vouches
				// for (issue 46 item 13).
				if !cmd.Flags().Changed("mask") {
					if bm.Mask != "" {
						cf.mask = bm.Mask
					} else if bmMask != "" {
						cf.mask = bmMask
					}
				}
			}
			req, err := cf.request(files, "")
			if err != nil {
				return err
			}
			for k, v := range req.Consts {
				consts[k] = v
			}
			if blockSet {
				if err := blockConsts(consts, bq, bk, true, blockFrom); err != nil {
					return err
				}
			}
			sh := shp.shape()
			if err := sh.Validate(); err != nil {
				return err
			}
			fwdConsts, bwdConsts, err := bwf.splitConsts(req.Sources, consts)
			if err != nil {
				return err
			}
			fwdOpts := fac.Options{Mask: cf.mask, Score: cf.score, Sources: req.Sources, Consts: fwdConsts, DType: dtype, DimV: sh.DimV, Passes: req.Passes,
				Sinks: sinks != nil, Target: target}
			if err := df.apply(&fwdOpts); err != nil {
				return err
			}
			t0 := time.Now()
			fwd, err := fac.CompileForward(fwdOpts, sh.Dim)
			if err != nil {
				return err
			}
			compileTime := time.Since(t0)
			if bm != nil {
				if err := checkBlockMaskMask(fwd, bm, bmDir, bmMask); err != nil {
					return err
				}
			}
			rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
			in := fac.Inputs{Scale: scale, BlockMask: bm, Sinks: sinks}
			for _, t := range []struct {
				name string
				dst  *[]float32
				n    int
			}{{"q", &in.Q, sh.Batch * sh.Heads * sh.SeqQ * sh.Dim}, {"k", &in.K, sh.Batch * sh.KV() * sh.SeqK * sh.Dim}, {"v", &in.V, sh.Batch * sh.KV() * sh.SeqK * sh.VDim()}} {
				*t.dst = tensorArg(tensors[t.name], t.n, rng)
			}
			aux, notes, err := ax.load(fwd, sh)
			if err != nil {
				return err
			}
			in.Aux = aux
			if in.Scalars, err = ax.scalarValues(fwd); err != nil {
				return err
			}
			fmt.Fprintf(w, "kernel %s mask=%s score=%s dtype=%s on %s\n", fwd.Result().Kernel, modName(fwd.Mask()), modName(fwd.Score()), dtype, device)
			fmt.Fprintf(w, "shape B=%d H=%d Hkv=%d Sq=%d Sk=%d D=%d%s\n", sh.Batch, sh.Heads, sh.KV(), sh.SeqQ, sh.SeqK, sh.Dim, dvNote(sh))
			if sinks != nil {
				fmt.Fprintf(w, "sinks %s: %d per-head logits\n", sinksF, len(sinks))
			}
			if bm != nil {
				fmt.Fprintf(w, "block mask %s: mask %s, blocks of %d×%d\n", bmDir, bm.Mask, bm.BlockQ, bm.BlockK)
			}
			for _, n := range notes {
				fmt.Fprintln(w, n)
			}
			stderr, term := cmd.ErrOrStderr(), isTerminal(os.Stderr)
			var o, lse []float32
			var gpu *fac.CUDA
			t1 := time.Now()
			sms := 0
			if device == "cuda" {
				if gpu, err = openGPU(bundles); err != nil {
					return err
				}
				sms = gpu.SMs()
				if fb := fac.ArchFallback(gpu.Arch); fb != "" {
					fmt.Fprintf(w, "note: %s\n", fb)
				}
			}
			plan, err := fwd.Plan(sh, sms)
			if err == nil && gpu != nil {
				plan, err = fwd.PlanCUDA(gpu, sh)
			}
			if err != nil {
				return err
			}
			if plan.Fallback != "" {
				fmt.Fprintf(w, "decoding: flash_fwd alone: %s\n", plan.Fallback)
			}
			if plan.SplitKV {
				fmt.Fprintf(w, "decoding: %s\n", plan)
				alone := "--num-splits 1"
				if plan.Pack > 1 || fwd.Options().PackGQA == fac.PackGQAOn {
					alone += " --pack-gqa off"
				}
				fmt.Fprintf(w, "  instead of flash_fwd alone, because of %s (%s runs flash_fwd alone)\n", fwd.Reason(plan, sh), alone)
			}
			if device == "cuda" {
				if o, lse, err = fwd.RunCUDA(gpu, in, sh); err != nil {
					return err
				}
			} else if err := withProgress(stderr, term, "running on the CPU interpreter", "", func() (err error) {
				o, lse, err = fwd.RunCPU(in, sh)
				return err
			}); err != nil {
				return err
			}
			if bwf.on {
				return bwf.run(backwardRun{w: w, in: in, o: o, lse: lse, sh: sh, dtype: dtype, device: device, gpu: gpu, rng: rng, tol: t,
					noCheck: noCheck, fwdCompile: compileTime, fwdRun: time.Since(t1), stderr: stderr, terminal: term,
					opts: fac.Options{Mask: cf.mask, Score: cf.score, Sources: req.Sources, Consts: bwdConsts, DType: dtype, DimV: sh.DimV, Passes: req.Passes, Target: target}})
			}
			fmt.Fprintf(w, "compile %.1f ms, run %.1f ms\n", ms(compileTime), ms(time.Since(t1)))
			if noCheck {
				fmt.Fprintln(w, "check skipped (--no-check): no float64 reference computed, the output is unchecked")
			} else {
				rep, err := checkForward(w, stderr, term, fwd, in, sh, o, lse, fullCheck)
				if err != nil {
					return err
				}
				if err := rep.report(w, t, dtype); err != nil {
					return err
				}
			}
			if outF != "" {
				if err := writeNpy(outF, []int{sh.Batch, sh.Heads, sh.SeqQ, sh.VDim()}, o); err != nil {
					return err
				}
			}
			if lseF != "" {
				if err := writeNpy(lseF, []int{sh.Batch, sh.Heads, sh.SeqQ}, lse); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cf.add(cmd, false)
	shp.add(cmd, 128, true)
	ax.add(cmd.Flags())
	bwf.add(cmd.Flags())
	vlf.add(cmd)
	pf.add(cmd)
	fs := cmd.Flags()
	df.add(fs)
	tf.add(fs)
	addDeviceFlag(fs, &device, "cpu", "device: cpu (reference interpreter) or cuda (GPU 0; time includes compile or cache load)")
	fs.StringVar(&dtype, "dtype", "f32", "element type of q, k, v, o: f32, bf16, f16")
	addBlockFlag(fs, &block)
	fs.StringVar(&qf, "q", "", "query .npy [B, H, Sq, D] (random if absent; gives the sizes)")
	fs.StringVar(&kf, "k", "", "key .npy [B, Hkv, Sk, D] (random if absent)")
	fs.StringVar(&vf, "v", "", "value .npy [B, Hkv, Sk, Dv] (random if absent; Dv, its head dim, may differ from q's and k's: --dim-v)")
	fs.StringVarP(&outF, "out", "o", "", "write O to this .npy file (- = stdout; the report then goes to stderr)")
	fs.StringVar(&lseF, "lse-out", "", "write LSE to this .npy file (- = stdout)")
	fs.Uint64Var(&seed, "seed", 1, "seed of the random inputs")
	fs.Float32Var(&scale, "scale", 0, "softmax scale (0 = 1/sqrt(dim))")
	fs.StringVar(&bmDir, "blockmask", "", "use the block mask in this folder (fac blockmask --out, or FlexAttention's tensors); its mask is the default --mask")
	fs.StringVar(&bmMask, "blockmask-mask", "", "the mask a --blockmask folder that records none (from PyTorch, or format fac-blockmask/1) was made for")
	fs.StringArrayVar(&bundles, "bundle", nil, "AOT bundle to load kernels from (repeatable; no llc needed)")
	fs.BoolVar(&noCheck, "no-check", false, "skip the float64 reference and the check (it is O(B·H·Sq·Sk) on the CPU)")
	fs.BoolVar(&fullCheck, "full-check", false, "check every row against the float64 reference even above 2^26 pairs (B·H·Sq·Sk), where 64 sampled rows are checked")
	fs.StringVar(&sinksF, "sinks", "", "per-head sink logits .npy [H] (gpt-oss): runs flash_fwd_sinks, each joins its head's softmax denominator")
	fs.Float64Var(&tol, "tol", 0, "tolerance of the check, on O relative to max |ref| and on LSE (0 = the dtype's)")
	aliases(cmd, map[string]string{"blockmask-block": "block"})
	return cmd
}

// loadBlockMask reads a --blockmask folder. A folder with block_mask.json
// has its own sizes, which must agree with the others; one without (from
// PyTorch) takes the sequence lengths and --block from the command line.
func loadBlockMask(dir string, shp *shapeFlags, block int) (*blockmask.BlockMask, error) {
	_, err := os.Stat(filepath.Join(dir, blockmask.MetaFile))
	if errors.Is(err, fs.ErrNotExist) {
		bm, err := blockmask.Load(dir, shp.seqQ, shp.seqK, block, block)
		if err != nil {
			return nil, fmt.Errorf("--blockmask: %w (no %s: sizes from --seqlen-q %d, --seqlen-k %d, --block %d)", err, blockmask.MetaFile, shp.seqQ, shp.seqK, block)
		}
		return bm, nil
	}
	bm, err := blockmask.Load(dir, 0, 0, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("--blockmask: %w", err)
	}
	from := fmt.Sprintf("--blockmask %s is for sequence lengths %d×%d", dir, bm.SeqQ, bm.SeqK)
	if err := shp.note("seqlen-q", bm.SeqQ, from); err != nil {
		return nil, err
	}
	if err := shp.note("seqlen-k", bm.SeqK, from); err != nil {
		return nil, err
	}
	return bm, nil
}

// checkBlockMaskMask refuses a block mask made for another mask than the
// kernel's: the kernel trusts its full and empty blocks, so the result
// would be another mask's attention. A folder that records no mask needs
// --blockmask-mask to say which mask it was made for.
func checkBlockMaskMask(fwd *fac.Forward, bm *blockmask.BlockMask, dir, vouched string) error {
	want := modName(fwd.Mask())
	canon := func(s string) string {
		e, err := parser.ParseExpr("<mask>", s)
		if err != nil {
			return s
		}
		m, err := fwd.Result().Program.ResolveMod(e, "mask")
		if err != nil {
			return s
		}
		return m.String()
	}
	switch {
	case bm.Mask == "" && vouched == "":
		return fmt.Errorf("--blockmask %s does not record the mask it was made for (no \"mask\" in its %s: made by PyTorch, or format fac-blockmask/1); "+
			"pass --blockmask-mask MASK to say it was made for %s, or rebuild it with fac blockmask --mask %q --out %s",
			dir, blockmask.MetaFile, want, want, dir)
	case bm.Mask == "":
		bm.Mask = vouched // the Go API checks it again
	case vouched != "" && canon(vouched) != canon(bm.Mask):
		return fmt.Errorf("--blockmask-mask is %s, but --blockmask %s records mask %s", vouched, dir, bm.Mask)
	}
	if got := canon(bm.Mask); got != want {
		return fmt.Errorf("--blockmask %s was built for mask %s, but the kernel's mask is %s (--mask); build one for it with fac blockmask --mask %q --out DIR",
			dir, bm.Mask, want, want)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func modName(m *lang.ModInst) string {
	if m == nil {
		return "none"
	}
	return m.String()
}

// tensorArg is a tensor file's values (its shape already checked), or n
// N(0, 1) values.
func tensorArg(a *npy.Array, n int, rng *rand.Rand) []float32 {
	if a != nil {
		return a.F32()
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64())
	}
	return out
}

func writeNpy(path string, shape []int, vals []float32) error {
	b, err := npy.EncodeF32(shape, vals)
	if err != nil {
		return err
	}
	return outfile.Write(path, b)
}

// dtypeDimConsts takes --const DTYPE, --const HEAD_DIM and --const
// HEAD_DIM_V as run's --dtype, --dim and --dim-v (constAsFlag); the head
// dims are sizes like the others, which the tensor files must agree with.
func dtypeDimConsts(cmd *cobra.Command, cf *compileFlags, dtype *string, shp *shapeFlags) error {
	fs := cmd.Flags()
	if v, ok := cf.takeConst("DTYPE"); ok {
		if err := constAsFlag(fs, "DTYPE", v, "dtype", *dtype, func(s string) error {
			if _, ok := tolerances[s]; !ok {
				return fmt.Errorf("want f32, bf16 or f16")
			}
			*dtype = s
			return nil
		}); err != nil {
			return err
		}
	}
	if err := headDimConstAsFlag(fs, cf, "HEAD_DIM", "dim", strconv.Itoa(shp.dim), func(n int, given string) error {
		return shp.note("dim", n, given)
	}); err != nil {
		return err
	}
	return headDimConstAsFlag(fs, cf, "HEAD_DIM_V", "dim-v", strconv.Itoa(shp.dimV), func(n int, given string) error {
		return shp.note("dim-v", n, given)
	})
}

// dvNote is ", Dv=N" for a shape whose V has its own head dim, else "".
func dvNote(sh fac.Shape) string {
	if sh.VDim() == sh.Dim {
		return ""
	}
	return fmt.Sprintf(" Dv=%d", sh.VDim())
}

// readSinks reads --sinks FILE ([H] f32), whose length gives or must match
// the head count; nil without the flag.
func readSinks(file string, shp *shapeFlags) ([]float32, error) {
	if file == "" {
		return nil, nil
	}
	a, err := npy.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--sinks: %w", err)
	}
	if len(a.Shape) != 1 {
		return nil, fmt.Errorf("--sinks %s: shape %v, want 1 dim [H]", file, a.Shape)
	}
	if err := shp.note("heads", a.Shape[0], fmt.Sprintf("--sinks %s has shape %v", file, a.Shape)); err != nil {
		return nil, err
	}
	return a.F32(), nil
}
