package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fac-compiler/fac"
	"github.com/fac-compiler/fac/internal/npy"
)

// shapeFlags are the problem-size flags of run and blockmask. A size may
// also come from a file (--q/--k/--v, a --blockmask folder); every source
// that gives a size must agree, and a flag left unset takes the files'
// value before its default.
type shapeFlags struct {
	batch, heads, kvHeads, seqQ, seqK, dim int
	// dimV is V's (and O's) head dim: 0 until --dim-v, --const HEAD_DIM_V
	// or a V- or O-shaped file gives it, then the head dim of Q and K.
	dimV   int
	fs     *pflag.FlagSet
	withKV bool // run: --kv-heads, --dim and --dim-v exist

	known map[string]dimSource // by flag name
}

// dimSource is one size and what gave it, for errors naming both sides.
type dimSource struct {
	v    int
	from string // "--seqlen-q is 100", "q.npy has shape [2 2 128 64]"
}

func (s *shapeFlags) add(cmd *cobra.Command, seqDefault int, withKV bool) {
	fs := cmd.Flags()
	s.fs, s.withKV = fs, withKV
	// Only run reads tensor files and block-mask folders that give sizes.
	from := func(src string) string {
		if withKV {
			return " (when not given: from " + src + ")"
		}
		return ""
	}
	fs.IntVar(&s.batch, "batch", 2, "batch size"+from("--q"))
	fs.IntVar(&s.heads, "heads", 2, "query heads"+from("--q"))
	fs.IntVar(&s.seqQ, "seqlen-q", seqDefault, "query sequence length"+from("--q or --blockmask"))
	fs.IntVar(&s.seqK, "seqlen-k", seqDefault, "key sequence length"+from("--k or --blockmask"))
	if withKV {
		fs.IntVar(&s.kvHeads, "kv-heads", 0, "key/value heads, grouped-query attention (when not given: from --k, else = heads)")
		fs.IntVar(&s.dim, "dim", 64, "head dimension of q and k (when not given: from --q)")
		fs.IntVar(&s.dimV, "dim-v", 0, "head dimension of v and o, where it differs from --dim (DeepSeek's 192 and 128; when not given: from --v or --do, else --dim)")
	}
}

// ptr is the variable behind a size flag.
func (s *shapeFlags) ptr(name string) *int {
	switch name {
	case "batch":
		return &s.batch
	case "heads":
		return &s.heads
	case "kv-heads":
		return &s.kvHeads
	case "seqlen-q":
		return &s.seqQ
	case "seqlen-k":
		return &s.seqK
	case "dim":
		return &s.dim
	case "dim-v":
		return &s.dimV
	}
	panic("shapeFlags: no size " + name)
}

// note records that from gives size name = v; a different value already
// given by another source is an error naming both.
func (s *shapeFlags) note(name string, v int, from string) error {
	if s.known == nil {
		s.known = map[string]dimSource{}
		// Flags the user set come first: they are what the user said.
		for _, n := range []string{"batch", "heads", "kv-heads", "seqlen-q", "seqlen-k", "dim", "dim-v"} {
			if f := s.fs.Lookup(n); f != nil && f.Changed {
				s.known[n] = dimSource{*s.ptr(n), fmt.Sprintf("--%s is %d", n, *s.ptr(n))}
			}
		}
	}
	if p, ok := s.known[name]; ok {
		if p.v != v {
			return fmt.Errorf("%s, but %s (%s %d)", p.from, from, name, v)
		}
		return nil
	}
	s.known[name] = dimSource{v, from}
	*s.ptr(name) = v
	return nil
}

// tensorRole is which of attention's tensors a file holds, for the sizes
// it gives: q [B, H, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] or o
// (O, dO: [B, H, Sq, Dv]).
type tensorRole int

const (
	roleQ tensorRole = iota
	roleK
	roleV
	roleO
)

// noteTensor reads a [B, H, S, D] tensor file of the given role and notes
// its sizes.
func (s *shapeFlags) noteTensor(flag, path string, role tensorRole) (*npy.Array, error) {
	a, err := npy.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	want := [...]string{roleQ: "[B, H, Sq, D]", roleK: "[B, Hkv, Sk, D]", roleV: "[B, Hkv, Sk, Dv]", roleO: "[B, H, Sq, Dv]"}[role]
	if len(a.Shape) != 4 {
		return nil, fmt.Errorf("--%s %s: shape %v, want 4 dims %s", flag, path, a.Shape, want)
	}
	names := [...][]string{
		roleQ: {"batch", "heads", "seqlen-q", "dim"},
		roleK: {"batch", "kv-heads", "seqlen-k", "dim"},
		roleV: {"batch", "kv-heads", "seqlen-k", "dim-v"},
		roleO: {"batch", "heads", "seqlen-q", "dim-v"},
	}[role]
	from := fmt.Sprintf("--%s %s has shape %v", flag, path, a.Shape)
	for i, n := range names {
		if err := s.note(n, a.Shape[i], from); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// shape is the resolved problem (DimV 0 when V's head dim is Q's).
func (s *shapeFlags) shape() fac.Shape {
	sh := fac.Shape{Batch: s.batch, Heads: s.heads, KVHeads: s.kvHeads, SeqQ: s.seqQ, SeqK: s.seqK, Dim: s.dim}
	if s.dimV != 0 && s.dimV != s.dim {
		sh.DimV = s.dimV
	}
	return sh
}
