package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/blockmask"
	"github.com/fac-compiler/fac/internal/npy"
)

func runCmd() *cobra.Command {
	var cf compileFlags
	var (
		device                             string
		batch, heads, kvHeads, sq, sk, dim int
		dtype                              string
		qf, kf, vf, outF, lseF             string
		auxFlags                           []string
		seed                               uint64
		scale                              float32
		docLen                             int
		bundles                            []string
		bmDir                              string
		bmBlock                            int
	)
	cmd := &cobra.Command{
		Use:   "run [FILE...]",
		Short: "run forward attention with a mask on a device and compare it with naive attention",
		Example: `  fac run --device cpu --mask causal --batch 2 --heads 4 --seqlen-q 100 --seqlen-k 257 --dim 64
  fac run --mask document --aux doc=doc.npy --q q.npy --k k.npy --v v.npy --out o.npy`,
		RunE: func(cmd *cobra.Command, files []string) error {
			if device != "cpu" && device != "cuda" {
				return fmt.Errorf("--device %q: want cpu or cuda", device)
			}
			req, err := cf.request(files)
			if err != nil {
				return err
			}
			sh := fac.Shape{Batch: batch, Heads: heads, KVHeads: kvHeads, SeqQ: sq, SeqK: sk, Dim: dim}
			if err := sh.Validate(); err != nil {
				return err
			}
			t0 := time.Now()
			fwd, err := fac.CompileForward(fac.Options{Mask: cf.mask, Score: cf.score, Sources: req.Sources, Consts: req.Consts, DType: dtype, Passes: req.Passes}, dim)
			if err != nil {
				return err
			}
			compileTime := time.Since(t0)
			rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
			kvh := kvHeads
			if kvh == 0 {
				kvh = heads
			}
			in := fac.Inputs{Scale: scale, Aux: map[string]any{}}
			if in.Q, err = tensorArg(qf, []int{batch, heads, sq, dim}, rng); err != nil {
				return err
			}
			if in.K, err = tensorArg(kf, []int{batch, kvh, sk, dim}, rng); err != nil {
				return err
			}
			if in.V, err = tensorArg(vf, []int{batch, kvh, sk, dim}, rng); err != nil {
				return err
			}
			if err := auxArgs(in.Aux, auxFlags, fwd, sh, docLen); err != nil {
				return err
			}
			if bmDir != "" {
				if in.BlockMask, err = blockmask.Load(bmDir, sq, sk, bmBlock, bmBlock); err != nil {
					return err
				}
			}
			var o, lse []float32
			t1 := time.Now()
			if device == "cuda" {
				gpu, err := openGPU(bundles)
				if err != nil {
					return err
				}
				if o, lse, err = fwd.RunCUDA(gpu, in, sh); err != nil {
					return err
				}
			} else if o, lse, err = fwd.RunCPU(in, sh); err != nil {
				return err
			}
			runTime := time.Since(t1)
			ro, rlse, err := fwd.Reference(in, sh)
			if err != nil {
				return err
			}
			rep := compare(o, lse, ro, rlse)
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "kernel flash_fwd mask=%s score=%s dtype=%s on %s\n", modName(fwd.Mask()), modName(fwd.Score()), orDefault(dtype, "f32"), device)
			fmt.Fprintf(w, "shape B=%d H=%d Hkv=%d Sq=%d Sk=%d D=%d\n", batch, heads, kvh, sq, sk, dim)
			fmt.Fprintf(w, "compile %.1f ms, run %.1f ms\n", ms(compileTime), ms(runTime))
			fmt.Fprintf(w, "max |O - ref| = %.3g, relative to max |ref| = %.3g; max |LSE - ref| = %.3g; NaN: %d\n",
				rep.maxAbs, rep.rel, rep.lseErr, rep.nans)
			if outF != "" {
				if err := writeNpy(outF, []int{batch, heads, sq, dim}, o); err != nil {
					return err
				}
			}
			if lseF != "" {
				if err := writeNpy(lseF, []int{batch, heads, sq}, lse); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cf.add(cmd, false)
	fs := cmd.Flags()
	fs.StringVar(&device, "device", "cpu", "device: cpu (reference interpreter) or cuda (GPU 0; time includes compile or cache load)")
	fs.IntVar(&batch, "batch", 2, "batch size")
	fs.IntVar(&heads, "heads", 2, "query heads")
	fs.IntVar(&kvHeads, "kv-heads", 0, "key/value heads (grouped-query attention); 0 = heads")
	fs.IntVar(&sq, "seqlen-q", 128, "query sequence length")
	fs.IntVar(&sk, "seqlen-k", 128, "key sequence length")
	fs.IntVar(&dim, "dim", 64, "head dimension")
	fs.StringVar(&dtype, "dtype", "f32", "element type of q, k, v, o: f32, bf16, f16")
	fs.StringVar(&qf, "q", "", "query .npy [B, H, Sq, D] (random if absent)")
	fs.StringVar(&kf, "k", "", "key .npy [B, Hkv, Sk, D] (random if absent)")
	fs.StringVar(&vf, "v", "", "value .npy [B, Hkv, Sk, D] (random if absent)")
	fs.StringVar(&outF, "out", "", "write O to this .npy file")
	fs.StringVar(&lseF, "lse-out", "", "write LSE to this .npy file")
	fs.StringArrayVar(&auxFlags, "aux", nil, "aux tensor NAME=FILE.npy for the mods (e.g. doc=doc.npy)")
	fs.Uint64Var(&seed, "seed", 1, "seed of the random inputs")
	fs.Float32Var(&scale, "scale", 0, "softmax scale (0 = 1/sqrt(dim))")
	fs.StringVar(&bmDir, "blockmask", "", "use the block mask in this folder (.npy files named like FlexAttention's BlockMask fields)")
	fs.IntVar(&bmBlock, "blockmask-block", 128, "block size of --blockmask when its folder has no block_mask.json")
	fs.StringArrayVar(&bundles, "bundle", nil, "AOT bundle to load kernels from (repeatable; no llc needed)")
	fs.IntVar(&docLen, "doc-len", 0, "when no doc aux is given: tokens per random-length document (0 = about seqlen/4)")
	return cmd
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func modName(m interface{ String() string }) string {
	if m == nil {
		return "none"
	}
	return m.String()
}

// tensorArg reads a .npy of the given shape, or draws N(0, 1) values.
func tensorArg(path string, shape []int, rng *rand.Rand) ([]float32, error) {
	n := 1
	for _, d := range shape {
		n *= d
	}
	if path == "" {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out, nil
	}
	a, err := npy.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if a.Len() != n || len(a.Shape) != len(shape) {
		return nil, fmt.Errorf("%s: shape %v, want %v", path, a.Shape, shape)
	}
	for i := range shape {
		if a.Shape[i] != shape[i] {
			return nil, fmt.Errorf("%s: shape %v, want %v", path, a.Shape, shape)
		}
	}
	return a.F32(), nil
}

// auxArgs loads --aux files and fills in sensible defaults for the stdlib's
// aux tensors (document ids, ALiBi slopes) when none is given.
func auxArgs(aux map[string]any, flags []string, fwd *fac.Forward, sh fac.Shape, docLen int) error {
	for _, kv := range flags {
		name, path, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("--aux %q: want NAME=FILE.npy", kv)
		}
		a, err := npy.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasPrefix(a.Dtype, "<i") {
			v, err := a.I32()
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			aux[name] = v
		} else {
			aux[name] = a.F32()
		}
	}
	if m := fwd.Mask(); m != nil {
		for _, a := range m.AuxParams() {
			if _, ok := aux[a.Name]; ok || a.Name != "doc" {
				continue
			}
			n := max(sh.SeqQ, sh.SeqK)
			l := docLen
			if l <= 0 {
				l = max(1, n/4)
			}
			doc := make([]int32, n)
			for i := range doc {
				doc[i] = int32(i / l)
			}
			aux["doc"] = doc
		}
	}
	if s := fwd.Score(); s != nil {
		for _, a := range s.AuxParams() {
			if _, ok := aux[a.Name]; ok || a.Name != "slopes" {
				continue
			}
			sl := make([]float32, sh.Heads)
			for h := range sl {
				sl[h] = float32(math.Exp2(-8 * float64(h+1) / float64(sh.Heads)))
			}
			aux["slopes"] = sl
		}
	}
	return nil
}

func writeNpy(path string, shape []int, vals []float32) error {
	b, err := npy.EncodeF32(shape, vals)
	if err != nil {
		return err
	}
	return npy.WriteFile(path, b)
}

type report struct {
	maxAbs, rel, lseErr float64
	nans                int
}

// compare measures O and LSE against the reference; -inf LSE must match
// exactly, NaN is counted, never hidden.
func compare(o, lse []float32, ro, rlse []float64) report {
	var r report
	maxRef := 0.0
	for i := range o {
		x := float64(o[i])
		if math.IsNaN(x) {
			r.nans++
			continue
		}
		r.maxAbs = math.Max(r.maxAbs, math.Abs(x-ro[i]))
		maxRef = math.Max(maxRef, math.Abs(ro[i]))
	}
	if maxRef > 0 {
		r.rel = r.maxAbs / maxRef
	} else {
		r.rel = r.maxAbs
	}
	for i := range lse {
		x := float64(lse[i])
		switch {
		case math.IsNaN(x):
			r.nans++
		case math.IsInf(rlse[i], -1) || math.IsInf(x, -1):
			if x != rlse[i] {
				r.lseErr = math.Inf(1)
			}
		default:
			r.lseErr = math.Max(r.lseErr, math.Abs(x-rlse[i]))
		}
	}
	return r
}
