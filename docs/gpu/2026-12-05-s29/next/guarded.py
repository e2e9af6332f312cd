#!/usr/bin/env python3
"""A ptxas probe for sliding window's half blocks (docs/decisions.md, session 29): does ptxas
serialize a wgmma pipeline whose instructions carry guard predicates (warning C75xx)?

Reads a forward kernel's PTX and writes two variants:
  <out>-pv.ptx  the last half of each P·V run (RS-form wgmmas, a run of 8 k-steps at D = 128)
                guarded by @g, as skipping a warpgroup's empty 64-key half would;
  <out>-qk.ptx  each Q·Kᵀ m64n128 (SS form) issued as `@!g m64n128` or `@g m64n64` on the first
                32 accumulators, as issuing only the kept half would.
g is set from the parity register of the nearest mbarrier wait above (a run-time value, so ptxas
cannot fold the guard away). The variants compute nonsense: they are for `ptxas -v` only.
Usage: guarded.py in.ptx out-prefix
"""
import re, sys

src, out = sys.argv[1], sys.argv[2]
lines = open(src).read().split("\n")
wait = re.compile(r"mbarrier\.try_wait\.parity\S*\s+\S+,\s*\[[^\]]+\],\s*(%r\d+);")
mma = re.compile(r"^wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.(\S+) \{([^}]*)\}, (.*);$")


def variant(kind):
    res, parity, run = [], None, []
    for i, ln in enumerate(lines):
        m = wait.search(ln)
        if m:
            parity = m.group(1)
        mm = mma.match(ln)
        if not mm or parity is None:
            res.append(ln)
            continue
        n, types, regs, rest = mm.groups()
        rs = rest.startswith("{")  # A from registers: P·V
        guard = f".reg .pred g;\nsetp.ne.b32 g, {parity}, 0;\n"
        if kind == "pv" and rs:
            run.append((len(res), parity))
            res.append(ln)
            continue
        if kind == "qk" and not rs and n == "128":
            half = ", ".join(regs.split(", ")[:32])
            res.append(guard + f"@!g {ln}\n@g wgmma.mma_async.sync.aligned.m64n64k16.{types} {{{half}}}, {rest};")
            continue
        res.append(ln)
    if kind == "pv":
        # Guard the second half of each run of consecutive P·V k-steps.
        runs, cur = [], []
        for j, par in run:
            if cur and j - cur[-1][0] > 12:
                runs.append(cur)
                cur = []
            cur.append((j, par))
        if cur:
            runs.append(cur)
        for r in runs:
            for j, par in r[len(r) // 2:]:
                res[j] = f".reg .pred g;\nsetp.ne.b32 g, {par}, 0;\n@g " + res[j]
    return "\n".join(res)


for kind in ("pv", "qk"):
    text = variant(kind)
    open(f"{out}-{kind}.ptx", "w").write(text)
    print(f"{out}-{kind}.ptx: {text.count('@g ') + text.count('@!g ')} guarded wgmmas")
