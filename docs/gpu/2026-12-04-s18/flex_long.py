"""FlexAttention forward at issue 11's long-context shape (B=1, H=16, D=128, bf16):
causal and sliding window 1024 at S=32768, timed as flex_bench.py times (triton do_bench,
median, torch.compile'd flex_attention). One JSON line per mask."""
import json, sys
import torch
from torch.nn.attention.flex_attention import flex_attention, create_block_mask
import triton.testing as tt

dev = "cuda"
B, H, D = 1, 16, 128
masks = {
    "causal": lambda b, h, qi, ki: qi >= ki,
    "sliding1024": lambda b, h, qi, ki: (qi >= ki) & (qi - ki < 1024),
}
for S in [int(a) for a in sys.argv[1:]] or [32768]:
    for name, mm in masks.items():
        q, k, v = [torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16) for _ in range(3)]
        bm = create_block_mask(mm, None, None, S, S, device=dev)
        # Kept pairs, counted per row (S×S at once would be 1 GiB per mask).
        qi = torch.arange(S, device=dev)
        lo = torch.clamp(qi - 1023, min=0) if name == "sliding1024" else torch.zeros_like(qi)
        pairs = B * H * int((qi - lo + 1).sum().item())
        fa = torch.compile(flex_attention)
        fa(q, k, v, block_mask=bm)
        ms = tt.do_bench(lambda: fa(q, k, v, block_mask=bm), warmup=25, rep=100, return_mode="median")
        print(json.dumps(dict(what="flex", S=S, B=B, H=H, D=D, mask=name, fwd_ms=ms,
                              fwd_tflops=4 * pairs * D / ms / 1e9)), flush=True)
        torch._dynamo.reset()
