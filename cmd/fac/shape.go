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
	fs                                     *pflag.FlagSet
	withKV                                 bool // run: --kv-heads and --dim exist

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
		fs.IntVar(&s.dim, "dim", 64, "head dimension (when not given: from --q)")
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
	}
	panic("shapeFlags: no size " + name)
}

// note records that from gives size name = v; a different value already
// given by another source is an error naming both.
func (s *shapeFlags) note(name string, v int, from string) error {
	if s.known == nil {
		s.known = map[string]dimSource{}
		// Flags the user set come first: they are what the user said.
		for _, n := range []string{"batch", "heads", "kv-heads", "seqlen-q", "seqlen-k", "dim"} {
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

// noteTensor reads a [B, H, S, D] tensor file and notes its sizes; kv
// says it is k or v ([B, Hkv, Sk, D]).
func (s *shapeFlags) noteTensor(flag, path string, kv bool) (*npy.Array, error) {
	a, err := npy.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	if len(a.Shape) != 4 {
		want := "[B, H, Sq, D]"
		if kv {
			want = "[B, Hkv, Sk, D]"
		}
		return nil, fmt.Errorf("--%s %s: shape %v, want 4 dims %s", flag, path, a.Shape, want)
	}
	names := []string{"batch", "heads", "seqlen-q", "dim"}
	if kv {
		names = []string{"batch", "kv-heads", "seqlen-k", "dim"}
	}
	from := fmt.Sprintf("--%s %s has shape %v", flag, path, a.Shape)
	for i, n := range names {
		if err := s.note(n, a.Shape[i], from); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// shape is the resolved problem.
func (s *shapeFlags) shape() fac.Shape {
	return fac.Shape{Batch: s.batch, Heads: s.heads, KVHeads: s.kvHeads, SeqQ: s.seqQ, SeqK: s.seqK, Dim: s.dim}
}
