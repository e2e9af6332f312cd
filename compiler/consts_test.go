package compiler

import (
	"strings"
	"testing"
)

// TestConstRangesIssue46Item12: a compile-time argument outside its
// parameter's range fails at compile time naming it. Before, SPARSE_Q = 0
// compiled and divided by zero at run time, num_warps = 3 and
// num_stages = 0 compiled for the CPU device, and DTYPE = i32 compiled a
// kernel of integer attention. The schedule parameters are checked in any
// kernel that declares them, defaults included.
func TestConstRangesIssue46Item12(t *testing.T) {
	for _, c := range []struct {
		consts map[string]string
		want   string
	}{
		{map[string]string{"SPARSE_Q": "0"}, "kernel flash_fwd: SPARSE_Q = 0: want 1 to 1073741824"},
		{map[string]string{"SPARSE_K": "-128"}, "SPARSE_K = -128"},
		{map[string]string{"BLOCK_M": "0"}, "BLOCK_M = 0: want 1 to"},
		{map[string]string{"HEAD_DIM": "512"}, "HEAD_DIM = 512: want 1 to 256"},
		{map[string]string{"HEAD_DIM_V": "0"}, "HEAD_DIM_V = 0: want 1 to 256"},
		{map[string]string{"HEAD_DIM": "32", "HEAD_DIM_V": "512"}, "HEAD_DIM_V = 512: want 1 to 256"},
		{map[string]string{"num_warps": "3"}, "num_warps = 3: want a power of two from 1 to 32"},
		{map[string]string{"num_stages": "0"}, "num_stages = 0: want 1 to 8"},
		{map[string]string{"consumer_groups": "0"}, "consumer_groups = 0: want 1 to 4"},
		{map[string]string{"exp2_poly": "9"}, "exp2_poly = 9: want 0 to 8"},
		{map[string]string{"ctas_per_sm": "0"}, "ctas_per_sm = 0: want 1 to 32"},
		{map[string]string{"heads_group": "-1"}, "heads_group = -1"},
		{map[string]string{"DTYPE": "i32"}, "kernel flash_fwd: DTYPE = i32: want f32, bf16 or f16"},
	} {
		_, err := Compile(Request{Kernel: "flash_fwd", Consts: c.consts})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("issue 46 item 12: %v: %v, want an error with %q", c.consts, err, c.want)
		}
	}
	for _, k := range []string{"flash_bwd", "flash_fwd_splitkv", "flash_fwd_varlen"} {
		if _, err := Compile(Request{Kernel: k, Consts: map[string]string{"SPARSE_Q": "0"}}); err == nil || !strings.Contains(err.Error(), "SPARSE_Q = 0") {
			t.Errorf("issue 46 item 12: %s with SPARSE_Q = 0: %v", k, err)
		}
	}
	// A user kernel's schedule parameters, defaults included; its other
	// parameters are its own.
	src := "kernel k<num_warps: i32 = 3, SPARSE_Q: i32 = 0>(out: ptr[f32]) {\n    store(out + arange(0, 16), zeros([16], f32))\n}\n"
	if _, err := Compile(Request{Sources: map[string]string{"k.fa": src}, Kernel: "k"}); err == nil || !strings.Contains(err.Error(), "kernel k: num_warps = 3") {
		t.Errorf("user kernel with num_warps = 3: %v", err)
	}
	if _, err := Compile(Request{Sources: map[string]string{"k.fa": src}, Kernel: "k", Consts: map[string]string{"num_warps": "4"}}); err != nil {
		t.Errorf("user kernel's own SPARSE_Q = 0: %v", err)
	}
	// The kernels' defaults and tuned sets are in range.
	for _, k := range []string{"flash_fwd", "flash_bwd", "flash_fwd_varlen", "flash_fwd_splitkv", "flash_fwd_combine", "flash_bwd_dq", "block_classify"} {
		for _, arch := range []string{"", "sm_80", "sm_90a"} {
			consts := map[string]string{}
			if k != "block_classify" {
				consts["DTYPE"] = "bf16"
			}
			req := Request{Kernel: k, Consts: consts}
			req.Target.Arch = arch
			if _, err := Compile(req); err != nil {
				t.Errorf("%s on %q: %v", k, arch, err)
			}
		}
	}
}

// TestCheckArchIssue46Item11: arches fac has no target for are refused
// (--arch sm_1000 aborted llc with a stack dump); known ones on another
// arch's code path say which.
func TestCheckArchIssue46Item11(t *testing.T) {
	for _, a := range []string{"sm_1000", "sm_75", "sm_70", "sm_90b", "sm90a", "", "compute_90a", "sm_99"} {
		if _, err := CheckArch(a); err == nil {
			t.Errorf("issue 46 item 11: CheckArch(%q) accepted", a)
		}
	}
	for a, want := range map[string]string{"sm_80": "", "sm_90a": "", "sm_86": "runs sm_80's", "sm_89": "runs sm_80's",
		"sm_90": "without wgmma and TMA", "sm_100a": "runs sm_80's", "sm_120": "runs sm_80's", "sm_121f": "runs sm_80's"} {
		fb, err := CheckArch(a)
		if err != nil || (want == "") != (fb == "") || !strings.Contains(fb, want) {
			t.Errorf("CheckArch(%s) = %q, %v; want %q", a, fb, err, want)
		}
	}
}
