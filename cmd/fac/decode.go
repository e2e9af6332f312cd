package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/fac-compiler/fac"
)

// decodeFlags are the split-KV and PackGQA choices of fac run, fac bench
// and fac build (docs/decoding.md).
type decodeFlags struct {
	numSplits, packGQA string
	sms                int
	consts             []string
	fs                 *pflag.FlagSet
}

func (d *decodeFlags) add(fs *pflag.FlagSet) {
	d.fs = fs
	fs.StringVar(&d.numSplits, "num-splits", "auto", fmt.Sprintf("split-KV: split each q tile's kv blocks over N programs (flash_fwd_splitkv + flash_fwd_combine); auto, or 1 (off) to %d", fac.MaxSplits))
	fs.StringVar(&d.packGQA, "pack-gqa", "auto", "pack the query heads of a kv head into one tile: auto (Sq ≤ 64 with GQA), on or off")
	fs.IntVar(&d.sms, "sms", 0, "multiprocessor count the automatic split choice fills (0: the GPU's; 132, an H200's, on the CPU)")
	fs.StringArrayVar(&d.consts, "decode-const", nil, "compile-time argument NAME=VALUE of flash_fwd_splitkv, e.g. BLOCK_N=64, num_warps=8, BLOCK_M=64, pdl=true or fused_combine=true (the split kernel merges in place, no flash_fwd_combine; repeatable)")
}

// changed reports whether any of the flags was given.
func (d *decodeFlags) changed() bool {
	for _, n := range []string{"num-splits", "pack-gqa", "sms", "decode-const"} {
		if d.fs != nil && d.fs.Changed(n) {
			return true
		}
	}
	return false
}

// apply sets the choices in o.
func (d *decodeFlags) apply(o *fac.Options) error {
	var err error
	if o.NumSplits, err = fac.ParseNumSplits(d.numSplits); err != nil {
		return fmt.Errorf("--%w", err)
	}
	if o.PackGQA, err = fac.ParsePackGQA(d.packGQA); err != nil {
		return fmt.Errorf("--%w", err)
	}
	if d.sms < 0 {
		return fmt.Errorf("--sms %d: want a positive multiprocessor count (0 = the GPU's)", d.sms)
	}
	o.SMs = d.sms
	if len(d.consts) > 0 {
		o.DecodeConsts = map[string]string{}
		for _, kv := range d.consts {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" || strings.TrimSpace(v) == "" {
				return fmt.Errorf("--decode-const %q: want NAME=VALUE", kv)
			}
			o.DecodeConsts[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return nil
}
